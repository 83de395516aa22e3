/**
 * Group commit: items submitted during one event-loop turn are committed together by one call
 * of `commit` (one transaction, so one fsync), and each submitter is answered once that call has
 * returned. node:sqlite is synchronous, so a commit blocks the loop during its fsync; requests
 * that arrive meanwhile wait in the sockets, are read in the next turn, and form the next batch.
 * Throughput under concurrency is then bounded by fsyncs per batch, not per create.
 *
 * `commit` may also return a promise (PostgreSQL): then at most `maxInFlight` batches are out at
 * once, and items submitted meanwhile gather into the next batch, which leaves as soon as one
 * returns. The slower the database answers, the larger the batches: one round trip serves many
 * requests instead of each paying its own.
 *
 * A batch is one transaction, but each item is its own unit of success or failure (see
 * item-outcome.ts): `commit` returns one outcome per item, and an item that failed on its own is
 * answered with its own error while the others get their results. Only when `commit` itself
 * fails (the database did, and nothing was written) does every item of the batch get that error.
 */
import { isItemFailure, type ItemOutcome } from './item-outcome.ts';

export interface GroupCommitOptions<T, R> {
  /**
   * Commits the items in one transaction and returns one outcome per item, in order: a result,
   * or an ItemFailure for an item rolled back alone. Throws (or rejects) only when nothing of
   * the batch was written.
   */
  commit(items: readonly T[]): ItemOutcome<R>[] | Promise<ItemOutcome<R>[]>;
  /** When false, each item is committed alone as it is submitted (to measure the difference). */
  enabled?: boolean;
  /** Most items in one commit, so that one batch cannot hold the event loop for long. */
  maxBatch?: number;
  /** Batches whose asynchronous commit may be awaited at once; default 1. */
  maxInFlight?: number;
  /** Runs the flush after the current turn's I/O; tests pass a function they call by hand. */
  schedule?: (flush: () => void) => void;
}

export interface GroupCommit<T, R> {
  /**
   * Resolves with the item's result once its batch is committed; rejects with the item's own
   * error if it failed alone, or with the batch's if the whole batch failed.
   */
  submit(item: T): Promise<R>;
}

interface Waiting<T, R> {
  item: T;
  resolve(result: R): void;
  reject(error: unknown): void;
}

/** Answers one submitter with its item's own outcome. */
function answer<T, R>(waiting: Waiting<T, R>, outcome: ItemOutcome<R>): void {
  if (isItemFailure(outcome)) waiting.reject(outcome.error);
  else waiting.resolve(outcome);
}

export const DEFAULT_MAX_BATCH = 1000;

/**
 * Creates a group committer around `commit`. One closure, longer than a screen, because the queue
 * and the batches in flight are state that `submit` and `flush` share.
 */
export function createGroupCommit<T, R>({
  commit,
  enabled = true,
  maxBatch = DEFAULT_MAX_BATCH,
  maxInFlight = 1,
  schedule = (flush) => void setImmediate(flush),
}: GroupCommitOptions<T, R>): GroupCommit<T, R> {
  let queue: Waiting<T, R>[] = [];
  let scheduled = false;
  let inFlight = 0;

  const request = () => {
    if (!scheduled && queue.length > 0 && inFlight < maxInFlight) {
      scheduled = true;
      schedule(flush);
    }
  };

  const settle = (batch: readonly Waiting<T, R>[], outcomes: ItemOutcome<R>[]) => {
    batch.forEach((waiting, index) => answer(waiting, outcomes[index]!));
  };
  // The transaction rolled back: nobody in the batch is stored, so everybody hears of it.
  const fail = (batch: readonly Waiting<T, R>[], error: unknown) => {
    for (const waiting of batch) waiting.reject(error);
  };

  const flush = () => {
    scheduled = false;
    const batch = queue.length <= maxBatch ? queue : queue.slice(0, maxBatch);
    queue = queue.length <= maxBatch ? [] : queue.slice(maxBatch);
    request();
    if (batch.length === 0) return;
    let results: ItemOutcome<R>[] | Promise<ItemOutcome<R>[]>;
    try {
      results = commit(batch.map((waiting) => waiting.item));
    } catch (error) {
      fail(batch, error);
      return;
    }
    if (!(results instanceof Promise)) {
      settle(batch, results);
      return;
    }
    inFlight++;
    results.then(
      (values) => settle(batch, values),
      (error: unknown) => fail(batch, error),
    ).finally(() => {
      inFlight--;
      request();
    });
  };

  return {
    submit(item) {
      if (!enabled) {
        try {
          return Promise.resolve(commit([item])).then(([outcome]) => (isItemFailure(outcome!) ? Promise.reject(outcome.error) : outcome!));
        } catch (error) {
          return Promise.reject(error);
        }
      }
      return new Promise<R>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        request();
      });
    },
  };
}
