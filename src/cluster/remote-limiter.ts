/**
 * A worker's rate limiter (WORKERS above 1): every take is decided by the one in-memory limiter
 * in the primary thread, so the buckets, bans and per-address limits of the whole port are
 * counted once, exactly, by the same code as a single process.
 *
 * A message per request would cost more than the decision, so the takes of one event-loop turn
 * leave as one message, the way the PostgreSQL limiter batches `take_tokens` (group commit):
 * while two batches are out, new takes gather into the next one.
 */
import { assertLimits, type Decision } from '../limits/buckets.ts';
import type { RateLimiter } from '../limits/limiter.ts';
import type { Limits } from '../limits/plans.ts';
import { createGroupCommit } from '../lib/group-commit.ts';
import type { WorkerMessage } from './protocol.ts';
import { createReplies } from './replies.ts';

export interface RemoteLimiter extends RateLimiter {
  take(caller: string, limits: Limits): Promise<Decision>;
  /** The primary's answer to batch `batch`: one decision per take, in order. */
  answered(batch: number, decisions: Decision[]): void;
}

interface Take {
  caller: string;
  perMinute: number;
  perDay: number;
}

/** A limiter that asks the primary through `post`; its answers come back through `answered`. */
export function createRemoteLimiter(post: (message: WorkerMessage) => void, { maxInFlight = 2 }: { maxInFlight?: number } = {}): RemoteLimiter {
  const replies = createReplies<Decision[]>();
  const batches = createGroupCommit<Take, Decision>({
    maxInFlight,
    commit(takes) {
      const flat: (string | number)[] = [];
      for (const take of takes) flat.push(take.caller, take.perMinute, take.perDay);
      return replies.ask((batch) => post({ type: 'take', batch, takes: flat }));
    },
  });
  return {
    take(caller, { perMinute, perDay }) {
      // A programmer error is thrown here, not in another thread.
      assertLimits({ perMinute, perDay });
      return batches.submit({ caller, perMinute, perDay });
    },
    answered: replies.answer,
  };
}
