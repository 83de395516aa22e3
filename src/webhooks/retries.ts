/**
 * When a failed delivery is tried again, when it is given up, and when an endpoint that only
 * fails is disabled: pure functions of the schedule and the times, so that every instance, and
 * the same one after a restart, decides alike from what is stored.
 *
 * WEBHOOK_RETRY_SCHEDULE holds N waits, in seconds: attempt k + 1 (k from 1 to N) is due the
 * k-th wait after attempt k failed, and a delivery whose attempt N + 1 failed is abandoned. An
 * endpoint all of whose attempts failed for DISABLE_AFTER_MS is disabled. "Failing since" is the
 * time of the first failure after the endpoint's last success, and a success forgets it; so one
 * success in five days keeps an endpoint enabled, and an endpoint with nothing to deliver is
 * never disabled for the failures of long ago.
 */

/** Five days. */
export const DISABLE_AFTER_MS = 5 * 24 * 60 * 60 * 1000;

/** What becomes of a delivery whose attempt number `attempt` (1, 2 ...) failed at `failedAt` (ms). */
export type AfterFailure = { readonly retryAt: number } | { readonly abandoned: true };

/** Attempt `attempt` failed at `failedAt`: the next is due after the schedule's wait of that rank, or none is left. */
export function afterFailure(schedule: readonly number[], attempt: number, failedAt: number): AfterFailure {
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError(`attempt must be 1 or more, got ${attempt}`);
  const wait = schedule[attempt - 1];
  return wait === undefined ? { abandoned: true } : { retryAt: failedAt + wait * 1000 };
}

/** The most attempts a delivery gets: the first, and one after each wait. */
export function maxAttempts(schedule: readonly number[]): number {
  return schedule.length + 1;
}

/** What is remembered of an endpoint's health: since when every attempt failed, or null. */
export interface EndpointHealth {
  readonly failingSince: number | null;
}

/**
 * An endpoint's health after an attempt at `at` (ms), and whether that attempt disables it (after
 * `disableAfterMs` of failures: DISABLE_AFTER_MS unless a test shortens it).
 */
export function afterAttempt(health: EndpointHealth, succeeded: boolean, at: number, disableAfterMs = DISABLE_AFTER_MS): EndpointHealth & { readonly disable: boolean } {
  if (succeeded) return { failingSince: null, disable: false };
  const failingSince = health.failingSince ?? at;
  return { failingSince, disable: at - failingSince >= disableAfterMs };
}
