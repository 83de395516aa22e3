/**
 * Connecting to PostgreSQL, bringing its schema up to date, and turning the driver's failures
 * into the service's: a database that cannot be reached is `DatabaseUnavailableError` (503).
 */
import { DatabaseUnavailableError } from '../errors.ts';
import { loadDriver, type PostgresFactory, type PostgresSql, type PostgresTransaction } from './driver.ts';
import { MIGRATIONS } from './migrations.ts';
import { CALL_TIMEOUT_MS } from './availability.ts';
import { checkedTransaction } from './transaction.ts';
import { parsePostgresUrl, withOneHost } from '../../lib/postgres-url.ts';

export interface PostgresOptions {
  /** Most connections this instance opens (`DATABASE_POOL_SIZE`). */
  poolSize: number;
  /** Seconds to wait for a connection to open; default CONNECT_TIMEOUT_SECONDS. */
  connectTimeoutSeconds?: number;
  /**
   * A pooler in transaction mode stands in front of PostgreSQL (`DATABASE_POOLER=transaction`):
   * it hands each transaction, and each statement outside one, whichever server connection is
   * free. Then no statement is a named prepared statement (the next statement may find another
   * server connection, where that name means nothing), and a connection sends its next statement
   * only once the last one is answered: PgBouncer releases a server connection as soon as it
   * answers one statement outside a transaction, and the answer to a statement sent behind it
   * then reaches no client (PgBouncer logs "got packet from server when not linked" and closes
   * the connection; the statement waited until the instance gave up, 503).
   *
   * It costs: without prepared statements each statement is parsed, described (a round trip
   * more) and planned at each call. Measured on `npm run bench -- --scale-out` (PostgreSQL
   * directly, two instances), PostgreSQL's CPU per request rose by 25 % to 170 % (a pet by id
   * 36-38 us, then 48-49; a PATCH mix 268-280, then 431-525), the most on writes that hold row
   * locks. So only when a pooler needs it (docs/decisions/0021).
   */
  transactionPooler?: boolean;
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
 *
 * Nothing is sent at connection time but the application's name, and nothing is kept in a session:
 * a pooler in transaction mode (PgBouncer) refuses other start-up parameters, and hands each
 * transaction whichever server connection is free. So the session settings are the role's
 * (SESSION_SETTINGS), statements are named prepared statements and are pipelined unless
 * `transactionPooler` says not to, and `begin` is the one of transaction.ts, which checks each transaction's outcome.
 *
 * A pool opened on `server` connects to that one server alone, whatever `url` lists: for a list
 * of hosts, the serving pools are opened on the primary that `probe` found (see PoolFactory).
 */
export async function postgresPools(url: string, options: PostgresOptions): Promise<PoolFactory> {
  const postgres = await loadDriver();
  const open = (server?: Server) => {
    const pool = postgres(server === undefined ? url : withOneHost(url, server.host, server.port), {
      max: options.poolSize,
      connect_timeout: options.connectTimeoutSeconds ?? CONNECT_TIMEOUT_SECONDS,
      backoff: () => RECONNECT_PAUSE_SECONDS,
      onnotice: () => {},
      prepare: !options.transactionPooler,
      // 0: one statement at a time on each connection (the driver's default pipelines up to 100).
      ...(options.transactionPooler ? { max_pipeline: 0 } : {}),
      connection: { application_name: 'pets' },
      types: ARRAY_PARAMETERS,
      // On one server of a list too: a connection to it once it is a standby fails at its start.
      ...driverSessionAttrs(url),
    }) as unknown as PostgresSql;
    return Object.assign(pool, { begin: (work: (tx: PostgresTransaction) => Promise<unknown>) => checkedTransaction(pool, work) });
  };
  return Object.assign(open, { probe: primaryProbe(postgres, url, options) });
}

/** One server of a URL's list. */
export interface Server {
  host: string;
  port: number;
}

/**
 * Opens a pool: on the URL as it is, or on one `server` of its list. `probe`, for a list of hosts,
 * finds the one that is a primary now (see primaryProbe); null for a single host.
 *
 * Why the serving pools of a list are opened on one host: given the list, the driver (`postgres`
 * 3.4.9) tries its hosts in turn for as long as none takes a read-write session, and its count of
 * tries never grows, so a connection opened for a transaction (`reserve()`) never gives up, and
 * keeps connecting after its pool is closed. Measured with a primary killed: a pool closed while a
 * transaction waited opened about 130 sessions a second on the standby until the end of the
 * outage. On one host, a dead primary is a refused connection at once, which turns the instance
 * down (availability.ts), and its probe, not the driver, looks for the next primary.
 */
export type PoolFactory = ((server?: Server) => PostgresSql) & { probe: ((waitMs?: number) => Promise<Server>) | null };

/** The application name of the probe's sessions, told apart from the pools' (`pets`) in PostgreSQL's views and log. */
export const PROBE_APPLICATION_NAME = 'pets-probe';

/**
 * For a list of hosts, the host that is a primary now (the first to answer as one), found within
 * `waitMs`. The start asks it for its first pool, and availability.ts while PostgreSQL is down,
 * instead of `SELECT 1` on a pool; each opens its next pool on the host it names.
 *
 * Each host is asked on a connection of its own, not through a pool over the list, which the
 * driver would connect again at once, without a pause, for as long as no host took a read-write
 * session (135 to 312 sessions a second on a standby during a failover, two instances). One
 * session per host and probe, closed at the latest after `waitMs`: a host that closes each
 * connection before answering would otherwise be connected to again at once, forever.
 */
function primaryProbe(postgres: PostgresFactory, url: string, options: PostgresOptions): ((waitMs?: number) => Promise<Server>) | null {
  const parsed = parsePostgresUrl(url);
  if ('invalid' in parsed || parsed.hosts.length < 2) return null;
  const ask = async (server: Server, waitMs: number) => {
    const one = postgres(withOneHost(url, server.host, server.port), {
      max: 1, connect_timeout: options.connectTimeoutSeconds ?? CONNECT_TIMEOUT_SECONDS, onnotice: () => {}, fetch_types: false, prepare: false,
      connection: { application_name: PROBE_APPLICATION_NAME },
    });
    // Ending the pool fails the query if it is still waiting (CONNECTION_DESTROYED).
    const timer = setTimeout(() => one.end({ timeout: 0 }).catch(() => {}), waitMs);
    try {
      const [row] = await one<{ standby: boolean }[]>`SELECT pg_is_in_recovery() AS standby`;
      if (row!.standby) throw new Error('a standby');
      return server;
    } finally {
      clearTimeout(timer);
      one.end({ timeout: 0 }).catch(() => {});
    }
  };
  return (waitMs = CALL_TIMEOUT_MS) => Promise.any(parsed.hosts.map((server) => ask(server, waitMs)));
}

/**
 * The settings of every session of the service's role in its database, which migratePostgres
 * gives the role (ALTER ROLE ... IN DATABASE ... SET), so that every connection has them from its
 * start, opened directly or by a pooler:
 *
 * - statement_timeout: a statement that the service stopped waiting for (availability.ts: 503
 *   after 1 s) is stopped by PostgreSQL too, soon after, instead of holding locks for nobody.
 * - enable_seqscan off: every statement of the service finds its rows through an index (a key, a
 *   page after a cursor, a caller's row), so no plan may be a sequential scan, whatever the
 *   statistics say. A plan can be made once and kept (a prepared statement's, a statement's in a
 *   function such as take_tokens): one made while a table was small (seen as small when it was
 *   last analysed, or really small then) can be a sequential scan, and stays one as the table
 *   grows, until PostgreSQL analyses it again. Measured: an instance that planned GET
 *   /v1/pets/{id} on 20 pets, analysed, served 3,600 to 3,900 requests a second once 31,000 pets
 *   were added (each batch read the whole table), 10,000 after an ANALYZE; with this setting 9,800
 *   to 11,400 before any ANALYZE. Where no index can serve a statement, PostgreSQL still scans the
 *   table: this only takes the sequential scan out of the choice.
 *   test/storage/postgres/plans.test.ts pins the plans.
 * - jit off: the scan that could not be avoided then costs more than jit_above_cost, and the
 *   one-row UPDATE of the address count was compiled at each call (50 ms). The service's
 *   statements are all small; none ever gains from JIT.
 */
export const SESSION_SETTINGS = { statement_timeout: String(2 * CALL_TIMEOUT_MS), enable_seqscan: 'off', jit: 'off' } as const;

/**
 * Arrays sent as parameters (`$1::text[]`, `::bigint[]`, `::integer[]`), written as PostgreSQL's
 * array literal, as the driver writes them: each element quoted, `\` and `"` escaped.
 *
 * The driver learns how to write arrays from a query of PostgreSQL's catalog that it sends first
 * on each new connection (fetch_types), and a connection on which that query failed stays open
 * without them, so that every later statement with an array failed (22P02, invalid array
 * literal). Through PgBouncer that happened after each outage: PgBouncer answers the query with
 * an error while PostgreSQL is down, and keeps the connection. The service sends arrays of these
 * three types only, and reads none, so it writes them itself. (The query is still sent: without
 * it the driver never hands out a connection reserved for a transaction that it had to open.)
 */
const ARRAY_PARAMETERS = Object.fromEntries(Object.entries({ textArray: 1009, bigintArray: 1016, integerArray: 1007 }).map(([name, oid]) => [
  name,
  // `from` lists the types whose results `parse` reads: none.
  { to: oid, from: [] as number[], serialize: arrayLiteral, parse: (text: string) => text },
]));

/** `values` as an array literal: `{"a","b\\"c",NULL}`. */
export function arrayLiteral(values: readonly unknown[]): string {
  return `{${values.map((value) => (value === null ? 'NULL' : `"${String(value).replace(/[\\"]/g, '\\$&')}"`)).join(',')}}`;
}

/**
 * `target_session_attrs=read-write` as the driver must be told it. Its own read-write check looks at
 * default_transaction_read_only alone, which a hot standby reports as off: with the primary down it
 * connected to the standby, whose every write then failed (25006) and whose reads could lag. Its
 * `primary` check asks whether the server is in recovery, which is what tells a standby apart.
 */
function driverSessionAttrs(url: string): { target_session_attrs?: 'primary' } {
  const parsed = parsePostgresUrl(url);
  return !('invalid' in parsed) && parsed.targetSessionAttrs === 'read-write' ? { target_session_attrs: 'primary' } : {};
}

/** A pool over `url` (see postgresPools). */
export async function connectPostgres(url: string, options: PostgresOptions): Promise<PostgresSql> {
  return (await postgresPools(url, options))();
}

/** Any constant; instances starting together queue on it so that one of them migrates. */
const MIGRATION_LOCK = 0x7065_7473_6d69_67n; // "petsmig"

/**
 * Runs every migration the database has not seen, in order, in one transaction under a
 * transaction-level advisory lock: instances starting at the same moment wait for the first,
 * then find nothing left to do; then gives the role its SESSION_SETTINGS in this database if it
 * does not have them yet. Returns the versions this call applied.
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
      await settleRoleSettings(tx as unknown as PostgresSql);
      return applied;
    }),
  );
}

/**
 * Gives the connected role SESSION_SETTINGS as its defaults in the current database, unless it
 * has them already (then nothing is written). The connection that writes them takes them too, at
 * once: it is the only one that opened before them. Inside the migration's transaction and lock,
 * so that two instances starting together do not write them at once.
 */
async function settleRoleSettings(tx: PostgresSql): Promise<void> {
  const wanted = Object.entries(SESSION_SETTINGS).map(([name, value]) => `${name}=${value}`);
  const [row] = await tx.unsafe<{ settled: boolean }[]>(`
    SELECT coalesce((SELECT setconfig @> $1::text[] FROM pg_db_role_setting
                      WHERE setrole = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                        AND setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())), false) AS settled`, [wanted]);
  if (row!.settled) return;
  // The names and values are the constants above; the database's name is quoted by format().
  await tx.unsafe(`DO $$ BEGIN
    ${Object.entries(SESSION_SETTINGS).map(([name, value]) =>
      `EXECUTE format('ALTER ROLE CURRENT_USER IN DATABASE %I SET ${name} = %L', current_database(), '${value}');
    PERFORM set_config('${name}', '${value}', false);`).join('\n    ')}
  END $$`);
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
