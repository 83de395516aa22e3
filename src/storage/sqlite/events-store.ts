/**
 * The event log's reads on SQLite (event-log.ts says why ids are visible in commit order), on any
 * connection, and its retention, a write made through `submit` like every other.
 */
import type { DatabaseSync } from 'node:sqlite';
import { allSucceeded } from '../../lib/item-outcome.ts';
import { andThen } from '../../lib/maybe-promise.ts';
import { toEvent, type EventLog, type EventRow } from '../events.ts';
import { localWrites, type SubmitWrites } from './writer.ts';

/**
 * The feed's reads on `db`; its writes (the retention's deletes) through `submit`, in place by
 * default. `durable`, where a commit may be read before it is durable (the inline writer), is the
 * highest id the feed may show: no further.
 */
export function createEventsStore(db: DatabaseSync, submit: SubmitWrites = localWrites(db), durable: () => number = () => Number.MAX_SAFE_INTEGER): EventLog {
  const page = db.prepare(`SELECT id, type, occurred_at, actor_account, actor_key_id, account, data FROM events
    WHERE id > :after AND id <= :through AND (:account IS NULL OR account IS NULL OR account = :account) AND type IN (SELECT value FROM json_each(:types))
    ORDER BY id LIMIT :limit`);
  const latest = db.prepare('SELECT coalesce(max(id), 0) AS id FROM events');
  const deleted = db.prepare('SELECT deleted_through FROM event_log');
  return {
    page: ({ afterId, limit, types, account }) =>
      (page.all({ after: afterId, through: durable(), limit, account, types: JSON.stringify(types) }) as unknown as EventRow[]).map(toEvent),
    latestId: () => Math.min((latest.get() as { id: number }).id, durable()),
    deletedThrough: () => (deleted.get() as { deleted_through: number }).deleted_through,
    // A purge is a write: one transaction per chunk, made where the writes are.
    purge: (before, limit) => andThen(submit('purgeEvents', [{ before, limit }]), (outcomes) => allSucceeded(outcomes)[0]!),
  };
}

