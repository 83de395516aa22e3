/**
 * Answers of read operations, kept while they are certainly still right. Pets are only ever
 * appended (ids increase, nothing is updated or deleted through the service), which gives two
 * rules that need no timer:
 * - an answer that no insert can change (a list page that is full, so more pets follow it, or one
 *   pet by id) stays valid until another connection commits (PRAGMA data_version changes);
 * - any other answer (the last page of a list) is valid only until the next insert.
 */
import type { PetsRevision } from '../storage/pets.ts';
import type { Reply } from '../http/reply.ts';

interface Entry {
  reply: Reply;
  /** False when an insert could change the answer. */
  stable: boolean;
  revision: PetsRevision;
}

export interface ReplyCache {
  get(key: string, now: PetsRevision): Reply | undefined;
  set(key: string, reply: Reply, stable: boolean, revision: PetsRevision): void;
}

/** A cache of at most `capacity` answers; the oldest entry makes room for a new one. */
export function createReplyCache(capacity: number): ReplyCache {
  const entries = new Map<string, Entry>();
  return {
    get(key, now) {
      const entry = entries.get(key);
      if (entry === undefined) return undefined;
      if (entry.revision.external !== now.external || (!entry.stable && entry.revision.inserts !== now.inserts)) {
        entries.delete(key);
        return undefined;
      }
      return entry.reply;
    },
    set(key, reply, stable, revision) {
      if (entries.size >= capacity && !entries.has(key)) entries.delete(entries.keys().next().value!);
      entries.set(key, { reply, stable, revision });
    },
  };
}
