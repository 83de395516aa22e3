/**
 * One caller's state in the in-memory limiter: its buckets, its recent 429s and its bans, and the
 * form in which it is saved and restored. What makes a caller forgettable (idle) or not evictable
 * (protected) is decided here too, from that state alone.
 */
import { DAY_MS, MINUTE_MS, refill } from './buckets.ts';
import type { PoolEntry } from './caller-pool.ts';

/** Contract: `RATE_LIMIT_BAN_THRESHOLD` 429s "within 60 s" trigger a ban. */
export const REJECTION_WINDOW_MS = 60_000;
/** A caller's ban count (the doubling) is forgotten once a full day passes after its last ban ended. */
export const BAN_MEMORY_MS = DAY_MS;

/** One caller's state as persisted: plain values, times in ms since the epoch. */
export interface SavedCaller {
  caller: string;
  /** The limits of the caller's last request; they decide when its buckets count as full. */
  perMinute: number;
  perDay: number;
  /** Tokens (fractional) in each bucket at `updatedAt`. */
  minuteTokens: number;
  dayTokens: number;
  updatedAt: number;
  /** End of the caller's last ban; 0 if never banned. */
  bannedUntil: number;
  /** Bans so far, the doubling exponent of the next one. */
  banCount: number;
  /** Times of the caller's 429 `rate_limited` answers within the last 60 s, ascending. */
  recentRejections: number[];
}

export interface CallerState extends PoolEntry<CallerState> {
  readonly caller: string;
  /** Limits of the last request: they decide when the caller is idle or being rejected. */
  perMinute: number;
  perDay: number;
  /** Token-milliseconds at `updatedAt`. */
  minute: number;
  day: number;
  updatedAt: number;
  bannedUntil: number;
  banCount: number;
  /**
   * The last `banThreshold` rejection times, oldest first from `rejectionHead`. Created on the
   * first rejection and grown one time at a time until it holds `banThreshold`, then used as a
   * ring: memory follows the 429s a caller really got, not the threshold (at the allowed maximum
   * of 10,000, a ring made full at once was 80 KB for an address refused once).
   */
  rejections: number[] | null;
  /** Once the ring is full: the next slot to write, which is also the oldest time. 0 until then. */
  rejectionHead: number;
  lastRejectedAt: number;
  /** Changed since the last export. */
  dirty: boolean;
  /** May have a row in the store, so forgetting it must delete that row. */
  persisted: boolean;
  /** Neighbours in the recency list. */
  older: CallerState | null;
  newer: CallerState | null;
}

/** A caller seen for the first time: full buckets, nothing to remember. */
export function newState(caller: string, perMinute: number, perDay: number, now: number): CallerState {
  return {
    caller,
    perMinute,
    perDay,
    minute: perMinute * MINUTE_MS,
    day: perDay * DAY_MS,
    updatedAt: now,
    bannedUntil: 0,
    banCount: 0,
    rejections: null,
    rejectionHead: 0,
    lastRejectedAt: -Infinity,
    dirty: false,
    persisted: false,
    older: null,
    newer: null,
  };
}

/** Full buckets and nothing else to remember: forgetting the caller changes no answer. */
export function isIdle(state: CallerState, now: number): boolean {
  refill(state, now, state.perMinute, state.perDay);
  return (
    state.minute >= state.perMinute * MINUTE_MS &&
    state.day >= state.perDay * DAY_MS &&
    now >= state.bannedUntil &&
    (state.banCount === 0 || now >= state.bannedUntil + BAN_MEMORY_MS) &&
    now - state.lastRejectedAt >= REJECTION_WINDOW_MS
  );
}

/** Banned or being rejected: an address in this state is never evicted to make room. */
export function isProtected(state: CallerState, now: number): boolean {
  refill(state, now, state.perMinute, state.perDay);
  return now < state.bannedUntil || state.minute < MINUTE_MS || state.day < DAY_MS;
}

/** The state as saved: tokens, bans, and the rejections of the last 60 s, oldest first. */
export function snapshot(state: CallerState, now: number): SavedCaller {
  const recentRejections: number[] = [];
  const ring = state.rejections;
  if (ring !== null) {
    for (let i = 0; i < ring.length; i++) {
      const at = ring[(state.rejectionHead + i) % ring.length]!;
      if (now - at < REJECTION_WINDOW_MS) recentRejections.push(at);
    }
  }
  return {
    caller: state.caller,
    perMinute: state.perMinute,
    perDay: state.perDay,
    minuteTokens: state.minute / MINUTE_MS,
    dayTokens: state.day / DAY_MS,
    updatedAt: state.updatedAt,
    bannedUntil: state.bannedUntil,
    banCount: state.banCount,
    recentRejections,
  };
}

/** A saved caller back in memory, under the ban threshold of this run. */
export function fromSaved(saved: SavedCaller, banThreshold: number): CallerState {
  const state = newState(saved.caller, saved.perMinute, saved.perDay, saved.updatedAt);
  // Units are integers; rounding undoes the division done by `snapshot`.
  state.minute = Math.round(saved.minuteTokens * MINUTE_MS);
  state.day = Math.round(saved.dayTokens * DAY_MS);
  state.bannedUntil = saved.bannedUntil;
  state.banCount = saved.banCount;
  state.persisted = true;
  // The threshold may have changed since the save: keep the newest that still fit.
  const times = saved.recentRejections.slice(-banThreshold);
  if (times.length > 0) {
    // Oldest first, so a full ring starts with its head at 0.
    state.rejections = times;
    state.rejectionHead = 0;
    state.lastRejectedAt = times[times.length - 1]!;
  }
  return state;
}
