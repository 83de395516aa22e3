/**
 * Webhooks in SQLite: the reads on one connection, and every write (the endpoints, and the
 * delivery worker's claims, records and releases: webhook-writes.ts) made through `submit`, in
 * place or by the writer thread, like every other write.
 */
import type { DatabaseSync } from 'node:sqlite';
import { allSucceeded } from '../../lib/item-outcome.ts';
import { andThen, type MaybePromise } from '../../lib/maybe-promise.ts';
import { ATTEMPTS_KEPT, toDeliveryAttempt, type AttemptRow, type WebhooksStore } from '../webhooks.ts';
import { createIdempotencyRecords } from './idempotency-records.ts';
import { WEBHOOK_COLUMNS, webhookOfRow, type StoredWebhookRow } from './webhook-writes.ts';
import { localWrites, type SubmitWrites, type WriteItem, type WriteOp, type WriteResult } from './writer.ts';

/** The webhooks store of `db`; its writes through `submit`, in place by default. */
export function createWebhooksStore(db: DatabaseSync, submit: SubmitWrites = localWrites(db)): WebhooksStore {
  const records = createIdempotencyRecords(db, 'createWebhook');
  const byId = db.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE id = ? AND account = ?`);
  const page = db.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE account = ? AND id > ? ORDER BY id LIMIT ?`);
  const attempts = db.prepare(`SELECT event_id, attempt, attempted_at, status, error, duration_ms FROM webhook_attempts
    WHERE webhook_id = ? ORDER BY id DESC LIMIT ${ATTEMPTS_KEPT}`);
  const pending = db.prepare('SELECT count(*) AS n FROM webhook_deliveries');
  // Whether anything is due (an index probe), so that an idle worker's tick costs the writer nothing.
  const anyDue = db.prepare('SELECT 1 FROM webhook_deliveries WHERE due_at <= ? AND lease_until <= ? LIMIT 1');

  /** One item's write, its result once committed. */
  const one = <Op extends WriteOp>(op: Op, item: WriteItem<Op>): MaybePromise<WriteResult<Op>> =>
    andThen(submit(op, [item]), (outcomes) => allSucceeded(outcomes)[0]!);

  const get = (account: string, id: number) => {
    const row = byId.get(id, account) as StoredWebhookRow | undefined;
    return row === undefined ? null : webhookOfRow(row);
  };

  return {
    create: (creation) => one('createWebhooks', creation),
    list: ({ account, afterId, limit }) => (page.all(account, afterId, limit) as unknown as StoredWebhookRow[]).map(webhookOfRow),
    get,
    change: (change) => one('changeWebhooks', change),
    remove: (account, id) => one('removeWebhooks', { account, id }),
    attempts(account, id) {
      if (get(account, id) === null) return null;
      return (attempts.all(id) as unknown as AttemptRow[]).map(toDeliveryAttempt);
    },
    findIdempotencyRecord: (apiKeyId, key, now) => records.recall(apiKeyId, key, now),
    claimDue(holder, now, leaseMs, limit, skip) {
      if (limit <= 0 || anyDue.get(now, now) === undefined) return [];
      return one('claimDeliveries', { holder, now, leaseMs, limit, skip: [...skip] });
    },
    recordAttempt: (record) => andThen(one('recordAttempts', record), () => undefined),
    release(holder, deliveries) {
      if (deliveries.length === 0) return;
      return andThen(one('releaseDeliveries', { holder, deliveries: deliveries.map((d) => ({ webhookId: d.webhookId, eventId: d.event.id })) }), () => undefined);
    },
    pending: () => (pending.get() as { n: number }).n,
  };
}
