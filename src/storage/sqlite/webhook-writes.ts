/**
 * The writes of webhooks on SQLite, made inside a transaction that the caller holds (the writer's
 * executor): the endpoints (created, changed, removed), and their deliveries as the delivery
 * worker claims, records and releases them. Deliveries themselves are inserted by the trigger on
 * events (migration 9), in the transaction that appends each event.
 *
 * One connection writes the file, so these never race: the cap of webhooks per account is
 * counted under the write lock, and a claim is a plain UPDATE. The lease still matters: after a
 * crash, the deliveries a dead process had claimed are taken again once their lease has ended.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import { afterAttempt } from '../../webhooks/retries.ts';
import { MAX_ATTEMPTS_PER_ENDPOINT } from '../../webhooks/runner.ts';
import { toEvent, type EventRow, type EventType } from '../events.ts';
import {
  ATTEMPTS_KEPT, toWebhook, type AttemptRecord, type ClaimedDelivery, type Webhook, type WebhookChange, type WebhookCreation, type WebhookCreationResult,
  type WebhookOrders, type WebhookRow, type WebhookStatus,
} from '../webhooks.ts';
import { createIdempotencyRecords } from './idempotency-records.ts';
import type { IsolateItem } from './item-savepoints.ts';

/** What a claim asks for (storage/webhooks.ts, `claimDue`); `skip` as an array, which crosses threads. */
export interface DeliveryClaim {
  holder: string;
  now: number;
  leaseMs: number;
  limit: number;
  skip: readonly number[];
}

/** Claims given back unattempted. */
export interface DeliveryRelease {
  holder: string;
  deliveries: readonly { webhookId: number; eventId: number }[];
}

export interface WebhookWrites {
  create(items: readonly WebhookCreation[], isolate: IsolateItem): ItemOutcome<WebhookCreationResult>[];
  change(items: readonly WebhookChange[], isolate: IsolateItem): ItemOutcome<Webhook | null>[];
  remove(items: readonly { account: string; id: number }[], isolate: IsolateItem): ItemOutcome<boolean>[];
  claim(items: readonly DeliveryClaim[], isolate: IsolateItem): ItemOutcome<ClaimedDelivery[]>[];
  record(items: readonly AttemptRecord[], isolate: IsolateItem): ItemOutcome<boolean>[];
  release(items: readonly DeliveryRelease[], isolate: IsolateItem): ItemOutcome<number>[];
}

/** The columns of a webhook as SQLite's statements select them (`types` as stored: space-separated). */
export const WEBHOOK_COLUMNS = 'id, account, url, types, orders, status, created_at';

/** A row as selected, `types` still text. */
export type StoredWebhookRow = Omit<WebhookRow, 'types'> & { types: string };

export function webhookOfRow(row: StoredWebhookRow): Webhook {
  return toWebhook({ ...row, types: row.types === '' ? [] : (row.types.split(' ') as EventType[]) });
}

/** Prepares the statements of the writes of webhooks on `db` once. */
export function createWebhookWrites(db: DatabaseSync): WebhookWrites {
  const records = createIdempotencyRecords(db, 'createWebhook');
  const countOf = db.prepare('SELECT count(*) AS n FROM webhooks WHERE account = ?');
  const insert = db.prepare(`INSERT INTO webhooks (account, url, types, orders, status, secret, created_at)
    VALUES (?, ?, ?, ?, 'enabled', ?, ?) RETURNING ${WEBHOOK_COLUMNS}`);
  const byId = db.prepare(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE id = ? AND account = ?`);
  const update = db.prepare(`UPDATE webhooks SET url = :url, types = :types, orders = :orders, status = :status,
      failing_since = CASE WHEN :status = 'enabled' AND status = 'disabled' THEN NULL ELSE failing_since END
    WHERE id = :id RETURNING ${WEBHOOK_COLUMNS}`);
  const dropDeliveries = db.prepare('DELETE FROM webhook_deliveries WHERE webhook_id = ?');
  const remove = db.prepare('DELETE FROM webhooks WHERE id = ? AND account = ?');

  // The due deliveries whose lease is free, oldest first, at most MAX_ATTEMPTS_PER_ENDPOINT of a
  // webhook (more would only wait in the runner, their lease running), none of `skip`.
  const claim = db.prepare(`UPDATE webhook_deliveries SET holder = :holder, lease_until = :until
    WHERE (webhook_id, event_id) IN (
      SELECT webhook_id, event_id FROM (
        SELECT webhook_id, event_id, due_at, row_number() OVER (PARTITION BY webhook_id ORDER BY due_at, event_id) AS n
          FROM webhook_deliveries
         WHERE due_at <= :now AND lease_until <= :now AND webhook_id NOT IN (SELECT value FROM json_each(:skip)))
       WHERE n <= ${MAX_ATTEMPTS_PER_ENDPOINT} ORDER BY due_at, event_id LIMIT :limit)
    RETURNING webhook_id, event_id, attempt`);
  const target = db.prepare('SELECT account, orders, url, secret FROM webhooks WHERE id = ?');
  const event = db.prepare('SELECT id, type, occurred_at, actor_account, actor_key_id, account, data FROM events WHERE id = ?');

  const held = db.prepare('SELECT attempt FROM webhook_deliveries WHERE webhook_id = ? AND event_id = ? AND holder = ?');
  const log = db.prepare(`INSERT INTO webhook_attempts (webhook_id, event_id, attempt, attempted_at, status, error, duration_ms)
    VALUES (?, ?, ?, ?, ?, ?, ?)`);
  const trim = db.prepare(`DELETE FROM webhook_attempts WHERE webhook_id = :webhook AND id <=
    (SELECT id FROM webhook_attempts WHERE webhook_id = :webhook ORDER BY id DESC LIMIT 1 OFFSET ${ATTEMPTS_KEPT})`);
  const health = db.prepare('SELECT failing_since FROM webhooks WHERE id = ?');
  const setHealth = db.prepare(`UPDATE webhooks SET failing_since = ?, status = CASE WHEN ? THEN 'disabled' ELSE status END WHERE id = ?`);
  const done = db.prepare('DELETE FROM webhook_deliveries WHERE webhook_id = ? AND event_id = ?');
  const retry = db.prepare('UPDATE webhook_deliveries SET due_at = ?, attempt = attempt + 1, holder = NULL, lease_until = 0 WHERE webhook_id = ? AND event_id = ?');
  const release = db.prepare('UPDATE webhook_deliveries SET holder = NULL, lease_until = 0 WHERE webhook_id = ? AND event_id = ? AND holder = ?');

  function create({ account, url, types, orders, secret, now, maxPerAccount, idempotency }: WebhookCreation): WebhookCreationResult {
    // The write lock is held: this lookup, and the count, are the last word until this commits.
    const taken = idempotency ? records.recall(idempotency.apiKeyId, idempotency.key, idempotency.createdAt) : null;
    if (taken) return { conflict: 'recorded', record: taken };
    const { n } = countOf.get(account) as { n: number };
    if (n >= maxPerAccount) return { kind: 'too_many_webhooks', limit: maxPerAccount };
    const webhook = webhookOfRow(insert.get(account, url, types.join(' '), orders, secret, now) as unknown as StoredWebhookRow);
    if (idempotency) records.remember(idempotency, { webhook, secret });
    return { kind: 'created', webhook, secret };
  }

  function change(patch: WebhookChange): Webhook | null {
    const row = byId.get(patch.id, patch.account) as StoredWebhookRow | undefined;
    if (row === undefined) return null;
    const current = webhookOfRow(row);
    const status: WebhookStatus = patch.status ?? current.status;
    const orders: WebhookOrders = patch.orders ?? current.orders;
    const changed = webhookOfRow(update.get({
      id: patch.id, url: patch.url ?? current.url, types: (patch.types ?? current.types).join(' '), orders, status,
    }) as unknown as StoredWebhookRow);
    // A disabled webhook's pending deliveries are dropped: enabled again, it gets the events from then on.
    if (status === 'disabled') dropDeliveries.run(patch.id);
    return changed;
  }

  function claimDue({ holder, now, leaseMs, limit, skip }: DeliveryClaim): ClaimedDelivery[] {
    if (limit <= 0) return [];
    const rows = claim.all({ holder, until: now + leaseMs, now, limit, skip: JSON.stringify(skip) }) as { webhook_id: number; event_id: number; attempt: number }[];
    return rows.map(({ webhook_id, event_id, attempt }) => {
      const w = target.get(webhook_id) as { account: string; orders: WebhookOrders; url: string; secret: string };
      return { webhookId: webhook_id, account: w.account, orders: w.orders, url: w.url, secret: w.secret, event: toEvent(event.get(event_id) as unknown as EventRow), attempt };
    });
  }

  function record({ delivery, holder, outcome, retryAt, disableAfterMs }: AttemptRecord): boolean {
    const { webhookId } = delivery;
    const eventId = delivery.event.id;
    // Another holder took the delivery over (this one's lease ended), or it is gone (the webhook
    // disabled or removed meanwhile): the attempt is not this holder's to record.
    const mine = held.get(webhookId, eventId, holder) as { attempt: number } | undefined;
    if (mine === undefined) return false;
    log.run(webhookId, eventId, mine.attempt, outcome.attemptedAt, outcome.status, outcome.error, outcome.durationMs);
    trim.run({ webhook: webhookId });
    const succeeded = outcome.error === null;
    const { failing_since } = health.get(webhookId) as { failing_since: number | null };
    const next = afterAttempt({ failingSince: failing_since }, succeeded, outcome.attemptedAt, disableAfterMs);
    setHealth.run(next.failingSince, next.disable ? 1 : 0, webhookId);
    if (next.disable) dropDeliveries.run(webhookId);
    else if (succeeded || retryAt === null) done.run(webhookId, eventId);
    else retry.run(retryAt, webhookId, eventId);
    return true;
  }

  return {
    create: (items, isolate) => items.map((item) => isolate(() => create(item))),
    change: (items, isolate) => items.map((item) => isolate(() => change(item))),
    remove: (items, isolate) => items.map(({ account, id }) => isolate(() => Number(remove.run(id, account).changes) === 1)),
    claim: (items, isolate) => items.map((item) => isolate(() => claimDue(item))),
    record: (items, isolate) => items.map((item) => isolate(() => record(item))),
    release: (items, isolate) => items.map(({ holder, deliveries }) => isolate(() =>
      deliveries.reduce((released, { webhookId, eventId }) => released + Number(release.run(webhookId, eventId, holder).changes), 0))),
  };
}
