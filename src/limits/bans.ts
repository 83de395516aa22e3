/**
 * The 429 of a caller whose bucket is empty, and the escalating temporary bans of callers that
 * keep sending after it: `banThreshold` 429s within 60 s ban a caller, for `banSeconds` the first
 * time and twice as long each time after, at most 24 h.
 */
import { DAY_MS, decide, MINUTE_MS, msUntilToken, secondsUntil, type Decision } from './buckets.ts';
import { BAN_MEMORY_MS, REJECTION_WINDOW_MS, type CallerState } from './caller-state.ts';

/** Contract: bans double "at most 24 h". */
const MAX_BAN_MS = DAY_MS;

export interface BanRules {
  /** Rejections within 60 s that ban a caller (`RATE_LIMIT_BAN_THRESHOLD`). */
  banThreshold: number;
  /** Length of a first ban, in whole milliseconds. */
  banMs: number;
}

/**
 * Records a 429 of `state` at `now` and answers it: `rate_limited` with the Retry-After of one
 * token, or, when it is the `banThreshold`-th within 60 s, `temporarily_banned` with the ban's.
 * The 429 that reaches the threshold already answers with the ban, since that is when a request
 * will next be accepted.
 */
export function reject(state: CallerState, now: number, perMinute: number, perDay: number, { banThreshold, banMs }: BanRules): Decision {
  let ring = state.rejections;
  if (ring === null) {
    ring = [];
    state.rejections = ring;
  }
  if (ring.length < banThreshold) {
    ring.push(now);
  } else {
    ring[state.rejectionHead] = now;
    state.rejectionHead = (state.rejectionHead + 1) % banThreshold;
  }
  state.lastRejectedAt = now;
  // After the write, the head slot holds the oldest of the last `banThreshold` rejections.
  if (ring.length === banThreshold && now - ring[state.rejectionHead]! < REJECTION_WINDOW_MS) {
    if (now >= state.bannedUntil + BAN_MEMORY_MS) state.banCount = 0;
    const duration = Math.min(banMs * 2 ** Math.min(state.banCount, 32), MAX_BAN_MS);
    state.bannedUntil = now + duration;
    state.banCount++;
    state.rejections = null;
    state.rejectionHead = 0;
    return banned(state, now, perMinute, perDay);
  }
  const waitMs = Math.max(msUntilToken(state.minute, MINUTE_MS, perMinute), msUntilToken(state.day, DAY_MS, perDay));
  return decide(state, perMinute, perDay, 'rate_limited', secondsUntil(state.updatedAt + waitMs, now));
}

/** The answer to a banned caller: `temporarily_banned` until its ban ends. */
export function banned(state: CallerState, now: number, perMinute: number, perDay: number): Decision {
  return decide(state, perMinute, perDay, 'temporarily_banned', secondsUntil(state.bannedUntil, now));
}
