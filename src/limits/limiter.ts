/**
 * Per-caller rate limiting in memory: a minute and a day token bucket per caller (buckets.ts),
 * and escalating temporary bans for callers that keep hammering after a 429.
 *
 * Everything is in memory and synchronous; `take` does no I/O. Persistence reads the changed
 * callers through `exportChanges` (see limiter-store.ts), so the database is written once a
 * second, not once per request.
 *
 * Callers are held in two pools. API keys (`key:` callers) are few and issued by an
 * administrator: their pool has no cap, and a key's state leaves memory only once its buckets are
 * full again and nothing else is left to remember, so no flood of other callers and no restart
 * gives a key a fresh quota. Addresses (`ip:` callers) are countless: their pool has a cap, and
 * when it cannot take one more, that address is refused, never let through unlimited.
 */
import type { Clock } from '../clock.ts';
import { assertLimits, DAY_MS, decide, MINUTE_MS, msUntilToken, refill, secondsUntil, type Decision } from './buckets.ts';
import { isKeyCaller } from './callers.ts';
import { append, newPool, touch, unlink, type Pool, type PoolEntry } from './caller-pool.ts';
import type { Limits } from './plans.ts';
/** Contract: `RATE_LIMIT_BAN_THRESHOLD` 429s "within 60 s" trigger a ban. */
const REJECTION_WINDOW_MS = 60_000;
/** Contract: bans double "at most 24 h". */
const MAX_BAN_MS = DAY_MS;
/** A caller's ban count (the doubling) is forgotten once a full day passes after its last ban ended. */
const BAN_MEMORY_MS = DAY_MS;
/** Addresses examined at the LRU end to make room for a new one before refusing it. */
const EVICTION_PROBES = 32;
/**
 * Callers the idle sweep examines in each pool per request. Two, not one: each request moves at
 * most one caller to the recent end, so two steps make the sweep catch up with that end and
 * start over.
 */
const SWEEP_STEPS = 2;
/** Most client addresses the limiter tracks, in memory (SQLite) or in rate_limit_callers (PostgreSQL). */
export const MAX_ANONYMOUS_CALLERS = 100_000;

export interface LimiterOptions {
  clock: Clock;
  /** Rejections (429 `rate_limited`) within 60 s that ban a caller (`RATE_LIMIT_BAN_THRESHOLD`). */
  banThreshold: number;
  /** Length of a caller's first ban, in seconds (`RATE_LIMIT_BAN_SECONDS`). */
  banSeconds: number;
  /**
   * Most anonymous callers (addresses) held in memory; default 100 000. Keys are not counted:
   * there are only as many of them as an administrator created.
   */
  maxAnonymousCallers?: number;
}

/**
 * Takes a token for a caller, as the request pipeline needs it: the in-memory limiter answers at
 * once; the PostgreSQL limiter and a worker thread's (which asks the primary) answer later.
 */
export interface RateLimiter {
  take(caller: string, limits: Limits): Decision | Promise<Decision>;
}

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

/** What changed since the previous `exportChanges`: callers to upsert and callers to delete. */
export interface LimiterChanges {
  saved: SavedCaller[];
  removed: string[];
}

export interface Limiter {
  /**
   * Counts one request of `caller` (an opaque id such as `key:<key id>` or `ip:<address>`;
   * never a plain API key, since it is persisted) against `limits`, which may differ from the
   * previous call's. Never throws for a well-formed `limits`.
   */
  take(caller: string, limits: Limits): Decision;
  /** Callers held in memory, keys and addresses. */
  size(): number;
  /** Changes since the last call, for the store; tracking restarts empty. */
  exportChanges(): LimiterChanges;
  /** Puts back changes that could not be saved, so the next export carries them again. */
  requeue(changes: LimiterChanges): void;
  /**
   * Loads saved state at startup (oldest `updatedAt` first, so the LRU order survives). Time
   * that passed since `updatedAt` refills the buckets as usual. A caller already in memory keeps
   * its (newer) state.
   */
  restore(saved: Iterable<SavedCaller>): void;
}

interface CallerState extends PoolEntry<CallerState> {
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

/**
 * Creates an in-memory limiter. Programmer errors in `options` throw here, at boot.
 *
 * Choices the contract leaves open:
 * - The 429 that reaches `banThreshold` already answers `temporarily_banned`, with the ban's
 *   Retry-After, since that is when a request will next be accepted. Answers during a ban are
 *   not counted towards the next ban (otherwise every ban would renew itself when it ends).
 * - Ban n (from 0) lasts `banSeconds * 2^n`, at most 24 h. The count is forgotten when a new
 *   ban starts 24 h or more after the previous one ended; until then the caller is kept (in
 *   memory and in the store) even with full buckets.
 * - Callers whose buckets are full again and who have nothing else to remember are dropped by
 *   a sweep that looks at two entries of each pool per request. That is the only way a key
 *   leaves memory, and its row then holds nothing a fresh caller would not have.
 * - At `maxAnonymousCallers`, the least recently seen address that is neither banned nor being
 *   rejected (a bucket under one token) is evicted: it comes back with full buckets. Only a
 *   client that holds more addresses than the cap can force that, and it has that many buckets
 *   anyway. If the 32 oldest are all protected, the new address is refused with
 *   `429 rate_limited` and not remembered: memory stays bounded, no limited caller is
 *   released, and no caller is let through unlimited.
 *
 * One closure, longer than a screen: the two pools, the changes not yet saved and the removed
 * callers are state that every method below shares; each inner function is a few lines.
 */
export function createLimiter(options: LimiterOptions): Limiter {
  const { clock, banThreshold, banSeconds } = options;
  const maxAnonymousCallers = options.maxAnonymousCallers ?? MAX_ANONYMOUS_CALLERS;
  if (!Number.isSafeInteger(banThreshold) || banThreshold < 1) {
    throw new RangeError(`banThreshold must be a positive integer, got ${banThreshold}`);
  }
  if (!(Number.isFinite(banSeconds) && banSeconds > 0)) {
    throw new RangeError(`banSeconds must be a positive number, got ${banSeconds}`);
  }
  if (!Number.isSafeInteger(maxAnonymousCallers) || maxAnonymousCallers < 1) {
    throw new RangeError(`maxAnonymousCallers must be a positive integer, got ${maxAnonymousCallers}`);
  }
  // Whole milliseconds, so a ban end fits the store's INTEGER column.
  const banMs = Math.round(banSeconds * 1000);

  const keys = newPool<CallerState>(Infinity);
  const addresses = newPool<CallerState>(maxAnonymousCallers);
  const poolOf = (caller: string): Pool<CallerState> => (isKeyCaller(caller) ? keys : addresses);
  const dirty = new Set<CallerState>();
  const removed = new Set<string>();

  function markDirty(state: CallerState): void {
    if (!state.dirty) {
      state.dirty = true;
      dirty.add(state);
    }
  }

  function forget(pool: Pool<CallerState>, state: CallerState): void {
    pool.callers.delete(state.caller);
    unlink(pool, state);
    if (state.dirty) {
      state.dirty = false;
      dirty.delete(state);
    }
    if (state.persisted) removed.add(state.caller);
  }

  function sweep(pool: Pool<CallerState>, now: number): void {
    for (let step = 0; step < SWEEP_STEPS; step++) {
      if (pool.sweepAt === null) pool.sweepAt = pool.oldest;
      const state = pool.sweepAt;
      if (state === null) return;
      pool.sweepAt = state.newer;
      if (isIdle(state, now)) forget(pool, state);
    }
  }

  /** Whether `pool` can take one more caller, freeing a slot at its LRU end if needed. */
  function hasRoom(pool: Pool<CallerState>, now: number): boolean {
    for (let probe = 0; probe < EVICTION_PROBES && pool.callers.size >= pool.capacity; probe++) {
      const state = pool.oldest;
      if (state === null) break;
      // Rotate a protected caller out of the way so the next probe sees another candidate.
      if (isProtected(state, now)) touch(pool, state);
      else forget(pool, state);
    }
    return pool.callers.size < pool.capacity;
  }

  function admit(pool: Pool<CallerState>, state: CallerState): void {
    // Its row is still in the store, waiting to be deleted: overwrite it instead.
    if (removed.delete(state.caller)) state.persisted = true;
    pool.callers.set(state.caller, state);
    append(pool, state);
  }

  function reject(state: CallerState, now: number, perMinute: number, perDay: number): Decision {
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
    markDirty(state);
    // After the write, the head slot holds the oldest of the last `banThreshold` rejections.
    if (ring.length === banThreshold && now - ring[state.rejectionHead]! < REJECTION_WINDOW_MS) {
      if (now >= state.bannedUntil + BAN_MEMORY_MS) state.banCount = 0;
      const duration = Math.min(banMs * 2 ** Math.min(state.banCount, 32), MAX_BAN_MS);
      state.bannedUntil = now + duration;
      state.banCount++;
      state.rejections = null;
      state.rejectionHead = 0;
      return decide(state, perMinute, perDay, 'temporarily_banned', secondsUntil(state.bannedUntil, now));
    }
    const waitMs = Math.max(
      msUntilToken(state.minute, MINUTE_MS, perMinute),
      msUntilToken(state.day, DAY_MS, perDay),
    );
    return decide(state, perMinute, perDay, 'rate_limited', secondsUntil(state.updatedAt + waitMs, now));
  }

  return {
    take(caller, limits) {
      assertLimits(limits);
      const { perMinute, perDay } = limits;
      const now = clock();
      sweep(keys, now);
      sweep(addresses, now);
      const pool = poolOf(caller);
      let state = pool.callers.get(caller);
      if (state === undefined) {
        if (!hasRoom(pool, now)) return refuseUntracked(perMinute, perDay, now);
        state = newState(caller, perMinute, perDay, now);
        admit(pool, state);
      } else {
        touch(pool, state);
      }
      refill(state, now, perMinute, perDay);
      state.perMinute = perMinute;
      state.perDay = perDay;
      if (now < state.bannedUntil) {
        return decide(state, perMinute, perDay, 'temporarily_banned', secondsUntil(state.bannedUntil, now));
      }
      if (state.minute < MINUTE_MS || state.day < DAY_MS) return reject(state, now, perMinute, perDay);
      state.minute -= MINUTE_MS;
      state.day -= DAY_MS;
      markDirty(state);
      return decide(state, perMinute, perDay, undefined, 0);
    },

    size() {
      return keys.callers.size + addresses.callers.size;
    },

    exportChanges() {
      const now = clock();
      const saved: SavedCaller[] = [];
      for (const state of dirty) {
        saved.push(snapshot(state, now));
        state.dirty = false;
        state.persisted = true;
      }
      dirty.clear();
      const gone = [...removed];
      removed.clear();
      return { saved, removed: gone };
    },

    requeue(changes) {
      for (const caller of [...changes.removed, ...changes.saved.map((saved) => saved.caller)]) {
        const state = poolOf(caller).callers.get(caller);
        if (state === undefined) {
          // Whether or not its row was written, deleting it is right: absent means full.
          removed.add(caller);
        } else {
          state.persisted = true;
          markDirty(state);
        }
      }
    },

    restore(saved) {
      const now = clock();
      for (const entry of saved) {
        const pool = poolOf(entry.caller);
        if (pool.callers.has(entry.caller)) continue;
        const state = fromSaved(entry, banThreshold);
        // Only an address can find no room (the cap was lowered since the save): it starts afresh.
        if (isIdle(state, now) || !hasRoom(pool, now)) {
          removed.add(entry.caller);
          continue;
        }
        admit(pool, state);
      }
    },
  };
}

/** Full buckets and nothing else to remember: forgetting the caller changes no answer. */
function isIdle(state: CallerState, now: number): boolean {
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
function isProtected(state: CallerState, now: number): boolean {
  refill(state, now, state.perMinute, state.perDay);
  return now < state.bannedUntil || state.minute < MINUTE_MS || state.day < DAY_MS;
}

/**
 * The answer to an address that the limiter cannot track (every slot it may evict holds a
 * limited caller): `429 rate_limited`, shown as an empty minute bucket, with the Retry-After of
 * one token. Letting it through would let a flood of addresses go unlimited.
 */
function refuseUntracked(perMinute: number, perDay: number, now: number): Decision {
  const state = newState('', perMinute, perDay, now);
  state.minute = 0;
  return decide(state, perMinute, perDay, 'rate_limited', secondsUntil(now + msUntilToken(0, MINUTE_MS, perMinute), now));
}

function newState(caller: string, perMinute: number, perDay: number, now: number): CallerState {
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

function snapshot(state: CallerState, now: number): SavedCaller {
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

function fromSaved(saved: SavedCaller, banThreshold: number): CallerState {
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
