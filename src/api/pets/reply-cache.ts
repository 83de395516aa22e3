/**
 * Answers of read operations, kept while they are certainly still right, with no timer.
 *
 * Every cached answer is a function of the pets whose ids lie in one range (after, through]:
 * one pet by id covers its own id; a list page covers the ids after its cursor up to the extra
 * row it read to know whether a next page exists (a last page, which read no extra row, covers
 * every id after its cursor). No write outside that range can change the answer: a page holds
 * the first rows after its cursor, so a pet changed, deleted or added beyond its extra row is
 * not among them, and a new pet's id is above every existing one (AUTOINCREMENT), so it falls
 * only into ranges without an end. So an entry is dropped when the pets' revision shows:
 * - a commit by another connection or process (PRAGMA data_version): anything may have changed;
 * - a write through this connection (an insert, a change or a delete, through any store on it)
 *   that touched an id in the entry's range, or that the journal no longer remembers.
 * The revision is read before the answer is computed and every write is journaled before it
 * commits, and node:sqlite is synchronous, so no write can fall between an answer and its check.
 */
import type { PetsRevision, PetsStore } from '../../storage/pets.ts';
import type { Reply } from '../../http/reply.ts';

/** The ids an answer depends on: those above `after` and up to `through` (Infinity: no end). */
export interface Coverage {
  after: bigint | number;
  through: number;
}

interface Entry extends Coverage {
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
        if (journal.writtenSince(entry.revision.writes, entry.after, entry.through)) {
          entries.delete(key);
          return undefined;
        }
        // Still right: later checks need only look at the writes after this one.
        entry.revision = now;
      }
      return entry.reply;
    },
    set(key, reply, { after, through }, revision) {
      if (entries.size >= capacity && !entries.has(key)) entries.delete(entries.keys().next().value!);
      entries.set(key, { reply, after, through, revision });
    },
  };
}
