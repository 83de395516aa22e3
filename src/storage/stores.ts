/**
 * What a storage engine opens for the service: its stores, its rate limiter, how to recognise
 * its failures, and the upkeep it needs. Each engine folder exports one `openStores` over its own
 * open connection (storage/sqlite/stores.ts, storage/postgres/stores.ts), and the service is
 * built the same way over either (src/service/service.ts).
 */
import type { GroupCommitOptions } from '../lib/group-commit.ts';
import type { MaybePromise } from '../lib/maybe-promise.ts';
import type { RateLimiter } from '../limits/limiter.ts';
import type { DatabaseErrorOf } from './errors.ts';
import type { EventLog } from './events.ts';
import type { KeysStore } from './keys.ts';
import type { OrdersStore } from './orders.ts';
import type { PetsStore } from './pets.ts';
import type { WebhooksStore } from './webhooks.ts';

export interface Stores {
  keys: KeysStore;
  pets: PetsStore;
  orders: OrdersStore;
  /** Webhooks, their deliveries (written with the events) and their attempts. */
  webhooks: WebhooksStore;
  /** The log of changes to pets and orders (written by the stores' own writes), for the feed. */
  events: EventLog;
  /** The rate limiter over this engine's state (every token counted once, for every instance). */
  limiter: RateLimiter;
  /** Recognises this engine's failures, for the one error mapping (503 or 500). */
  databaseErrorOf: DatabaseErrorOf;
  /**
   * How the write paths batch for this engine, where it differs from their own defaults (one or
   * two batches of a kind out at once, each gathered during one event-loop turn, as PostgreSQL's
   * pool wants). SQLite's writer thread takes any number of batches, in the order sent.
   */
  writeBatching?: WriteBatching;
  /** Whether the database can be reached (GET /healthz); absent: always (an embedded file). */
  health?: () => boolean | Promise<boolean>;
  /**
   * Upkeep, run by the service's chores (src/service/chores.ts). Each purge deletes at most
   * `limit` rows and resolves with how many, so that requests run between two chunks.
   */
  upkeep: Upkeep;
}

/** What an engine may set of its write paths' group commit. */
export type WriteBatching = Pick<GroupCommitOptions<unknown, unknown>, 'maxInFlight' | 'schedule'>;

export interface Upkeep {
  /**
   * Saves limiter state kept in memory, every second and at exit; absent where there is none.
   * Settles once saved (through SQLite's writer thread, later); throws or rejects on a failure,
   * the changes kept for the next save.
   */
  saveLimiterState?: () => MaybePromise<unknown>;
  /** Deletes Idempotency-Key records that have expired at `now`, oldest first. */
  purgeExpiredRecords(now: number, limit: number): MaybePromise<number>;
  /** Cancels up to `limit` placed orders whose holds ended by `now`, freeing their pets; resolves with how many. */
  expireOrders(now: number, limit: number): MaybePromise<number>;
  /** Deletes events older than `before` (EVENTS_RETENTION_DAYS), oldest first; absent where there is no log. */
  purgeEvents?: (before: number, limit: number) => MaybePromise<number>;
  /** Deletes limiter rows idle for a day (both buckets full again); absent where none are kept. */
  purgeIdleCallers?: (limit: number) => MaybePromise<number>;
  /** Folds recorded changes of the pets' counts into the counts, every second; absent where none are kept. */
  foldCounts?: (limit: number) => MaybePromise<number>;
}
