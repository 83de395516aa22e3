/**
 * The event log on PostgreSQL (the rules are storage/events.ts's), shared by every instance.
 *
 * Ids must become visible in id order, so that a consumer that has read id N never finds a
 * lower id later: a sequence alone does not give it (a transaction that drew a lower id may
 * commit after one that drew a higher id). So every transaction that writes events appends them
 * in its last statement, after taking one transaction-level advisory lock, the log's: ids are
 * drawn only under the lock, and PostgreSQL makes a commit visible before it releases the
 * transaction's locks, so the next transaction draws its ids only once every lower id is visible
 * (or rolled back, a gap nobody will fill). A transaction-level lock ends with the COMMIT, so it
 * holds through PgBouncer in transaction mode. docs/decisions/0025-event-ids-in-commit-order.md
 * weighs this against a visibility horizon and measures its cost.
 */
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import { eventColumns, eventsOfBatch, toEvent, type EventLog, type EventRow, type LoggedOp, type NewEvent } from '../events.ts';
import { guard, guardRead } from './database.ts';
import type { PostgresSql } from './driver.ts';
import { inTransaction } from './item-savepoints.ts';

/**
 * One statement: the log's lock, then a block of `$6` ids drawn from the identity's sequence at
 * once (every draw happens under the lock, so nobody draws between `nextval` and `setval`), then
 * the inserts, each row's id its place in the block: the ids follow the events' order without
 * resting on the order in which the executor computes rows. A CTE with a volatile function is evaluated once,
 * never inlined or left out, and `block` reads `log`'s row, so it runs once the lock is granted.
 */
const SEQUENCE = `pg_get_serial_sequence('events', 'id')`;
const APPEND = `WITH log AS (SELECT pg_advisory_xact_lock(hashtextextended('event log', 0))),
  block AS (SELECT setval(${SEQUENCE}, nextval(${SEQUENCE}) + $6::bigint - 1) AS last FROM log)
  INSERT INTO events (id, type, occurred_at, actor_account, actor_key_id, account, data) OVERRIDING SYSTEM VALUE
  SELECT block.last - $6::bigint + t.ord, t.type, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint, t.actor_account, t.actor_key_id, t.account, t.data
    FROM block, unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS t(type, actor_account, actor_key_id, account, data, ord)`;

/** Appends `events` in `tx`; it must be the transaction's last statement before its COMMIT. */
export async function appendEvents(tx: PostgresSql, events: readonly NewEvent[]): Promise<void> {
  if (events.length === 0) return;
  const rows = events.map(eventColumns);
  await tx.unsafe(APPEND, [
    rows.map((row) => row.type), rows.map((row) => row.actor_account), rows.map((row) => row.actor_key_id),
    rows.map((row) => row.account), rows.map((row) => row.data), rows.length,
  ], { prepare: true });
}

/**
 * `work` in a transaction of its own (item-savepoints.ts's inTransaction) that ends by appending
 * the events of what its items did: every write of pets and orders goes this way.
 */
export function inLoggedTransaction<R>(sql: PostgresSql, op: LoggedOp, items: readonly unknown[], work: (tx: PostgresSql) => Promise<ItemOutcome<R>[]>): Promise<ItemOutcome<R>[]> {
  return inTransaction(sql, async (tx) => {
    const outcomes = await work(tx);
    await appendEvents(tx, eventsOfBatch(op, items, outcomes));
    return outcomes;
  });
}

/** Ordered by the column, not by the text it is selected as (an output name wins in ORDER BY). */
const PAGE = `SELECT e.id::text AS id, e.type, e.occurred_at::text AS occurred_at, e.actor_account, e.actor_key_id, e.account, e.data FROM events e
  WHERE e.id > $1::bigint AND ($2::text IS NULL OR e.account IS NULL OR e.account = $2::text) AND e.type = ANY($3::text[])
  ORDER BY e.id LIMIT $4`;

const PURGE = `WITH gone AS (
    DELETE FROM events WHERE id IN (SELECT id FROM events WHERE occurred_at < $1::bigint ORDER BY occurred_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
    RETURNING id),
  recorded AS (UPDATE event_log SET deleted_through = greatest(deleted_through, (SELECT max(id) FROM gone)) WHERE EXISTS (SELECT 1 FROM gone))
  SELECT count(*)::integer AS purged FROM gone`;

/** The feed's reads and the retention's deletes over `sql`. */
export function createEventsStore(sql: PostgresSql): EventLog {
  return {
    async page({ afterId, limit, types, account }) {
      const rows = await guardRead(() => sql.unsafe<EventRow[]>(PAGE, [afterId, account, types as string[], limit], { prepare: true }));
      return rows.map(toEvent);
    },
    async latestId() {
      const [row] = await guardRead(() => sql.unsafe<{ id: string }[]>('SELECT coalesce(max(id), 0)::text AS id FROM events', [], { prepare: true }));
      return Number(row!.id);
    },
    async deletedThrough() {
      const [row] = await guardRead(() => sql.unsafe<{ id: string }[]>('SELECT deleted_through::text AS id FROM event_log', [], { prepare: true }));
      return Number(row!.id);
    },
    async purge(before, limit) {
      const [row] = await guard(() => sql.unsafe<{ purged: number }[]>(PURGE, [before, limit], { prepare: true }));
      return row!.purged;
    },
  };
}
