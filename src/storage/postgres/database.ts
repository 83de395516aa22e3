/**
 * Connecting to PostgreSQL, bringing its schema up to date, and turning the driver's failures
 * into the service's: a database that cannot be reached is `DatabaseUnavailableError` (503).
 */
import { DatabaseUnavailableError } from '../errors.ts';
import { loadDriver, type PostgresSql } from './driver.ts';
import { MIGRATIONS } from './migrations.ts';
import { CALL_TIMEOUT_MS } from './availability.ts';

export interface PostgresOptions {
  /** Most connections this instance opens (`DATABASE_POOL_SIZE`). */
  poolSize: number;
  /** Seconds to wait for a connection to open; default CONNECT_TIMEOUT_SECONDS. */
  connectTimeoutSeconds?: number;
}

/**
 * A connection that has not opened in this long has failed. The server's requests never wait for
 * it (availability.ts bounds every call); this frees the connection's slot for the next attempt.
 */
export const CONNECT_TIMEOUT_SECONDS = 2;
/**
 * Seconds between a failed connection attempt and the next one of the same connection. The
 * driver's default grows as 3^n / 100 up to 20 s, shared by the pool: after a few seconds of an
 * outage a query waited up to 20 s for its connection's next attempt, and after PostgreSQL came
 * back connections still waited out their back-off. Outages are handled by availability.ts, which
 * sends nothing but one probe at a time while PostgreSQL is down; a short fixed pause is enough
 * to keep a connection that is closed at once from spinning.
 */
const RECONNECT_PAUSE_SECONDS = 0.1;

/**
 * Opens pools over `url`: the driver is loaded once, then each call is a new pool. Nothing
 * connects until the first query. Server notices are not printed (the driver's default is
 * console.log, which would break the one-JSON-line-per-entry log).
 */
export async function postgresPools(url: string, options: PostgresOptions): Promise<() => PostgresSql> {
  const postgres = await loadDriver();
  return () => postgres(url, {
    max: options.poolSize,
    connect_timeout: options.connectTimeoutSeconds ?? CONNECT_TIMEOUT_SECONDS,
    backoff: () => RECONNECT_PAUSE_SECONDS,
    onnotice: () => {},
    // Statements are ours and fixed: prepared once per connection, then only bound.
    prepare: true,
    connection: {
      application_name: 'pets',
      // A statement that the service stopped waiting for (availability.ts: 503 after 1 s) is
      // stopped by PostgreSQL too, soon after, instead of holding locks for nobody.
      statement_timeout: STATEMENT_TIMEOUT_MS,
      ...INDEXES_ONLY,
    },
  }) as unknown as PostgresSql;
}

/**
 * Every statement of the service finds its rows through an index (a key, a page after a cursor,
 * a caller's row), so no plan may be a sequential scan, whatever the statistics say. A plan is
 * made once per connection and kept: one made while a table was small (seen as small when it was
 * last analysed, or really small then) can be a sequential scan, and stays one as the table
 * grows, until PostgreSQL analyses it again. Measured: an instance that planned GET /v1/pets/{id}
 * on 20 pets, analysed, served 3,600 to 3,900 requests a second once 31,000 pets were added (each
 * batch read the whole table), 10,000 after an ANALYZE; with this setting 9,800 to 11,400 before
 * any ANALYZE. Where no index can serve a statement, PostgreSQL still scans the table: this only
 * takes the sequential scan out of the choice. test/storage/postgres/plans.test.ts pins the plans.
 *
 * JIT compilation goes with it: the scan that could not be avoided then costs more than
 * jit_above_cost, and the one-row UPDATE of the address count was compiled at each call (50 ms).
 * The service's statements are all small; none ever gains from JIT.
 */
export const INDEXES_ONLY = { enable_seqscan: 'off', jit: 'off' } as const;

/** A pool over `url` (see postgresPools). */
export async function connectPostgres(url: string, options: PostgresOptions): Promise<PostgresSql> {
  return (await postgresPools(url, options))();
}

/** Longest a statement may run on the server: twice the longest the service waits for one. */
const STATEMENT_TIMEOUT_MS = 2 * CALL_TIMEOUT_MS;

/** Any constant; instances starting together queue on it so that one of them migrates. */
const MIGRATION_LOCK = 0x7065_7473_6d69_67n; // "petsmig"

/**
 * Runs every migration the database has not seen, in order, in one transaction under a
 * transaction-level advisory lock: instances starting at the same moment wait for the first,
 * then find nothing left to do. Returns the versions this call applied.
 */
export async function migratePostgres(sql: PostgresSql, migrations: readonly string[] = MIGRATIONS): Promise<number[]> {
  return guard(() =>
    sql.begin(async (tx) => {
      // A migration may rewrite a large table: no statement timeout for it.
      await tx`SET LOCAL statement_timeout = 0`;
      await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK.toString()}::bigint)`;
      await tx`CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`;
      const [row] = await tx<{ version: number }[]>`SELECT coalesce(max(version), 0)::integer AS version FROM schema_migrations`;
      const applied: number[] = [];
      for (let version = row!.version; version < migrations.length; version++) {
        await tx.unsafe(migrations[version]!);
        await tx`INSERT INTO schema_migrations (version) VALUES (${version + 1})`;
        applied.push(version + 1);
      }
      return applied;
    }),
  );
}

/** SQLSTATE classes and codes that mean "not now" rather than "wrong": answered 503, retried. */
const UNAVAILABLE_SQLSTATE = /^(08|53|57P|57014|58|40001|40P01|25006)/;
/** The driver's and Node's codes for a connection that failed or was lost. */
const UNAVAILABLE_CONNECTION = new Set([
  'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'CONNECT_TIMEOUT',
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
]);

/** The error to throw for a driver failure: unavailable ones become DatabaseUnavailableError. */
export function classifyError(error: unknown): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return error;
  if (UNAVAILABLE_CONNECTION.has(code) || UNAVAILABLE_SQLSTATE.test(code)) return new DatabaseUnavailableError(code);
  return error;
}

/**
 * Failures of a pooled connection that PostgreSQL closed (a restart, a terminated backend): the
 * statement did not run, and the pool opens a fresh connection for the next one.
 */
const STALE_CONNECTION = new Set(['57P01', '57P02', 'CONNECTION_CLOSED', 'ECONNRESET', 'EPIPE', '08006', '08003']);

/**
 * Like `guard`, for a statement that only reads: on a stale connection it is sent once more, so
 * that the first requests after PostgreSQL restarted are answered rather than refused. Never for
 * a write, which might have committed before the connection broke.
 */
export async function guardRead<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code;
    if (typeof code === 'string' && STALE_CONNECTION.has(code)) return guard(work);
    throw classifyError(error);
  }
}

/** Runs `work`, rethrowing its failure classified (see classifyError). */
export async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw classifyError(error);
  }
}
