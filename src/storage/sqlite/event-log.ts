/**
 * The event log on SQLite (the rules are storage/events.ts's): the writes append their events in
 * their own transaction (writer/executor.ts), and the feed reads them on any connection (events-store.ts).
 *
 * Ids are visible in commit order: one connection writes the file (the writer thread, or a
 * connection that makes its own writes), so ids are handed out in the order the transactions
 * commit. The appender gives them: one above the highest id in the table and the highest
 * retention deleted, read in the writing transaction, so that no id is handed out again, even
 * once retention deleted every event (migration 10 says why not AUTOINCREMENT).
 * With the writer thread, a reader sees a group once its commit is in the WAL index, which SQLite
 * updates only after the commit's frames are synced (synchronous=FULL, database.ts). The inline
 * writer commits with synchronous=NORMAL and syncs afterwards, so the feed reads no further than
 * its `durableEventId` (writer/inline.ts, events-store.ts): either way no reader sees an event of
 * a group that a crash could still take back.
 */
import type { DatabaseSync } from 'node:sqlite';
import { eventColumns, type NewEvent } from '../events.ts';

/** Appends `events` in the caller's transaction, stamped with one instant (the group's commit time, to the millisecond). */
export function createEventAppender(db: DatabaseSync, clock: () => number = Date.now): (events: readonly NewEvent[]) => void {
  // Positional parameters: named ones, from an object spread per event, cost the writer 5.4 µs
  // of CPU an event against 1.8 µs (measured in the process, 100,000 inserts).
  const insert = db.prepare('INSERT INTO events (id, type, occurred_at, actor_account, actor_key_id, account, data) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const nextId = db.prepare('SELECT max(coalesce((SELECT max(id) FROM events), 0), deleted_through) + 1 AS id FROM event_log');
  return (events) => {
    if (events.length === 0) return;
    const occurredAt = clock();
    let id = (nextId.get() as { id: number }).id;
    for (const event of events) {
      const { type, actor_account, actor_key_id, account, data } = eventColumns(event);
      insert.run(id++, type, occurredAt, actor_account, actor_key_id, account, data);
    }
  };
}

/** Deletes up to `limit` events older than `before`, oldest first, in the caller's transaction; records the highest id deleted. */
export function createEventPurge(db: DatabaseSync): (before: number, limit: number) => number {
  // The oldest `limit` events by id, of which those older than `before`: times follow the ids
  // (one writer stamps them in order), so no index of times is kept for this.
  const purge = db.prepare(`DELETE FROM events WHERE id IN (SELECT id FROM (SELECT id, occurred_at FROM events ORDER BY id LIMIT :limit) WHERE occurred_at < :before) RETURNING id`);
  const record = db.prepare('UPDATE event_log SET deleted_through = max(deleted_through, ?)');
  return (before, limit) => {
    const rows = purge.all({ before, limit }) as { id: number }[];
    if (rows.length > 0) record.run(Math.max(...rows.map((row) => row.id)));
    return rows.length;
  };
}
