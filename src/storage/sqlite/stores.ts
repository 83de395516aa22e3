/**
 * The SQLite engine's stores (see storage/stores.ts), in one of two ways:
 * - `openStores(db)`: over one connection that makes its own writes, at once (`:memory:`, tests,
 *   seeding);
 * - `openReaderStores(db, writer)`: over a connection that only reads, whose writes go to the
 *   writer thread (writer/thread.ts): the server's way on a file, in the single process and in
 *   each worker of WORKERS.
 *
 * The rate limiter lives in memory, restored from the file here and saved every second by the
 * service's chores (through the writer, on a reading connection), so that no request waits on a
 * write for it; a restart resumes from the last save. A worker thread (WORKERS above 1) passes
 * the limiter of its primary thread instead, which saves it.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { AppEnv } from '../../config.ts';
import type { Clock } from '../../clock.ts';
import { allSucceeded } from '../../lib/item-outcome.ts';
import { andThen } from '../../lib/maybe-promise.ts';
import { createLimiter, type Limiter, type RateLimiter } from '../../limits/limiter.ts';
import { databaseUnavailableOf } from '../errors.ts';
import type { Stores } from '../stores.ts';
import { dataVersion, foreignCommits, publicationIn } from './data-version.ts';
import { sqliteErrorOf } from './errors.ts';
import { createKeysStore, type SqliteKeysStore } from './keys-store.ts';
import { createLimiterPersistence, createLimiterStore, type LimiterStore } from './limiter-store.ts';
import { createPetsStore, type SqlitePetsStore, type WritesElsewhere } from './pets-store.ts';
import { createOrdersStore, type SqliteOrdersStore } from './orders-store.ts';
import { createEventsStore } from './events-store.ts';
import { createWebhooksStore } from './webhooks-store.ts';
import { journalIn, type SubmitWrites, type WriteJournal, type WriterMemory } from './writer.ts';

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

/** SQLite's stores over a connection that makes its own writes answer synchronously. */
export interface SqliteStores extends Stores {
  keys: SqliteKeysStore;
  pets: SqlitePetsStore;
  orders: SqliteOrdersStore;
  /** The in-memory limiter, or the one passed in. */
  limiter: Limiter | RateLimiter;
}

/** The stores over a reading connection: their writes are answered once the writer has committed. */
export interface ReaderStores extends Stores {
  keys: SqliteKeysStore;
  limiter: Limiter | RateLimiter;
}

/**
 * The writer as a reading connection's stores see it: the writer thread, whose journal and
 * publication are in shared memory; or the inline writer (writer/inline.ts), which writes on
 * this very connection and records into a journal of this thread.
 */
export type WriterLink =
  | {
    /** Sends writes to the writer thread (writer/client.ts). */
    submit: SubmitWrites;
    /** The writer's shared memory: its journal and its publication. */
    memory: WriterMemory;
  }
  | {
    /** The inline writer's writes, on the stores' own connection. */
    submit: SubmitWrites;
    journal: WriteJournal;
    /** The highest event id made durable: the feed reads no further (writer/inline.ts). */
    durableEventId(): number;
  };

/** Where the writes of the stores over `db` go, and how their caches learn of them. */
function writesOf(db: DatabaseSync, writer: WriterLink): WritesElsewhere {
  if ('memory' in writer) {
    return { submit: writer.submit, journal: journalIn(writer.memory.journal), external: foreignCommits(db, publicationIn(writer.memory.publication)) };
  }
  // The connection's own commits leave data_version as it is: only another connection's move it.
  return { submit: writer.submit, journal: writer.journal, external: dataVersion(db) };
}

/** A failure of the database itself (node:sqlite's codes), or the writer thread gone. */
const sqliteOrWriterErrorOf = (error: unknown) => sqliteErrorOf(error) ?? databaseUnavailableOf(error);

/** Opens the stores over `db` (open and migrated), which makes its own writes; the limiter's saved state is loaded first. */
export function openStores(db: DatabaseSync, options: SqliteStoresOptions): SqliteStores {
  const pets = createPetsStore(db);
  const orders = createOrdersStore(db);
  const events = createEventsStore(db);
  return {
    keys: createKeysStore(db, { appEnv: options.appEnv }),
    pets,
    orders,
    events,
    webhooks: createWebhooksStore(db),
    databaseErrorOf: sqliteErrorOf,
    ...limiterAndUpkeep(createLimiterStore(db), options, {
      purgeExpiredRecords: (now, limit) => pets.purgeIdempotencyRecords(now, limit),
      expireOrders: (now, limit) => orders.expireDue(now, limit),
      purgeEvents: (before, limit) => events.purge(before, limit),
    }),
  };
}

/**
 * Opens the stores over `db`, a connection that only reads (open, on a migrated file), whose
 * writes `writer` makes. A write made by the writer is seen here by the next request, and drops
 * only the cached answers it touched; a commit by any other connection drops them all.
 */
export function openReaderStores(db: DatabaseSync, writer: WriterLink, options: SqliteStoresOptions): ReaderStores {
  const writes = writesOf(db, writer);
  const { external } = writes;
  const pets = createPetsStore(db, writes);
  const orders = createOrdersStore(db, writer.submit);
  const events = createEventsStore(db, writer.submit, 'memory' in writer ? undefined : writer.durableEventId);
  const save = (changes: Parameters<LimiterStore['save']>[0]) => andThen(writer.submit('saveLimiter', [changes]), (outcomes) => void allSucceeded(outcomes));
  return {
    keys: createKeysStore(db, { appEnv: options.appEnv, external }),
    pets,
    orders,
    events,
    webhooks: createWebhooksStore(db, writer.submit),
    databaseErrorOf: sqliteOrWriterErrorOf,
    // The writer takes every batch as it comes, in order, and commits those that arrive while it
    // commits as one group: a path need not hold one back while another is out.
    writeBatching: { maxInFlight: Infinity },
    ...limiterAndUpkeep(createLimiterStore(db, save), options, {
      purgeExpiredRecords: (now, limit) => pets.purgeIdempotencyRecords(now, limit),
      expireOrders: (now, limit) => orders.expireDue(now, limit),
      purgeEvents: (before, limit) => events.purge(before, limit),
    }),
  };
}

/** The limiter (restored from `store`, unless held elsewhere) and the upkeep that goes with it. */
function limiterAndUpkeep(store: LimiterStore, options: SqliteStoresOptions, purges: Pick<Stores['upkeep'], 'purgeExpiredRecords' | 'expireOrders' | 'purgeEvents'>) {
  if (options.limiter !== undefined) return { limiter: options.limiter, upkeep: purges };
  const limiter = createLimiter({
    clock: options.clock,
    banThreshold: options.banThreshold,
    banSeconds: options.banSeconds,
    ...(options.maxAnonymousCallers !== undefined ? { maxAnonymousCallers: options.maxAnonymousCallers } : {}),
  });
  const persistence = createLimiterPersistence({ limiter, store });
  persistence.load();
  return { limiter, upkeep: { ...purges, saveLimiterState: () => persistence.flush() } };
}
