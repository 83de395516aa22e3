/**
 * The writes to pets through one connection, shared by every store on it (pets, orders), so that
 * the answer caches see every write that touched a pet (src/api/pets/reply-cache.ts): write n
 * (from 0) touched the pet ids from[n % JOURNAL_LENGTH] to to[...] (a batch of inserts is one
 * write covering its ids).
 */
import type { DatabaseSync } from 'node:sqlite';

/** How many writes the journal remembers; a cache entry last checked longer ago is dropped. */
export const JOURNAL_LENGTH = 1024;

export interface WriteJournal {
  count: number;
  from: Float64Array;
  to: Float64Array;
}

const journals = new WeakMap<DatabaseSync, WriteJournal>();

/** The journal of `db`'s connection. */
export function journalOf(db: DatabaseSync): WriteJournal {
  let journal = journals.get(db);
  if (!journal) {
    journal = { count: 0, from: new Float64Array(JOURNAL_LENGTH), to: new Float64Array(JOURNAL_LENGTH) };
    journals.set(db, journal);
  }
  return journal;
}

/**
 * Records a write. Called inside the write's transaction, before COMMIT: should the commit fail,
 * the record only costs some cache entries, and nothing can read the pets between the record and
 * the commit, since node:sqlite is synchronous.
 */
export function recordWrite(journal: WriteJournal, from: number, to: number): void {
  const slot = journal.count % JOURNAL_LENGTH;
  journal.from[slot] = from;
  journal.to[slot] = to;
  journal.count++;
}

/**
 * Whether a write after `since` (a `count`) touched an id in (after, through]; true too when the
 * journal no longer reaches back to `since`: a cache must then assume the worst.
 */
export function writtenSince(journal: WriteJournal, since: number, after: bigint | number, through: number): boolean {
  if (since === journal.count) return false;
  if (journal.count - since > JOURNAL_LENGTH) return true;
  for (let write = since; write < journal.count; write++) {
    const slot = write % JOURNAL_LENGTH;
    if (journal.from[slot]! <= through && journal.to[slot]! > after) return true;
  }
  return false;
}
