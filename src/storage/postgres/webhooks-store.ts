/**
 * Webhooks in PostgreSQL, shared by every instance:
 * - the cap of webhooks per account is exact: a creation takes a transaction-level advisory lock
 *   of its account before it counts, as a placement does for the open orders (decision 0024);
 * - a creation's Idempotency-Key is claimed with an advisory lock and looked up, as placeOrder's
 *   (idempotency-records.ts);
 * - deliveries are inserted by the trigger on events (migration 8), in the transaction that
 *   appends each event, and name it by `seq`. A claim runs the sequencer first (event-log.ts) and
 *   takes only events whose block has its ids (event-log.ts), an id being what a delivery sends as
 *   `webhook-id`;
 * - a claim is one statement: the due deliveries whose lease is free, locked with FOR UPDATE
 *   SKIP LOCKED (two instances claiming at once take different ones, neither waits), marked with
 *   the holder and the lease's end. Once that lease has ended, any instance may take the delivery
 *   again: a holder that died costs its deliveries one lease of delay (docs/decisions/0027);
 * - an attempt is recorded only while the delivery is still the holder's, under its row lock.
 */
import type { PostgresSql } from './driver.ts';
import { claimKey, findRecord, rememberRecord } from './idempotency-records.ts';
import { toEvent, type EventRow } from '../events.ts';
import { afterAttempt } from '../../webhooks/retries.ts';
import { MAX_ATTEMPTS_PER_ENDPOINT } from '../../webhooks/runner.ts';
import {
  ATTEMPTS_KEPT, toDeliveryAttempt, toWebhook, type AttemptRow, type ClaimedDelivery, type WebhookCreation, type WebhookCreationResult, type WebhookOrders,
  type WebhookRow, type WebhooksStore,
} from '../webhooks.ts';
import { guard, guardRead } from './database.ts';
import { inTransaction } from './item-savepoints.ts';
import { blockStart, eventId, seqOfId, sequence } from './event-log.ts';

/** The id as text (exact past 2^53): an ORDER BY must name `webhooks.id`, since `id` alone is this text. */
const COLUMNS = 'id::text AS id, account, url, types, orders, status, created_at::text AS created_at';

/**
 * The claim: candidates (due, lease free, event sequenced, not skipped), oldest first, locked
 * and skipped when another claim holds them; of those at most MAX_ATTEMPTS_PER_ENDPOINT per
 * webhook (more would only wait in the runner while their lease runs), then `$3` of them.
 */
const CLAIM = `WITH candidates AS (
    SELECT d.webhook_id, d.event_seq, d.due_at FROM webhook_deliveries d JOIN events e ON e.seq = d.event_seq JOIN events f ON f.seq = ${blockStart('e')}
     WHERE d.due_at <= $1::bigint AND d.lease_until <= $1::bigint AND f.id IS NOT NULL AND NOT (d.webhook_id = ANY ($4::bigint[]))
     ORDER BY d.due_at, d.event_seq LIMIT $3 * ${MAX_ATTEMPTS_PER_ENDPOINT}
     FOR UPDATE OF d SKIP LOCKED),
  ranked AS (SELECT c.*, row_number() OVER (PARTITION BY c.webhook_id ORDER BY c.due_at, c.event_seq) AS n FROM candidates c),
  chosen AS (SELECT webhook_id, event_seq FROM ranked WHERE n <= ${MAX_ATTEMPTS_PER_ENDPOINT} ORDER BY due_at, event_seq LIMIT $3)
  UPDATE webhook_deliveries d SET holder = $5, lease_until = $2::bigint
    FROM chosen c, webhooks w, events e, events f
   WHERE d.webhook_id = c.webhook_id AND d.event_seq = c.event_seq AND w.id = d.webhook_id AND e.seq = d.event_seq AND f.seq = ${blockStart('e')}
  RETURNING d.webhook_id::text AS webhook_id, d.attempt, w.account, w.orders, w.url, w.secret,
            ${eventId('f', 'e')}::text AS id, e.type, e.occurred_at::text AS occurred_at, e.actor_account, e.actor_key_id, e.account AS event_account, e.data`;

type ClaimRow = Omit<EventRow, 'account'> & { webhook_id: string; attempt: number; account: string; orders: WebhookOrders; url: string; secret: string; event_account: string | null };

/** The webhooks store over a migrated database. */
export function createWebhooksStore(sql: PostgresSql): WebhooksStore {
  const get = async (account: string, id: number) => {
    const rows = await guardRead(() => sql.unsafe<WebhookRow[]>(`SELECT ${COLUMNS} FROM webhooks WHERE id = $1::bigint AND account = $2`, [id, account], { prepare: true }));
    return rows.length === 0 ? null : toWebhook(rows[0]!);
  };
  return {
    create: (creation) => guard(() => inTransaction(sql, (tx) => create(tx, creation))),

    async list({ account, afterId, limit }) {
      const rows = await guardRead(() => sql.unsafe<WebhookRow[]>(
        `SELECT ${COLUMNS} FROM webhooks WHERE account = $1 AND id > $2::bigint ORDER BY webhooks.id LIMIT $3`, [account, afterId, limit], { prepare: true }));
      return rows.map(toWebhook);
    },

    get,

    change: (patch) => guard(() => inTransaction(sql, async (tx) => {
      const rows = await tx.unsafe<WebhookRow[]>(`SELECT ${COLUMNS} FROM webhooks WHERE id = $1::bigint AND account = $2 FOR UPDATE`, [patch.id, patch.account], { prepare: true });
      if (rows.length === 0) return null;
      const current = toWebhook(rows[0]!);
      const status = patch.status ?? current.status;
      const [row] = await tx.unsafe<WebhookRow[]>(
        `UPDATE webhooks SET url = $2, types = $3::text[], orders = $4, status = $5,
           failing_since = CASE WHEN $5 = 'enabled' AND status = 'disabled' THEN NULL ELSE failing_since END
         WHERE id = $1::bigint RETURNING ${COLUMNS}`,
        [patch.id, patch.url ?? current.url, [...(patch.types ?? current.types)], patch.orders ?? current.orders, status],
        { prepare: true },
      );
      // A disabled webhook's pending deliveries are dropped: enabled again, it gets the events from then on.
      if (status === 'disabled') await tx.unsafe('DELETE FROM webhook_deliveries WHERE webhook_id = $1::bigint', [patch.id], { prepare: true });
      return toWebhook(row!);
    })),

    async remove(account, id) {
      const result = await guard(() => sql.unsafe('DELETE FROM webhooks WHERE id = $1::bigint AND account = $2', [id, account], { prepare: true }));
      return result.count === 1;
    },

    async attempts(account, id) {
      if (await get(account, id) === null) return null;
      const rows = await guardRead(() => sql.unsafe<AttemptRow[]>(
        `SELECT event_id::text AS event_id, attempt, attempted_at::text AS attempted_at, status, error, duration_ms FROM webhook_attempts
          WHERE webhook_id = $1::bigint ORDER BY id DESC LIMIT ${ATTEMPTS_KEPT}`, [id], { prepare: true }));
      return rows.map(toDeliveryAttempt);
    },

    findIdempotencyRecord: (apiKeyId, key, now) => guardRead(() => findRecord(sql, 'createWebhook', apiKeyId, key, now)),

    async claimDue(holder, now, leaseMs, limit, skip) {
      if (limit <= 0) return [];
      await guard(() => sequence(sql));
      const rows = await guard(() => sql.unsafe<ClaimRow[]>(CLAIM, [now, now + leaseMs, limit, [...skip], holder], { prepare: true }));
      return rows.map((row): ClaimedDelivery => ({
        webhookId: Number(row.webhook_id), account: row.account, orders: row.orders, url: row.url, secret: row.secret, attempt: row.attempt,
        event: toEvent({ ...row, account: row.event_account }),
      })).sort((a, b) => a.event.id - b.event.id);
    },

    recordAttempt: ({ delivery, holder, outcome, retryAt, disableAfterMs }) => guard(() => inTransaction(sql, async (tx) => {
      const webhookId = delivery.webhookId;
      const eventId = delivery.event.id;
      // The webhook's row first, then the delivery's, as every record takes them: its health is
      // updated by one record at a time.
      const hooks = await tx.unsafe<{ failing_since: string | null }[]>(
        'SELECT failing_since::text AS failing_since FROM webhooks WHERE id = $1::bigint FOR UPDATE', [webhookId], { prepare: true });
      if (hooks.length === 0) return;
      const held = await tx.unsafe<{ seq: string; attempt: number }[]>(
        `SELECT d.event_seq::text AS seq, d.attempt FROM webhook_deliveries d
          WHERE d.webhook_id = $1::bigint AND d.event_seq = ${seqOfId('$2::bigint')} AND d.holder = $3 FOR UPDATE`,
        [webhookId, eventId, holder], { prepare: true });
      // Taken over by another holder once this one's lease ended, or gone: not this holder's to record.
      if (held.length === 0) return;
      const { seq, attempt } = held[0]!;
      await tx.unsafe(
        `WITH logged AS (INSERT INTO webhook_attempts (webhook_id, event_id, attempt, attempted_at, status, error, duration_ms)
           VALUES ($1::bigint, $2::bigint, $3, $4::bigint, $5, $6, $7) RETURNING id)
         DELETE FROM webhook_attempts WHERE webhook_id = $1::bigint AND id <=
           (SELECT id FROM webhook_attempts WHERE webhook_id = $1::bigint ORDER BY id DESC LIMIT 1 OFFSET ${ATTEMPTS_KEPT - 1})`,
        [webhookId, eventId, attempt, outcome.attemptedAt, outcome.status, outcome.error, outcome.durationMs], { prepare: true });
      const succeeded = outcome.error === null;
      const failing = hooks[0]!.failing_since;
      const next = afterAttempt({ failingSince: failing === null ? null : Number(failing) }, succeeded, outcome.attemptedAt, disableAfterMs);
      await tx.unsafe(`UPDATE webhooks SET failing_since = $2::bigint, status = CASE WHEN $3 THEN 'disabled' ELSE status END WHERE id = $1::bigint`,
        [webhookId, next.failingSince, next.disable], { prepare: true });
      if (next.disable) await tx.unsafe('DELETE FROM webhook_deliveries WHERE webhook_id = $1::bigint', [webhookId], { prepare: true });
      else if (succeeded || retryAt === null) await tx.unsafe('DELETE FROM webhook_deliveries WHERE webhook_id = $1::bigint AND event_seq = $2::bigint', [webhookId, seq], { prepare: true });
      else {
        await tx.unsafe('UPDATE webhook_deliveries SET due_at = $3::bigint, attempt = attempt + 1, holder = NULL, lease_until = 0 WHERE webhook_id = $1::bigint AND event_seq = $2::bigint',
          [webhookId, seq, retryAt], { prepare: true });
      }
    })),

    async release(holder, deliveries) {
      if (deliveries.length === 0) return;
      await guard(() => sql.unsafe(
        `UPDATE webhook_deliveries d SET holder = NULL, lease_until = 0
           FROM unnest($2::bigint[], $3::bigint[]) AS r(webhook_id, event_id)
          WHERE d.holder = $1 AND d.webhook_id = r.webhook_id AND d.event_seq = ${seqOfId('r.event_id')}`,
        [holder, deliveries.map((d) => d.webhookId), deliveries.map((d) => d.event.id)], { prepare: true }));
    },

    async pending() {
      const [row] = await guardRead(() => sql.unsafe<{ n: string }[]>('SELECT count(*)::text AS n FROM webhook_deliveries', [], { prepare: true }));
      return Number(row!.n);
    },
  };
}

/** One creation, in its transaction: the account's lock, the key's claim, the count, the row and its record. */
async function create(tx: PostgresSql, { account, url, types, orders, secret, now, maxPerAccount, idempotency }: WebhookCreation): Promise<WebhookCreationResult> {
  if (idempotency) {
    const conflict = await claimKey(tx, 'createWebhook', idempotency.apiKeyId, idempotency.key, idempotency.createdAt);
    if (conflict) return conflict;
  }
  // Two creations of one account, on any instances, count one after the other: the cap is exact.
  await tx.unsafe(`SELECT pg_advisory_xact_lock(hashtextextended('webhooks of ' || $1, 0))`, [account], { prepare: true });
  const [{ n }] = await tx.unsafe<[{ n: number }]>('SELECT count(*)::integer AS n FROM webhooks WHERE account = $1', [account], { prepare: true });
  if (n >= maxPerAccount) return { kind: 'too_many_webhooks', limit: maxPerAccount };
  const [row] = await tx.unsafe<WebhookRow[]>(
    `INSERT INTO webhooks (account, url, types, orders, status, secret, created_at) VALUES ($1, $2, $3::text[], $4, 'enabled', $5, $6::bigint) RETURNING ${COLUMNS}`,
    [account, url, [...types], orders, secret, now], { prepare: true });
  const webhook = toWebhook(row!);
  if (idempotency) await rememberRecord(tx, 'createWebhook', idempotency, { webhook, secret });
  return { kind: 'created', webhook, secret };
}
