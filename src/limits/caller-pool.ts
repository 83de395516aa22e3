/**
 * The callers of one kind, with their recency order, for the limiter's LRU eviction and idle
 * sweep. Recency is an intrusive doubly linked list, oldest first. Not the Map's insertion order
 * (delete + set on touch): V8 leaves deleted slots in place until a rehash, so reading the Map's
 * first entry scans them all, and a flood of new callers made eviction cost ~10 us.
 */

/** What the pool links: an entry knows its neighbours. */
export interface PoolEntry<T> {
  readonly caller: string;
  older: T | null;
  newer: T | null;
}

/** The callers of one kind: by name, and in recency order. */
export interface Pool<T extends PoolEntry<T>> {
  readonly callers: Map<string, T>;
  /** Most callers held at once; Infinity for keys, which are never evicted. */
  readonly capacity: number;
  oldest: T | null;
  newest: T | null;
  /** The next caller the idle sweep looks at, walking from oldest to newest. */
  sweepAt: T | null;
}

/** An empty pool of at most `capacity` callers. */
export function newPool<T extends PoolEntry<T>>(capacity: number): Pool<T> {
  return { callers: new Map(), capacity, oldest: null, newest: null, sweepAt: null };
}

/** Takes `state` out of the recency order (the sweep, if it was about to look at it, moves on). */
export function unlink<T extends PoolEntry<T>>(pool: Pool<T>, state: T): void {
  if (pool.sweepAt === state) pool.sweepAt = state.newer;
  if (state.older === null) pool.oldest = state.newer;
  else state.older.newer = state.newer;
  if (state.newer === null) pool.newest = state.older;
  else state.newer.older = state.older;
  state.older = null;
  state.newer = null;
}

/** Puts `state` at the recent end. */
export function append<T extends PoolEntry<T>>(pool: Pool<T>, state: T): void {
  state.older = pool.newest;
  if (pool.newest === null) pool.oldest = state;
  else pool.newest.newer = state;
  pool.newest = state;
}

/** Moves `state` to the recent end. */
export function touch<T extends PoolEntry<T>>(pool: Pool<T>, state: T): void {
  if (state === pool.newest) return;
  unlink(pool, state);
  append(pool, state);
}

/** What the pool's upkeep asks of its entries, and what it does with one it drops. */
export interface PoolRules<T> {
  /** Nothing left to remember: the sweep may drop it. */
  isIdle(state: T, now: number): boolean;
  /** Never evicted to make room (banned, or being rejected). */
  isProtected(state: T, now: number): boolean;
  /** Takes `state` out of the pool (and whatever else holds it). */
  forget(state: T): void;
}

/**
 * Callers the idle sweep examines in each pool per request. Two, not one: each request moves at
 * most one caller to the recent end, so two steps make the sweep catch up with that end and
 * start over.
 */
const SWEEP_STEPS = 2;
/** Callers examined at the LRU end to make room for a new one before refusing it. */
const EVICTION_PROBES = 32;

/** One step of the idle sweep: the next two callers from the oldest, dropped if idle. */
export function sweep<T extends PoolEntry<T>>(pool: Pool<T>, now: number, rules: PoolRules<T>): void {
  for (let step = 0; step < SWEEP_STEPS; step++) {
    if (pool.sweepAt === null) pool.sweepAt = pool.oldest;
    const state = pool.sweepAt;
    if (state === null) return;
    pool.sweepAt = state.newer;
    if (rules.isIdle(state, now)) rules.forget(state);
  }
}

/**
 * Whether `pool` can take one more caller, evicting at its LRU end if needed: the oldest that
 * is not protected, among the EVICTION_PROBES oldest.
 */
export function hasRoom<T extends PoolEntry<T>>(pool: Pool<T>, now: number, rules: PoolRules<T>): boolean {
  for (let probe = 0; probe < EVICTION_PROBES && pool.callers.size >= pool.capacity; probe++) {
    const state = pool.oldest;
    if (state === null) break;
    // Rotate a protected caller out of the way so the next probe sees another candidate.
    if (rules.isProtected(state, now)) touch(pool, state);
    else rules.forget(state);
  }
  return pool.callers.size < pool.capacity;
}
