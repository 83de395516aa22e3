/**
 * The service over PostgreSQL (see service.ts for both engines): every instance shares the
 * database; the limiter takes each token in the database, keys are read per request, and nothing
 * about pets is cached. A module of its own, imported by main.ts only when DATABASE_URL is set:
 * loading the PostgreSQL (and metrics) modules cost every SQLite start about 13 ms (issue #12).
 */
import type { PostgresSql } from '../storage/postgres/driver.ts';
import { createPostgresKeysStore } from '../storage/postgres/keys-store.ts';
import { createPostgresPetsStore } from '../storage/postgres/pets-store.ts';
import { createPostgresLimiter, type PostgresLimiter } from '../storage/postgres/limiter-store.ts';
import { createHealthCheck } from '../storage/postgres/health.ts';
import { assemble, type BaseService, type CommonDeps } from './service.ts';

export interface PostgresServiceDeps extends CommonDeps {
  /** A pool on a migrated database (see storage/postgres/database.ts). */
  sql: PostgresSql;
}

export interface PostgresService extends BaseService {
  limiter: PostgresLimiter;
}

/** Limiter rows deleted per statement of the idle purge. */
const LIMITER_PURGE_CHUNK = 1000;

/** Builds the PostgreSQL service over a pool on a migrated database. */
export function createPostgresService({ sql, ...common }: PostgresServiceDeps): PostgresService {
  const { config, clock } = common;
  const keys = createPostgresKeysStore(sql, { appEnv: config.appEnv });
  const pets = createPostgresPetsStore(sql);
  const limiter = createPostgresLimiter({ sql, clock, banThreshold: config.rateLimitBanThreshold, banSeconds: config.rateLimitBanSeconds });
  const health = createHealthCheck(sql, clock);
  const assembled = assemble({ ...common, overrides: { health, ...common.overrides } }, { keys, pets, limiter });
  return {
    ...assembled, keys, pets, limiter,
    async purgeIdle() {
      while ((await limiter.purgeIdle(LIMITER_PURGE_CHUNK)) === LIMITER_PURGE_CHUNK);
    },
  };
}
