/**
 * Step 2: rate limiting. Every request that gets here counts, whatever its later outcome: the
 * caller's token is taken, its headers go on the answer, and a refusal is thrown as the 429.
 */
import { httpError } from '../http/api-error.ts';
import type { Decision } from '../limits/buckets.ts';
import type { RateLimiter } from '../limits/limiter.ts';
import type { Limits } from '../limits/plans.ts';
import type { Exchange } from './exchange.ts';
import type { PipelineObserver } from './observer.ts';

/**
 * Takes the caller's token. A promise only when the limiter answers later (PostgreSQL, a worker
 * thread's): the in-memory limiter's requests do not wait a microtask for it.
 */
export function takeToken(limiter: RateLimiter, caller: string, limits: Limits, exchange: Exchange, observer: PipelineObserver): Promise<void> | undefined {
  const taken = limiter.take(caller, limits);
  if (taken instanceof Promise) return taken.then((decision) => apply(decision, exchange, observer));
  apply(taken, exchange, observer);
  return undefined;
}

function apply(decision: Decision, exchange: Exchange, observer: PipelineObserver): void {
  exchange.rateHeaders = decision.headers;
  if (!decision.allowed) {
    observer.rateLimitRejected(decision.code ?? 'rate_limited');
    throw decision.code === 'temporarily_banned'
      ? httpError('temporarily_banned', 'Too many requests were refused; this caller is banned for a while. Retry after the time in Retry-After.')
      : httpError('rate_limited', 'Rate limit exceeded. Retry after the time in Retry-After, with exponential backoff.');
  }
}
