/**
 * The one waiter of a process (or of a worker thread) for the event feed's long poll: the
 * requests that wait for an event hold neither a database connection nor a worker, only a
 * promise here. While any request waits, the waiter reads the log's highest id every
 * `intervalMs` (one cheap read, shared by every waiting request, whatever the instance that
 * committed: the log is the database's) and wakes the requests that wait for a higher one, which
 * then read their page again. LISTEN/NOTIFY would wake sooner on PostgreSQL, but a LISTEN holds
 * its connection, which a pooler in transaction mode does not allow.
 */
import type { MaybePromise } from '../../lib/maybe-promise.ts';

/** How often the highest id is read while requests wait: well inside the second the interface allows. */
export const COMMIT_POLL_INTERVAL_MS = 200;

export interface CommitWaiter {
  /**
   * Resolves true once the log's highest id is above `seen`; false after `ms`, when `signal`
   * aborts (a stream that ended), or at once and for good once the waiter is closed (the server
   * drains).
   */
  wait(seen: number, ms: number, signal?: AbortSignal): Promise<boolean>;
  /** Answers every waiting request now, and every later one at once. */
  close(): void;
}

export interface CommitWaiterOptions {
  /** The log's highest id now. */
  latestId: () => MaybePromise<number>;
  intervalMs?: number;
}

interface Waiting {
  seen: number;
  resolve: (woken: boolean) => void;
  timer: ReturnType<typeof setTimeout>;
  /** Removes its listener from the signal it was given (a stream waits thousands of times on one). */
  forget?: () => void;
}

/** A waiter over `latestId`; its timers run only while someone waits, and never keep the process alive. */
export function createCommitWaiter({ latestId, intervalMs = COMMIT_POLL_INTERVAL_MS }: CommitWaiterOptions): CommitWaiter {
  const waiting = new Set<Waiting>();
  let poll: ReturnType<typeof setInterval> | null = null;
  let reading = false;
  let closed = false;

  function finish(waiter: Waiting, woken: boolean): void {
    if (!waiting.delete(waiter)) return;
    clearTimeout(waiter.timer);
    waiter.forget?.();
    waiter.resolve(woken);
    if (waiting.size === 0 && poll !== null) {
      clearInterval(poll);
      poll = null;
    }
  }

  async function read(): Promise<void> {
    // A read still out (a slow database) is not joined by another.
    if (reading) return;
    reading = true;
    try {
      const latest = await latestId();
      for (const waiter of waiting) if (latest > waiter.seen) finish(waiter, true);
    } catch {
      // The database cannot be read now: the requests keep waiting, and time out as usual.
    } finally {
      reading = false;
    }
  }

  return {
    wait(seen, ms, signal) {
      if (closed || ms <= 0 || signal?.aborted) return Promise.resolve(false);
      return new Promise((resolve) => {
        const waiter: Waiting = { seen, resolve, timer: setTimeout(() => finish(waiter, false), ms) };
        waiter.timer.unref?.();
        waiting.add(waiter);
        if (signal !== undefined) {
          const aborted = () => finish(waiter, false);
          signal.addEventListener('abort', aborted, { once: true });
          waiter.forget = () => signal.removeEventListener('abort', aborted);
        }
        if (poll === null) {
          poll = setInterval(() => void read(), intervalMs);
          poll.unref?.();
        }
      });
    },
    close() {
      closed = true;
      for (const waiter of waiting) finish(waiter, false);
    },
  };
}
