/**
 * Answers of read operations, kept while they are certainly still right, with no timer.
 *
 * Every cached answer is a function of the pets whose ids lie in one range (after, through] and
 * whose status is among a set: one pet by id covers its own id, any status; a list page covers
 * the ids after its cursor up to the extra row it read to know whether a next page exists (a
 * last page, which read no extra row, covers every id after its cursor), with the status it is
 * filtered by, or any. No write outside that range or set can change the answer: a page holds
 * the first rows after its cursor, so a pet changed, deleted or added beyond its extra row is
 * not among them, and a new pet's id is above every existing one (AUTOINCREMENT), so it falls
 * only into ranges without an end; a pet that neither had nor has a page's status is on neither
 * its old nor its new version of the page. So an entry is dropped when the pets' revision shows:
 * - a commit by a connection that does not journal its writes (the keys command, another
 *   process): anything may have changed;
 * - a journaled write (an insert, a change or a delete, by the writer thread for any worker, or
 *   by this connection itself) that touched a pet in the entry's range and set, or that the
 *   journal no longer remembers.
 * The revision is read before the answer is computed, and a write is journaled once committed and
 * before it is answered, so a write either is in the revision (and the rows read include it) or
 * comes after it (and is checked against the entry at its next use).
 */
import { ANY_STATUS, type PetsRevision, type PetsStore } from '../../storage/pets.ts';
import type { Reply } from '../../http/reply.ts';

/**
 * The pets an answer depends on: ids above `after` and up to `through` (Infinity: no end), with a
 * status among `statuses` (statusBit's bits; default any).
 */
export interface Coverage {
  after: bigint | number;
  through: number;
  statuses?: number;
}

interface Entry extends Required<Coverage> {
  reply: Reply;
  /** The revision up to which the entry is known to be right. */
  revision: PetsRevision;
}

export interface ReplyCache {
  /** The cached answer, if it is still right at revision `now`. */
  get(key: string, now: PetsRevision): Reply | undefined;
  /** Keeps an answer computed at revision `revision` (read before computing it). */
  set(key: string, reply: Reply, coverage: Coverage, revision: PetsRevision): void;
}

/**
 * A cache of at most `capacity` answers; the oldest entry makes room for a new one. `journal`
 * says which writes touched which ids (the pets store's `writtenSince`).
 */
export function createReplyCache(capacity: number, journal: Pick<PetsStore, 'writtenSince'>): ReplyCache {
  const entries = new Map<string, Entry>();
  return {
    get(key, now) {
      const entry = entries.get(key);
      if (entry === undefined) return undefined;
      if (entry.revision.external !== now.external) {
        entries.delete(key);
        return undefined;
      }
      if (entry.revision.writes !== now.writes) {
        if (journal.writtenSince(entry.revision.writes, entry.after, entry.through, entry.statuses)) {
          entries.delete(key);
          return undefined;
        }
        // Still right: later checks need only look at the writes after this one.
        entry.revision = now;
      }
      return entry.reply;
    },
    set(key, reply, { after, through, statuses = ANY_STATUS }, revision) {
      if (entries.size >= capacity && !entries.has(key)) entries.delete(entries.keys().next().value!);
      entries.set(key, { reply, after, through, statuses, revision });
    },
  };
}
