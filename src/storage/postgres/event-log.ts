/**
 * The event log on PostgreSQL (the rules are storage/events.ts's), shared by every instance.
 *
 * An event's id, its position in the feed, must become visible in id order: a consumer that has
 * read id N must never find a lower id later. A sequence drawn by the writes does not give it (a
 * transaction that drew a lower value may commit after one that drew a higher value), and taking
 * one lock around every write's commit to give it serialised the commits of every instance (a
 * fifth of the creates a second, measured: docs/decisions/0025-event-ids-by-a-sequencer.md). So
 * the ids are given after the commit, by a sequencer:
 *
 * - a write appends its events in its own transaction with a row key (`seq`) and no id;
 * - `sequence` gives ids to every committed event that has none, in `seq` order, in a transaction
 *   of its own that holds the log's transaction-level advisory lock. Sequencers therefore run one
 *   at a time, on any instance, and PostgreSQL makes a commit visible before it releases the
 *   transaction's locks: every id a sequencer gives is above every id already visible, and its
 *   ids become visible together;
 * - a read of the feed (and the long poll's read of the highest id) runs the sequencer first when
 *   an event waits for its id: a write answered before the read began has committed, so its
 *   events are given ids and are read. Writes never wait for each other; a read pays one short
 *   transaction when events came since the last one.
 *
 * A transaction-level lock is released by its COMMIT, so this works through PgBouncer in
 * transaction mode, and a crashed instance leaves no lock behind.
 */
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import { eventColumns, eventsOfBatch, toEvent, type EventLog, type EventRow, type LoggedOp, type NewEvent } from '../events.ts';
import { guard, guardRead } from './database.ts';
import type { PostgresSql } from './driver.ts';
import { inTransaction } from './item-savepoints.ts';

/**
 * `time` (a timestamptz) in whole milliseconds since the epoch, as SQL: its microseconds in float
 * (exact to well under one, so the cast rounds to the exact count), then divided as an integer.
 * `floor(extract(epoch FROM time) * 1000)` gives the same in numeric arithmetic, at a few thousand
 * instructions more, which an event paid on every row.
 */
export function epochMilliseconds(time: string): string {
  return `((date_part('epoch', ${time}) * 1000000)::bigint / 1000)`;
}

/** An event's time: taken as its row is written. */
const OCCURRED_AT = epochMilliseconds('clock_timestamp()');

/**
 * The rows of one write, each with the next `seq` in the order given: the identity's default is
 * computed by the INSERT on each row as the ordered SELECT hands it over (as the pets' ids are), so
 * that no row names the sequence (`nextval(pg_get_serial_sequence(...))` looked it up in the
 * catalog on every row).
 */
const APPEND = `INSERT INTO events (type, occurred_at, actor_account, actor_key_id, account, data)
  SELECT u.type, ${OCCURRED_AT}, u.actor_account, u.actor_key_id, u.account, u.data
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(type, actor_account, actor_key_id, account, data, ord)
   ORDER BY u.ord`;

/** Appends `events` in `tx`, without an id yet (the sequencer gives it). */
export async function appendEvents(tx: PostgresSql, events: readonly NewEvent[]): Promise<void> {
  if (events.length === 0) return;
  const rows = events.map(eventColumns);
  await tx.unsafe(APPEND, [
    rows.map((row) => row.type), rows.map((row) => row.actor_account), rows.map((row) => row.actor_key_id),
    rows.map((row) => row.account), rows.map((row) => row.data),
  ], { prepare: true });
}

/**
 * The `pet.created` events of the pets of a CTE `inserted` (id, name, category_id, status,
 * version; ids ascending in the order of the creations), as a further CTE of the same statement:
 * `$4` and `$5` are the creations' actors (account, key id; null for none), the n-th pet's at
 * index n. The one write whose events are made in SQL rather than by eventsOfBatch, so that a
 * batch of creates stays one statement. `data` is the very text storage/events.ts stores for the
 * pet (its keys in its order, the category as text), written out rather than built by
 * json_build_object, which looked up the type of each of its arguments on every row: the name goes
 * through to_json, which escapes it as JSON.stringify does; the status is one of three plain
 * words (the table's CHECK); the numbers are digits.
 */
export const LOG_CREATED_PETS = `logged AS (
    INSERT INTO events (type, occurred_at, actor_account, actor_key_id, account, data)
    SELECT 'pet.created', ${OCCURRED_AT}, ($4::text[])[n.ord], ($5::text[])[n.ord], NULL,
           '{"kind":"pet","id":' || n.id || ',"name":' || to_json(n.name)::text || ',"categoryId":"' || n.category_id
             || '","status":"' || n.status || '","version":' || n.version || '}'
      FROM (SELECT i.*, row_number() OVER (ORDER BY i.id) AS ord FROM inserted i) AS n
     ORDER BY n.id)`;

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

/** Whether an event waits for its id (the partial index of those, usually empty). */
const PENDING = 'SELECT EXISTS (SELECT 1 FROM events WHERE id IS NULL) AS pending';
const LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('event log', 0))`;
/**
 * Gives ids to every committed event without one, in `seq` order: a block of ids drawn at once
 * (every draw happens under the lock, so nobody draws between `nextval` and `setval`), each row
 * its rank in the block. Run after LOCK, in its own statement, so that its snapshot holds every
 * event committed before the lock was granted.
 */
const SEQUENCE = `WITH pending AS (SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM events WHERE id IS NULL),
    block AS (SELECT count(*) AS total, CASE WHEN count(*) = 0 THEN 0
                ELSE setval('event_ids', nextval('event_ids') + count(*) - 1) END AS last FROM pending)
  UPDATE events e SET id = block.last - block.total + pending.n FROM pending, block WHERE e.seq = pending.seq`;

/** Gives ids to the events that wait for one, if any; resolves once they are visible. */
export async function sequence(sql: PostgresSql): Promise<void> {
  const [{ pending }] = await sql.unsafe<[{ pending: boolean }]>(PENDING, [], { prepare: true });
  if (!pending) return;
  await inTransaction(sql, async (tx) => {
    await tx.unsafe(LOCK, [], { prepare: true });
    await tx.unsafe(SEQUENCE, [], { prepare: true });
  });
}

/**
 * A page of the feed, through the index of ids (which holds only the events that have one: `id >`
 * is never true of the others). Ordered by the column, not by the text it is selected as (an
 * output name wins in ORDER BY).
 */
export const EVENT_PAGE = `SELECT e.id::text AS id, e.type, e.occurred_at::text AS occurred_at, e.actor_account, e.actor_key_id, e.account, e.data FROM events e
  WHERE e.id > $1::bigint AND ($2::text IS NULL OR e.account IS NULL OR e.account = $2::text) AND e.type = ANY($3::text[])
  ORDER BY e.id LIMIT $4`;

/** The highest id given, 0 for none: the end of the index of ids. */
export const LATEST_EVENT_ID = 'SELECT coalesce(max(id), 0)::text AS id FROM events';

/**
 * The oldest `$2` events by row key, of which those older than `$1` that have their id (one
 * without is not in the feed yet, and goes once it has one). Times follow the row keys (both are
 * taken as the write commits), so the oldest are first, and no index of times is kept for this.
 */
const PURGE = `WITH gone AS (
    DELETE FROM events WHERE seq IN (
      SELECT seq FROM (SELECT seq, id, occurred_at FROM events ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED) oldest
       WHERE occurred_at < $1::bigint AND id IS NOT NULL)
    RETURNING id),
  recorded AS (UPDATE event_log SET deleted_through = greatest(deleted_through, (SELECT max(id) FROM gone)) WHERE EXISTS (SELECT 1 FROM gone))
  SELECT count(*)::integer AS purged FROM gone`;

/** The feed's reads (each after the sequencer) and the retention's deletes over `sql`. */
export function createEventsStore(sql: PostgresSql): EventLog {
  return {
    async page({ afterId, limit, types, account }) {
      await guard(() => sequence(sql));
      const rows = await guardRead(() => sql.unsafe<EventRow[]>(EVENT_PAGE, [afterId, account, types as string[], limit], { prepare: true }));
      return rows.map(toEvent);
    },
    async latestId() {
      await guard(() => sequence(sql));
      const [row] = await guardRead(() => sql.unsafe<{ id: string }[]>(LATEST_EVENT_ID, [], { prepare: true }));
      return Number(row!.id);
    },
    async deletedThrough() {
      const [row] = await guardRead(() => sql.unsafe<{ id: string }[]>('SELECT deleted_through::text AS id FROM event_log', [], { prepare: true }));
      return Number(row!.id);
    },
    async purge(before, limit) {
      // An event is deleted once it has its id, so that the highest id deleted says what a consumer missed.
      await guard(() => sequence(sql));
      const [row] = await guard(() => sql.unsafe<{ purged: number }[]>(PURGE, [before, limit], { prepare: true }));
      return row!.purged;
    },
  };
}
