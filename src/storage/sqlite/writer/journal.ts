/**
 * The journal of the writes to pets, so that the answer caches (src/api/pets/reply-cache.ts) drop
 * only what a write touched: write n (from 0) touched the pets whose ids run from from[n %
 * JOURNAL_LENGTH] to to[...] and whose status, before or after, is among statuses[...] (statusBit's
 * bits). A batch of inserts is one write covering its ids.
 *
 * The journal lives in memory that threads can share (a SharedArrayBuffer): the writer thread
 * records every write it commits, and every request thread reads it without a message, so a
 * write is in the journal of every worker before its answer leaves the writer. A write is
 * recorded after its COMMIT has returned, never before: a reader that sees the record reads the
 * committed rows, and a reader that read the rows before the commit holds a revision older than
 * the record, so its answer is checked against the record later. The slots are filled before the
 * count is raised (an atomic store), and a reader that finds the count moved more than the
 * journal's length while it read assumes the worst.
 */
import type { DatabaseSync } from 'node:sqlite';
import { ANY_STATUS } from '../../pets.ts';

/** How many writes the journal remembers; a cache entry last checked longer ago is dropped. */
export const JOURNAL_LENGTH = 1024;

/** Bytes of a journal: the count, then from, to (ids as 64-bit integers, exact) and the statuses. */
export const JOURNAL_BYTES = 8 + JOURNAL_LENGTH * (8 + 8 + 1);

export interface WriteJournal {
  /** The memory the journal is kept in: pass it to another thread to share the journal. */
  readonly buffer: SharedArrayBuffer | ArrayBuffer;
  readonly count: BigInt64Array;
  readonly from: BigInt64Array;
  readonly to: BigInt64Array;
  readonly statuses: Uint8Array;
}

/** One write's reach: the pets with ids in [from, to] whose status, before or after, has a bit in `statuses`. */
export interface Touch {
  from: bigint;
  to: bigint;
  statuses: number;
}

/** A journal over `buffer` (JOURNAL_BYTES of it), which another thread may have made: both then see the same journal. */
export function journalIn(buffer: SharedArrayBuffer | ArrayBuffer = new SharedArrayBuffer(JOURNAL_BYTES)): WriteJournal {
  return {
    buffer,
    count: new BigInt64Array(buffer, 0, 1),
    from: new BigInt64Array(buffer, 8, JOURNAL_LENGTH),
    to: new BigInt64Array(buffer, 8 + 8 * JOURNAL_LENGTH, JOURNAL_LENGTH),
    statuses: new Uint8Array(buffer, 8 + 16 * JOURNAL_LENGTH, JOURNAL_LENGTH),
  };
}

const journals = new WeakMap<DatabaseSync, WriteJournal>();

/** The journal of a connection that makes its own writes (`:memory:`, tests, the command line). */
export function journalOf(db: DatabaseSync): WriteJournal {
  let journal = journals.get(db);
  if (!journal) {
    journal = journalIn(new ArrayBuffer(JOURNAL_BYTES));
    journals.set(db, journal);
  }
  return journal;
}

/** How many writes were recorded so far: the `writes` of a revision. */
export function writesRecorded(journal: WriteJournal): number {
  return Number(Atomics.load(journal.count, 0));
}

/** Records the writes of a transaction once it has committed. */
export function recordWrites(journal: WriteJournal, touches: readonly Touch[]): void {
  if (touches.length === 0) return;
  let count = writesRecorded(journal);
  for (const { from, to, statuses } of touches) {
    const slot = count % JOURNAL_LENGTH;
    journal.from[slot] = from;
    journal.to[slot] = to;
    journal.statuses[slot] = statuses;
    count++;
  }
  Atomics.store(journal.count, 0, BigInt(count));
}

/**
 * Whether a write after `since` (a count) touched a pet with an id in (after, through] and a
 * status in `statuses`; true too when the journal no longer reaches back to `since`: a cache
 * must then assume the worst.
 */
export function writtenSince(journal: WriteJournal, since: number, after: bigint | number, through: number, statuses = ANY_STATUS): boolean {
  const count = writesRecorded(journal);
  if (since === count) return false;
  if (count - since > JOURNAL_LENGTH) return true;
  let touched = false;
  for (let write = since; write < count && !touched; write++) {
    const slot = write % JOURNAL_LENGTH;
    touched = journal.from[slot]! <= through && journal.to[slot]! > after && (journal.statuses[slot]! & statuses) !== 0;
  }
  // The writer went on recording meanwhile: if it went round the whole journal, some slots read
  // may hold later writes than the ones asked about.
  return touched || writesRecorded(journal) - since > JOURNAL_LENGTH;
}
