/**
 * The service's upkeep on timers, the same for one process and for the primary thread of
 * WORKERS: the in-memory limiter saved every second (the contract allows 5 s of lag; a restart
 * resumes from the last save) and once more when stopping, expired Idempotency-Key records purged
 * (lookups already ignore them; this only frees the space), on PostgreSQL the limiter rows
 * idle for a day, and placed orders whose holds ended cancelled (the sweep, every half second). A purge deletes a small chunk per transaction, so requests run in between.
 */
import type { Clock } from '../clock.ts';
import type { MaybePromise } from '../lib/maybe-promise.ts';
import type { Upkeep } from '../storage/stores.ts';

/** How often the limiter is saved: well inside the contract's 5 s of allowed lag. */
export const LIMITER_SAVE_INTERVAL_MS = 1000;
/** How often expired records and idle callers are purged. */
export const PURGE_INTERVAL_MS = 10 * 60 * 1000;
/** Rows deleted per purge transaction; requests run between two chunks. */
export const PURGE_CHUNK = 500;
/**
 * How often the recorded changes of the pets' counts are folded into them (PostgreSQL): the
 * inventory sums what is not folded yet, so this bounds its cost by the writes of about a second.
 */
export const FOLD_INTERVAL_MS = 1000;
/** Changes folded per statement. */
const FOLD_CHUNK = 10_000;
/**
 * How often placed orders whose holds ended are cancelled: every read shows an expiry within a
 * second of it (the writes check holds themselves), so half a second plus the sweep's own time.
 */
export const EXPIRY_INTERVAL_MS = 500;

export interface ChoresDeps {
  upkeep: Upkeep;
  clock: Clock;
  /** A chore failed (`limiter_save_failed`, `idempotency_purge_failed`, `limiter_purge_failed`, `counts_fold_failed`, `order_expiry_failed`). */
  failed(event: string, error: unknown): void;
  /** The sweep cancelled `count` orders whose holds had ended (the metrics). */
  expired?: (count: number) => void;
}

export interface Chores {
  /** Stops the timers and saves the limiter a last time; resolves once it is saved (or failed, and said so). */
  stop(): Promise<void>;
}

/** Starts the timers (unref'd: they never keep the process alive) and a first purge. */
export function startChores({ upkeep, clock, failed, expired = () => {} }: ChoresDeps): Chores {
  const { saveLimiterState, purgeIdleCallers, foldCounts } = upkeep;
  // A save through SQLite's writer thread may still be out when the next second comes: that
  // second's is then skipped, and its changes go with the next.
  let saving: Promise<void> | null = null;
  const save = (): Promise<void> | null => {
    if (saving !== null) return saving;
    try {
      const saved = saveLimiterState?.();
      if (saved instanceof Promise) {
        saving = saved.then(() => {}, (error: unknown) => failed('limiter_save_failed', error)).finally(() => {
          saving = null;
        });
      }
    } catch (error) {
      failed('limiter_save_failed', error);
    }
    return saving;
  };
  const purgeRecords = oneAtATime(() => purgeInChunks((limit) => upkeep.purgeExpiredRecords(clock(), limit)));
  const purgeCallers = oneAtATime(() => (purgeIdleCallers ? purgeInChunks(purgeIdleCallers) : Promise.resolve(0)));
  const fold = oneAtATime(() => (foldCounts ? purgeInChunks(foldCounts, FOLD_CHUNK) : Promise.resolve(0)));
  // Chunk by chunk, each counted as soon as it is committed.
  const expire = oneAtATime(() => purgeInChunks(async (limit) => {
    const count = await upkeep.expireOrders(clock(), limit);
    if (count > 0) expired(count);
    return count;
  }));
  const purge = () => {
    purgeRecords().catch((error: unknown) => failed('idempotency_purge_failed', error));
    purgeCallers().catch((error: unknown) => failed('limiter_purge_failed', error));
  };
  const timers = [
    ...(saveLimiterState ? [setInterval(() => void save(), LIMITER_SAVE_INTERVAL_MS)] : []),
    setInterval(purge, PURGE_INTERVAL_MS),
    ...(foldCounts ? [setInterval(() => void fold().catch((error: unknown) => failed('counts_fold_failed', error)), FOLD_INTERVAL_MS)] : []),
    setInterval(() => void expire().catch((error: unknown) => failed('order_expiry_failed', error)), EXPIRY_INTERVAL_MS),
  ];
  for (const timer of timers) timer.unref();
  setImmediate(purge);
  return {
    stop() {
      for (const timer of timers) clearInterval(timer);
      // The last save, at once; or, after a save still out, once that one has settled.
      const last = () => save() ?? Promise.resolve();
      return saving === null ? last() : saving.then(last);
    },
  };
}

/**
 * Runs `purge` (which deletes at most `limit` rows and says how many) until a chunk comes back
 * short, letting the requests that arrived meanwhile run between two chunks. Resolves with the
 * rows deleted in all.
 */
export async function purgeInChunks(purge: (limit: number) => MaybePromise<number>, chunk = PURGE_CHUNK): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await purge(chunk);
    total += deleted;
    if (deleted < chunk) return total;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** `run`, joined by calls made while it runs: a slow purge is not joined by the next tick. */
export function oneAtATime<T>(run: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | null = null;
  return () =>
    (running ??= run().finally(() => {
      running = null;
    }));
}
