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
 * - a write appends its events in its own transaction, as one block: row keys (`seq`) one after
 *   the other from a base drawn once by the statement, the first row holding the block's size
 *   (`block_events`) and no id yet;
 * - `sequence` gives a first id to every committed block that has none, in `seq` order, in a
 *   transaction of its own that holds the log's transaction-level advisory lock; an event's id is
 *   its block's first id plus its distance from the block's first row. Sequencers therefore run
 *   one at a time, on any instance, and PostgreSQL makes a commit visible before it releases the
 *   transaction's locks: every id a sequencer gives is above every id already visible, and its
 *   ids become visible together. Giving an id to each row instead rewrote every event, which cost
 *   the server more than appending it (docs/decisions/0029-event-ids-by-block.md);
 * - a read of the feed (and the long poll's read of the highest id) runs the sequencer first when
 *   a block waits for its ids: a write answered before the read began has committed, so its
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
 * How far apart the bases of two blocks are (event_blocks' increment, migration 10), and so the
 * most events one statement may append.
 */
export const EVENT_BLOCK_SPAN = 1_048_576;

/**
 * A new block's base, drawn once by the statement that appends it (an uncorrelated subquery is
 * computed once), a multiple of EVENT_BLOCK_SPAN.
 */
const BLOCK_BASE = `(SELECT nextval('event_blocks'))`;

/**
 * The first row of a block: the block's own for an event that holds the block's size (a block's
 * first row, or an event of the log before blocks, each a block of one), else the multiple of
 * EVENT_BLOCK_SPAN at or below its row key.
 */
export function blockStart(event: string): string {
  return `CASE WHEN ${event}.block_events IS NOT NULL THEN ${event}.seq ELSE ${event}.seq - ${event}.seq % ${EVENT_BLOCK_SPAN} END`;
}

/** The id of `event` in the block whose first row is `first` (which has its id). */
export function eventId(first: string, event: string): string {
  return `(${first}.id + (${event}.seq - ${first}.seq))`;
}

/**
 * The row key of the event with id `id` (an SQL expression of a bigint), null if there is none:
 * the block with the highest first id at or below it, if it reaches that far. One index probe:
 * the block is taken first and tested after, since a test inside the scan would walk back through
 * every block when the id is in none (deleted by retention meanwhile).
 */
export function seqOfId(id: string): string {
  return `(SELECT f.seq + (${id} - f.id) FROM (SELECT seq, id, block_events FROM events WHERE id <= ${id} ORDER BY id DESC LIMIT 1) f WHERE ${id} - f.id < f.block_events)`;
}

/**
 * The events of one write, as one block in the order given. The first row holds the block's size;
 * the identity of `seq` is gone (migration 10), so that a statement of the previous version, which
 * numbered rows one by one, fails instead of appending beside the blocks.
 */
const APPEND = `INSERT INTO events (seq, type, occurred_at, actor_account, actor_key_id, account, data, block_events)
  SELECT ${BLOCK_BASE} + u.ord - 1, u.type, ${OCCURRED_AT}, u.actor_account, u.actor_key_id, u.account, u.data,
         CASE WHEN u.ord = 1 THEN cardinality($1::text[]) END
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(type, actor_account, actor_key_id, account, data, ord)`;

/** Appends `events` in `tx` as one block, without an id yet (the sequencer gives it). */
export async function appendEvents(tx: PostgresSql, events: readonly NewEvent[]): Promise<void> {
  if (events.length === 0) return;
  if (events.length >= EVENT_BLOCK_SPAN) throw new Error(`a block holds fewer than ${EVENT_BLOCK_SPAN} events`);
  const rows = events.map(eventColumns);
  await tx.unsafe(APPEND, [
    rows.map((row) => row.type), rows.map((row) => row.actor_account), rows.map((row) => row.actor_key_id),
    rows.map((row) => row.account), rows.map((row) => row.data),
  ], { prepare: true });
}

/**
 * The `pet.created` events of the pets of a CTE `inserted` (id, name, category_id, status,
 * version; ids ascending in the order of the creations), as a further CTE of the same statement
 * and one block: `$4` and `$5` are the creations' actors (account, key id; null for none), the
 * n-th pet's at index n, and every creation is inserted. The one write whose events are made in
 * SQL rather than by eventsOfBatch, so that a batch of creates stays one statement. `data` is the
 * very text storage/events.ts stores for the pet (its keys in its order, the category as text),
 * written out rather than built by json_build_object, which looked up the type of each of its
 * arguments on every row: the name goes through to_json, which escapes it as JSON.stringify does;
 * the status is one of three plain words (the table's CHECK); the numbers are digits.
 */
export const LOG_CREATED_PETS = `logged AS (
    INSERT INTO events (seq, type, occurred_at, actor_account, actor_key_id, account, data, block_events)
    SELECT ${BLOCK_BASE} + n.ord - 1, 'pet.created', ${OCCURRED_AT}, ($4::text[])[n.ord], ($5::text[])[n.ord], NULL,
           '{"kind":"pet","id":' || n.id || ',"name":' || to_json(n.name)::text || ',"categoryId":"' || n.category_id
             || '","status":"' || n.status || '","version":' || n.version || '}',
           CASE WHEN n.ord = 1 THEN cardinality($4::text[]) END
      FROM (SELECT i.*, row_number() OVER (ORDER BY i.id) AS ord FROM inserted i) AS n)`;

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

/** Whether a block waits for its first id (the partial index of those, usually empty). */
const PENDING = 'SELECT EXISTS (SELECT 1 FROM events WHERE id IS NULL AND block_events IS NOT NULL) AS pending';
const LOCK = `SELECT pg_advisory_xact_lock(hashtextextended('event log', 0))`;
/**
 * Gives a first id to every committed block without one, in `seq` order: the ids of all their
 * events drawn at once (every draw happens under the lock, so nobody draws between `nextval` and
 * `setval`), each block the ids after those of the blocks before it. One row written a block,
 * whatever its size. Run after LOCK, in its own statement, so that its snapshot holds every block
 * committed before the lock was granted.
 */
const SEQUENCE = `WITH pending AS (SELECT seq, block_events, sum(block_events) OVER (ORDER BY seq) AS through
                   FROM events WHERE id IS NULL AND block_events IS NOT NULL),
    drawn AS (SELECT coalesce(max(through), 0) AS total, CASE WHEN count(*) = 0 THEN 0
                ELSE setval('event_first_ids', nextval('event_first_ids') + max(through) - 1) END AS last FROM pending)
  UPDATE events e SET id = drawn.last - drawn.total + pending.through - pending.block_events + 1
    FROM pending, drawn WHERE e.seq = pending.seq AND e.id IS NULL AND e.block_events IS NOT NULL`;

/** Gives ids to the blocks that wait for one, if any; resolves once they are visible. */
export async function sequence(sql: PostgresSql): Promise<void> {
  const [{ pending }] = await sql.unsafe<[{ pending: boolean }]>(PENDING, [], { prepare: true });
  if (!pending) return;
  await inTransaction(sql, async (tx) => {
    await tx.unsafe(LOCK, [], { prepare: true });
    await tx.unsafe(SEQUENCE, [], { prepare: true });
  });
}

/**
 * A page of the feed: the blocks in the order of their first ids (the index of ids, which holds
 * only the first rows of blocks that have one), from the one that holds `$1`, and the events of
 * each by row key (the primary key). Ordered by the columns, not by the text the id is selected as
 * (an output name wins in ORDER BY).
 */
export const EVENT_PAGE = `SELECT ${eventId('f', 'e')}::text AS id, e.type, e.occurred_at::text AS occurred_at, e.actor_account, e.actor_key_id, e.account, e.data
  FROM events f JOIN events e ON e.seq >= f.seq AND e.seq < f.seq + f.block_events
  WHERE f.id >= coalesce((SELECT s.id FROM events s WHERE s.id <= $1::bigint ORDER BY s.id DESC LIMIT 1), 0) AND ${eventId('f', 'e')} > $1::bigint
    AND ($2::text IS NULL OR e.account IS NULL OR e.account = $2::text) AND e.type = ANY($3::text[])
  ORDER BY f.id, e.seq LIMIT $4`;

/** The highest id given, 0 for none: the last id of the block at the end of the index of ids. */
export const LATEST_EVENT_ID = 'SELECT coalesce((SELECT id + block_events - 1 FROM events WHERE id IS NOT NULL ORDER BY id DESC LIMIT 1), 0)::text AS id';

/**
 * Whole blocks, the oldest by row key: of the first rows of the oldest `$2` blocks, those whose
 * event is older than `$1` and that have their id (a block without is not in the feed yet, and
 * goes once it has one), each that starts within the first `$2` events so deleted. A block is
 * never cut, so a call may delete a little more than `$2`, and deletes at least `$2` while enough
 * are old (the retention calls again until a call deletes fewer). Times follow the row keys (both
 * are taken as the write commits), so the oldest are first, and no index of times is kept for this.
 */
const PURGE = `WITH firsts AS (SELECT seq, id, block_events, occurred_at FROM events WHERE block_events IS NOT NULL ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED),
  oldest AS (SELECT * FROM (SELECT f.*, sum(f.block_events) OVER (ORDER BY f.seq) AS through FROM firsts f WHERE f.occurred_at < $1::bigint AND f.id IS NOT NULL) b
              WHERE b.through - b.block_events < $2),
  gone AS (DELETE FROM events e USING oldest o WHERE e.seq >= o.seq AND e.seq < o.seq + o.block_events RETURNING e.seq),
  recorded AS (UPDATE event_log SET deleted_through = greatest(deleted_through, (SELECT max(id + block_events - 1) FROM oldest)) WHERE EXISTS (SELECT 1 FROM oldest))
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
      // A block is deleted once it has its ids, so that the highest id deleted says what a consumer missed.
      await guard(() => sequence(sql));
      const [row] = await guard(() => sql.unsafe<{ purged: number }[]>(PURGE, [before, limit], { prepare: true }));
      return row!.purged;
    },
  };
}
