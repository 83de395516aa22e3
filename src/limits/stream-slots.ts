/**
 * The caps on open event streams: at most `perKey` for one key and `perInstance` in all. A stream
 * holds no database connection while it waits, but it holds a socket, a few timers and a read of
 * the log at each commit: the caps bound what one key, and all of them together, make an
 * instance keep. With WORKERS, the one count of the instance lives in the primary thread, which
 * the workers ask (src/cluster/remote-stream-slots.ts); across instances each counts its own.
 */
import type { MaybePromise } from '../lib/maybe-promise.ts';

/** Streams one key may hold open at once. */
export const STREAMS_PER_KEY = 5;
/** Streams one instance serves at once. */
export const STREAMS_PER_INSTANCE = 1000;

/** Which cap a new stream would pass. */
export type StreamRefusal = { cap: 'key' | 'instance'; limit: number };

export interface StreamSlots {
  /** Takes a slot for a stream of `keyId`, or says which cap is full (taking nothing). */
  acquire(keyId: string): MaybePromise<StreamRefusal | null>;
  /** Gives back a slot that `acquire` gave. */
  release(keyId: string): void;
}

export interface StreamCaps {
  perKey?: number;
  perInstance?: number;
}

/** The counts in this thread (a single process, or the primary of WORKERS): synchronous. */
export function createStreamSlots({ perKey = STREAMS_PER_KEY, perInstance = STREAMS_PER_INSTANCE }: StreamCaps = {}): StreamSlots & { acquire(keyId: string): StreamRefusal | null; open(): number } {
  const byKey = new Map<string, number>();
  let open = 0;
  return {
    acquire(keyId) {
      const held = byKey.get(keyId) ?? 0;
      if (held >= perKey) return { cap: 'key', limit: perKey };
      if (open >= perInstance) return { cap: 'instance', limit: perInstance };
      byKey.set(keyId, held + 1);
      open++;
      return null;
    },
    release(keyId) {
      const held = byKey.get(keyId);
      if (held === undefined) return;
      if (held <= 1) byKey.delete(keyId);
      else byKey.set(keyId, held - 1);
      open--;
    },
    open: () => open,
  };
}
