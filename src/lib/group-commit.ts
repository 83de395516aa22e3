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
 */

export interface GroupCommitOptions<T, R> {
  /** Commits the items all or nothing and returns one result per item, in order. */
  commit(items: readonly T[]): R[] | Promise<R[]>;
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
  /** Resolves with the item's result once its batch is committed; rejects if the batch fails. */
  submit(item: T): Promise<R>;
}

interface Waiting<T, R> {
  item: T;
  resolve(result: R): void;
  reject(error: unknown): void;
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

  const settle = (batch: readonly Waiting<T, R>[], results: R[]) => {
    batch.forEach((waiting, index) => waiting.resolve(results[index]!));
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
    let results: R[] | Promise<R[]>;
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
          return Promise.resolve(commit([item])).then((results) => results[0]!);
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
