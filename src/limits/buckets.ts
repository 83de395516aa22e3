/**
 * The two token buckets of a caller, in integer "token-milliseconds": a bucket with a window of
 * W ms holds `tokens * W` units and gains `capacity` units per elapsed millisecond. Refill, take
 * and clamp then stay exact integer arithmetic (for per-day limits up to about 100 million), so a
 * header never shows 58 where 59 is due because of a float rounding. The decision and its
 * headers are computed here for every engine's limiter: the PostgreSQL limiter counts in the
 * same units and answers alike.
 */
import type { Limits } from './plans.ts';

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

export type LimitCode = 'rate_limited' | 'temporarily_banned';

export interface Decision {
  allowed: boolean;
  /** Set when !allowed. */
  code?: LimitCode;
  /** Whole seconds, >= 1, set when !allowed. */
  retryAfter?: number;
  /**
   * Ready-to-send response headers: X-RateLimit-Limit, X-RateLimit-Remaining,
   * X-RateLimit-Reset, RateLimit-Policy, RateLimit, plus Retry-After when !allowed.
   */
  headers: Record<string, string>;
}

/**
 * Throws a RangeError unless both limits are positive safe integers: a programmer error, thrown
 * where the limiter is called (every engine's limiter checks alike, before any work or message).
 */
export function assertLimits({ perMinute, perDay }: Limits): void {
  if (!Number.isSafeInteger(perMinute) || perMinute < 1 || !Number.isSafeInteger(perDay) || perDay < 1) {
    throw new RangeError(`limits must be positive integers, got ${perMinute}/min ${perDay}/day`);
  }
}

/** Brings both buckets to `now` under the given limits, clamping to a lowered capacity. */
export function refill(state: BucketUnits, now: number, perMinute: number, perDay: number): void {
  const minuteCapacity = perMinute * MINUTE_MS;
  const dayCapacity = perDay * DAY_MS;
  const elapsed = now - state.updatedAt;
  if (elapsed > 0) {
    // Past a whole window the bucket is full whatever it held; this also keeps
    // `elapsed * rate` from growing without bound after a long absence.
    state.minute = elapsed >= MINUTE_MS ? minuteCapacity : Math.min(minuteCapacity, state.minute + elapsed * perMinute);
    state.day = elapsed >= DAY_MS ? dayCapacity : Math.min(dayCapacity, state.day + elapsed * perDay);
    state.updatedAt = now;
  } else {
    // Same instant, or the clock stepped back: no refill, so no token is handed out twice.
    if (state.minute > minuteCapacity) state.minute = minuteCapacity;
    if (state.day > dayCapacity) state.day = dayCapacity;
  }
}

/** Milliseconds after the state's `updatedAt` until the bucket holds one whole token. */
export function msUntilToken(units: number, windowMs: number, rate: number): number {
  return units >= windowMs ? 0 : (windowMs - units) / rate;
}

/** Whole seconds from `now` until `at`, rounded up, at least 1 (a Retry-After). */
export function secondsUntil(at: number, now: number): number {
  return Math.max(1, Math.ceil((at - now) / 1000));
}

/** Buckets in token-milliseconds at `updatedAt`: all that the headers of a decision need. */
export interface BucketUnits {
  minute: number;
  day: number;
  updatedAt: number;
}

/**
 * The decision and its headers for a caller whose buckets hold `state` after the request.
 * Exported so that the PostgreSQL limiter, which counts in the same units, answers alike.
 */
export function decide(
  state: BucketUnits,
  perMinute: number,
  perDay: number,
  code: LimitCode | undefined,
  retryAfter: number,
): Decision {
  const minuteLeft = Math.floor(state.minute / MINUTE_MS);
  const dayLeft = Math.floor(state.day / DAY_MS);
  const minuteMsToFull = (perMinute * MINUTE_MS - state.minute) / perMinute;
  const dayMsToFull = (perDay * DAY_MS - state.day) / perDay;
  const minuteBinds = minuteLeft <= dayLeft;
  const headers: Record<string, string> = {
    'X-RateLimit-Limit': String(minuteBinds ? perMinute : perDay),
    'X-RateLimit-Remaining': String(minuteBinds ? minuteLeft : dayLeft),
    'X-RateLimit-Reset': String(Math.ceil((state.updatedAt + (minuteBinds ? minuteMsToFull : dayMsToFull)) / 1000)),
    'RateLimit-Policy': policyHeader(perMinute, perDay),
    RateLimit: `"minute";r=${minuteLeft};t=${Math.ceil(minuteMsToFull / 1000)}, "day";r=${dayLeft};t=${Math.ceil(dayMsToFull / 1000)}`,
  };
  if (code === undefined) return { allowed: true, headers };
  headers['Retry-After'] = String(retryAfter);
  return { allowed: false, code, retryAfter, headers };
}

let lastPolicy = { perMinute: 0, perDay: 0, header: '' };

/** The RateLimit-Policy value; the last one is kept, since most requests come under the same plan. */
function policyHeader(perMinute: number, perDay: number): string {
  if (perMinute !== lastPolicy.perMinute || perDay !== lastPolicy.perDay) {
    lastPolicy = { perMinute, perDay, header: `"minute";q=${perMinute};w=60, "day";q=${perDay};w=86400` };
  }
  return lastPolicy.header;
}
