/**
 * The PostgreSQL engine's stores over one pool (see storage/stores.ts), shared by every instance
 * started with the same DATABASE_URL: the limiter takes each token in the database, keys are read
 * per request, and nothing about pets is cached, so what one instance or the keys command
 * committed is seen by the next request everywhere.
 */
import type { AppEnv } from '../../config.ts';
import type { Clock } from '../../clock.ts';
import type { Stores } from '../stores.ts';
import type { PostgresSql } from './driver.ts';
import { createHealthCheck } from './health.ts';
import type { Availability } from './availability.ts';
import { createKeysStore } from './keys-store.ts';
import { createLimiterStore, type PostgresLimiter } from './limiter-store.ts';
import { createPetsStore } from './pets-store.ts';
import { createOrdersStore } from './orders-store.ts';
import { createEventsStore } from './event-log.ts';
import { createWebhooksStore } from './webhooks-store.ts';
import { postgresErrorOf } from './sqlstate.ts';

export interface PostgresStoresOptions {
  appEnv: AppEnv;
  clock: Clock;
  /** `RATE_LIMIT_BAN_THRESHOLD` and `RATE_LIMIT_BAN_SECONDS`. */
  banThreshold: number;
  banSeconds: number;
  /** The pool's state (availability.ts), so that /healthz says "no" at once while it is down. */
  availability?: Pick<Availability, 'isUp' | 'generation'>;
}

export interface PostgresStores extends Stores {
  limiter: PostgresLimiter;
}

/** Opens the stores over a pool on a migrated database (see database.ts). */
export function openStores(sql: PostgresSql, options: PostgresStoresOptions): PostgresStores {
  const pets = createPetsStore(sql);
  const orders = createOrdersStore(sql);
  const events = createEventsStore(sql);
  const limiter = createLimiterStore({ sql, clock: options.clock, banThreshold: options.banThreshold, banSeconds: options.banSeconds });
  return {
    keys: createKeysStore(sql, { appEnv: options.appEnv }),
    pets,
    orders,
    events,
    webhooks: createWebhooksStore(sql),
    limiter,
    // Every failure of the driver that means "not now" is already a DatabaseUnavailableError; any
    // other error PostgreSQL sent is logged with its SQLSTATE.
    databaseErrorOf: postgresErrorOf,
    health: createHealthCheck(sql, options.clock, options.availability),
    upkeep: {
      purgeExpiredRecords: (now, limit) => pets.purgeIdempotencyRecords(now, limit),
      expireOrders: (now, limit) => orders.expireDue(now, limit),
      purgeEvents: (before, limit) => events.purge(before, limit),
      purgeIdleCallers: (limit) => limiter.purgeIdle(limit),
      foldCounts: (limit) => orders.foldCounts(limit),
    },
  };
}
