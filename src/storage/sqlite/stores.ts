/**
 * The SQLite engine's stores over one open connection (see storage/stores.ts). The rate limiter
 * lives in memory, restored from the file here and saved every second by the service's chores,
 * so that no request waits on a write for it; a restart resumes from the last save. A worker
 * thread (WORKERS above 1) passes the limiter of its primary thread instead, which saves it.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { AppEnv } from '../../config.ts';
import type { Clock } from '../../clock.ts';
import { createLimiter, type Limiter, type RateLimiter } from '../../limits/limiter.ts';
import type { Stores } from '../stores.ts';
import { sqliteErrorOf } from './errors.ts';
import { createKeysStore, type SqliteKeysStore } from './keys-store.ts';
import { createLimiterPersistence, createLimiterStore } from './limiter-store.ts';
import { createPetsStore, type SqlitePetsStore } from './pets-store.ts';
import { createOrdersStore, type SqliteOrdersStore } from './orders-store.ts';

export interface SqliteStoresOptions {
  appEnv: AppEnv;
  clock: Clock;
  /** `RATE_LIMIT_BAN_THRESHOLD` and `RATE_LIMIT_BAN_SECONDS`. */
  banThreshold: number;
  banSeconds: number;
  /** Most client addresses the in-memory limiter holds (default 100 000); tests make it small. */
  maxAnonymousCallers?: number;
  /** A limiter held elsewhere (a worker thread's, in its primary): then none is kept here. */
  limiter?: RateLimiter;
}

/** SQLite's stores answer synchronously, and the in-memory limiter can be inspected. */
export interface SqliteStores extends Stores {
  keys: SqliteKeysStore;
  pets: SqlitePetsStore;
  orders: SqliteOrdersStore;
  /** The in-memory limiter, or the one passed in. */
  limiter: Limiter | RateLimiter;
}

/** Opens the stores over `db` (open and migrated); the limiter's saved state is loaded first. */
export function openStores(db: DatabaseSync, options: SqliteStoresOptions): SqliteStores {
  const pets = createPetsStore(db);
  const common = {
    keys: createKeysStore(db, { appEnv: options.appEnv }),
    pets,
    orders: createOrdersStore(db),
    databaseErrorOf: sqliteErrorOf,
  };
  const purgeExpiredRecords = (now: number, limit: number) => pets.purgeIdempotencyRecords(now, limit);
  if (options.limiter !== undefined) return { ...common, limiter: options.limiter, upkeep: { purgeExpiredRecords } };
  const limiter = createLimiter({
    clock: options.clock,
    banThreshold: options.banThreshold,
    banSeconds: options.banSeconds,
    ...(options.maxAnonymousCallers !== undefined ? { maxAnonymousCallers: options.maxAnonymousCallers } : {}),
  });
  const persistence = createLimiterPersistence({ limiter, store: createLimiterStore(db) });
  persistence.load();
  return { ...common, limiter, upkeep: { purgeExpiredRecords, saveLimiterState: () => void persistence.flush() } };
}
