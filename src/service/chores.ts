/**
 * The service's upkeep on timers, the same for one process and for the primary thread of
 * WORKERS: the in-memory limiter saved every second (the contract allows 5 s of lag; a restart
 * resumes from the last save) and once more when stopping, expired Idempotency-Key records purged
 * (lookups already ignore them; this only frees the space), on PostgreSQL the limiter rows
 * idle for a day, events older than EVENTS_RETENTION_DAYS, and placed orders whose holds ended cancelled (the sweep, every half second). A purge deletes a small chunk per transaction, so requests run in between.
 */
import type { Clock } from '../clock.ts';
import type { MaybePromise } from '../lib/maybe-promise.ts';
import type { Upkeep } from '../storage/stores.ts';
import { DEFAULT_EVENTS_RETENTION_DAYS } from '../config.ts';

const DAY_MS = 86_400_000;

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
  /** A chore failed (`limiter_save_failed`, `idempotency_purge_failed`, `limiter_purge_failed`, `event_purge_failed`, `counts_fold_failed`, `order_expiry_failed`). */
  failed(event: string, error: unknown): void;
  /** The sweep cancelled `count` orders whose holds had ended (the metrics). */
  expired?: (count: number) => void;
  /** `EVENTS_RETENTION_DAYS`: events older than this are deleted with the other purges. */
  retentionDays?: number;
}

export interface Chores {
  /**
   * Stops the timers, lets the chores running finish their chunk (none starts another), and saves
   * the limiter a last time; resolves once all of that is done (or failed, and said so). The
   * database can then be closed under none of them: a purge cut off by the close would fail, and
   * a clean stop would log it as an error.
   */
  stop(): Promise<void>;
}

/** Starts the timers (unref'd: they never keep the process alive) and a first purge. */
export function startChores({ upkeep, clock, failed, expired = () => {}, retentionDays = DEFAULT_EVENTS_RETENTION_DAYS }: ChoresDeps): Chores {
  const { saveLimiterState, purgeIdleCallers, foldCounts, purgeEvents } = upkeep;
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
  let stopping = false;
  const inChunks = (chunkOf: (limit: number) => MaybePromise<number>, chunk?: number) => purgeInChunks(chunkOf, chunk, () => stopping);
  const purgeRecords = oneAtATime(() => inChunks((limit) => upkeep.purgeExpiredRecords(clock(), limit)));
  const purgeCallers = oneAtATime(() => (purgeIdleCallers ? inChunks(purgeIdleCallers) : Promise.resolve(0)));
  const purgeLog = oneAtATime(() => (purgeEvents ? inChunks((limit) => purgeEvents(clock() - retentionDays * DAY_MS, limit)) : Promise.resolve(0)));
  const fold = oneAtATime(() => (foldCounts ? inChunks(foldCounts, FOLD_CHUNK) : Promise.resolve(0)));
  // Chunk by chunk, each counted as soon as it is committed.
  const expire = oneAtATime(() => inChunks(async (limit) => {
    const count = await upkeep.expireOrders(clock(), limit);
    if (count > 0) expired(count);
    return count;
  }));
  // The chores running now, each already caught (reported through `failed`), for stop to wait on.
  const running = new Set<Promise<unknown>>();
  const run = (chore: () => Promise<unknown>, failure: string) => {
    const settled = chore().catch((error: unknown) => failed(failure, error)).finally(() => running.delete(settled));
    running.add(settled);
  };
  const purge = () => {
    run(purgeRecords, 'idempotency_purge_failed');
    run(purgeCallers, 'limiter_purge_failed');
    run(purgeLog, 'event_purge_failed');
  };
  const timers = [
    ...(saveLimiterState ? [setInterval(() => void save(), LIMITER_SAVE_INTERVAL_MS)] : []),
    setInterval(purge, PURGE_INTERVAL_MS),
    ...(foldCounts ? [setInterval(() => run(fold, 'counts_fold_failed'), FOLD_INTERVAL_MS)] : []),
    setInterval(() => run(expire, 'order_expiry_failed'), EXPIRY_INTERVAL_MS),
  ];
  for (const timer of timers) timer.unref();
  const first = setImmediate(purge);
  return {
    stop() {
      stopping = true;
      clearImmediate(first);
      for (const timer of timers) clearInterval(timer);
      // The last save, at once; or, after a save still out, once that one has settled. Both after
      // the chores running, when there are any.
      const last = () => save() ?? Promise.resolve();
      const lastSave = () => (saving === null ? last() : saving.then(last));
      return running.size === 0 ? lastSave() : Promise.all(running).then(lastSave);
    },
  };
}

/**
 * Runs `purge` (which deletes at most `limit` rows and says how many) until a chunk comes back
 * short, or `stopped()` says so after a chunk, letting the requests that arrived meanwhile run
 * between two chunks. Resolves with the rows deleted in all.
 */
export async function purgeInChunks(purge: (limit: number) => MaybePromise<number>, chunk = PURGE_CHUNK, stopped: () => boolean = () => false): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await purge(chunk);
    total += deleted;
    if (deleted < chunk || stopped()) return total;
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
