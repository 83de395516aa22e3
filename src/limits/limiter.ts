/**
 * Per-caller rate limiting in memory: a minute and a day token bucket per caller (buckets.ts),
 * and escalating temporary bans for callers that keep hammering after a 429 (bans.ts).
 *
 * Everything is in memory and synchronous; `take` does no I/O. Persistence reads the changed
 * callers through `exportChanges` (limiter-changes.ts; see limiter-store.ts), so the database is
 * written once a second, not once per request.
 *
 * Callers are held in two pools (caller-pool.ts). API keys (`key:` callers) are few and issued by
 * an administrator: their pool has no cap, and a key's state leaves memory only once its buckets
 * are full again and nothing else is left to remember, so no flood of other callers and no
 * restart gives a key a fresh quota. Addresses (`ip:` callers) are countless: their pool has a
 * cap, and when it cannot take one more, that address is refused, never let through unlimited.
 */
import type { Clock } from '../clock.ts';
import { banned, reject, type BanRules } from './bans.ts';
import { assertLimits, DAY_MS, decide, MINUTE_MS, msUntilToken, refill, secondsUntil, type Decision } from './buckets.ts';
import { isKeyCaller } from './callers.ts';
import { append, hasRoom, newPool, sweep, touch, unlink, type Pool, type PoolRules } from './caller-pool.ts';
import { fromSaved, isIdle, isProtected, newState, type CallerState, type SavedCaller } from './caller-state.ts';
import { createChangeTracker, type LimiterChanges } from './limiter-changes.ts';
import type { Limits } from './plans.ts';

export type { SavedCaller } from './caller-state.ts';
export type { LimiterChanges } from './limiter-changes.ts';

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
 * The pools' upkeep is in caller-pool.ts, the bans in bans.ts, what is not saved yet in
 * limiter-changes.ts; this binds them to one caller's request.
 */
export function createLimiter(options: LimiterOptions): Limiter {
  const { clock, banThreshold } = options;
  const rules: BanRules = { banThreshold, banMs: validBanMs(options) };
  const maxAnonymousCallers = options.maxAnonymousCallers ?? MAX_ANONYMOUS_CALLERS;
  if (!Number.isSafeInteger(maxAnonymousCallers) || maxAnonymousCallers < 1) {
    throw new RangeError(`maxAnonymousCallers must be a positive integer, got ${maxAnonymousCallers}`);
  }
  const keys = newPool<CallerState>(Infinity);
  const addresses = newPool<CallerState>(maxAnonymousCallers);
  const poolOf = (caller: string): Pool<CallerState> => (isKeyCaller(caller) ? keys : addresses);
  const changes = createChangeTracker();
  /** Each pool's rules: forgetting a caller deletes it from the pool and, in time, its row. */
  const rulesOf = (pool: Pool<CallerState>): PoolRules<CallerState> => ({
    isIdle,
    isProtected,
    forget(state) {
      pool.callers.delete(state.caller);
      unlink(pool, state);
      changes.forgotten(state);
    },
  });
  const keyRules = rulesOf(keys);
  const addressRules = rulesOf(addresses);

  function admit(pool: Pool<CallerState>, state: CallerState): void {
    changes.admitted(state);
    pool.callers.set(state.caller, state);
    append(pool, state);
  }

  /** The caller's state, touched, or a new one; null when its pool has no room for it. */
  function stateOf(caller: string, perMinute: number, perDay: number, now: number): CallerState | null {
    const pool = poolOf(caller);
    const found = pool.callers.get(caller);
    if (found !== undefined) {
      touch(pool, found);
      return found;
    }
    if (!hasRoom(pool, now, pool === keys ? keyRules : addressRules)) return null;
    const state = newState(caller, perMinute, perDay, now);
    admit(pool, state);
    return state;
  }

  return {
    take(caller, limits) {
      assertLimits(limits);
      const { perMinute, perDay } = limits;
      const now = clock();
      sweep(keys, now, keyRules);
      sweep(addresses, now, addressRules);
      const state = stateOf(caller, perMinute, perDay, now);
      if (state === null) return refuseUntracked(perMinute, perDay, now);
      refill(state, now, perMinute, perDay);
      state.perMinute = perMinute;
      state.perDay = perDay;
      if (now < state.bannedUntil) return banned(state, now, perMinute, perDay);
      changes.changed(state);
      if (state.minute < MINUTE_MS || state.day < DAY_MS) return reject(state, now, perMinute, perDay, rules);
      state.minute -= MINUTE_MS;
      state.day -= DAY_MS;
      return decide(state, perMinute, perDay, undefined, 0);
    },

    size: () => keys.callers.size + addresses.callers.size,

    exportChanges: () => changes.exportChanges(clock()),

    requeue: (saved) => changes.requeue(saved, (caller) => poolOf(caller).callers.get(caller)),

    restore(saved) {
      const now = clock();
      for (const entry of saved) {
        const pool = poolOf(entry.caller);
        if (pool.callers.has(entry.caller)) continue;
        const state = fromSaved(entry, banThreshold);
        // Only an address can find no room (the cap was lowered since the save): it starts afresh.
        if (isIdle(state, now) || !hasRoom(pool, now, pool === keys ? keyRules : addressRules)) {
          changes.removedRow(entry.caller);
          continue;
        }
        admit(pool, state);
      }
    },
  };
}

/** The options' ban rules, checked: programmer errors throw here, at boot. */
function validBanMs({ banThreshold, banSeconds }: LimiterOptions): number {
  if (!Number.isSafeInteger(banThreshold) || banThreshold < 1) {
    throw new RangeError(`banThreshold must be a positive integer, got ${banThreshold}`);
  }
  if (!(Number.isFinite(banSeconds) && banSeconds > 0)) {
    throw new RangeError(`banSeconds must be a positive number, got ${banSeconds}`);
  }
  // Whole milliseconds, so a ban end fits the store's INTEGER column.
  return Math.round(banSeconds * 1000);
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
