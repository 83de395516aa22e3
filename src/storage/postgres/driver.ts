/**
 * The PostgreSQL driver (`postgres`, porsager/postgres): the only package the service can load at
 * run time, and only from here, only when DATABASE_URL is set. It is an optional peer dependency,
 * so a default install brings no runtime package; a deployment that wants PostgreSQL installs it.
 */
import type postgres from 'postgres';
import type { ReservedSql, Sql } from 'postgres';

/** A connection pool (the driver's `sql` function), with no custom types. */
export type PostgresSql = Sql<Record<string, never>>;
/** The handle of one transaction (`sql.begin`): a connection reserved for it (transaction.ts). */
export type PostgresTransaction = ReservedSql<Record<string, never>>;
export type PostgresFactory = typeof postgres;

/** The driver is not installed: one line that says what to install. */
export class DriverMissingError extends Error {
  constructor() {
    super('DATABASE_URL is set but the PostgreSQL driver is not installed: run "npm install --no-save --save-prod --omit=dev postgres@3" next to the service');
    this.name = 'DriverMissingError';
  }
}

/** Imports the driver; a missing package becomes `DriverMissingError`, anything else is thrown as is. */
export async function loadDriver(): Promise<PostgresFactory> {
  try {
    const module = await import('postgres');
    return module.default;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (code === 'ERR_MODULE_NOT_FOUND' && /'postgres'/.test((error as Error).message)) throw new DriverMissingError();
    throw error;
  }
}


/**
 * Whether `reason` is the failure of the query that the driver sends first on each new connection,
 * for the array types, whose promise it drops (so in 3.4.9, reported upstream and open): nothing
 * can await it, so its failure is an unhandled rejection, which would stop the process. It fails
 * when the connection does: through PgBouncer, each connection opened while PostgreSQL is down.
 * The statement that opened the connection fails on its own and is answered 503; the service
 * writes its arrays itself (database.ts), so the connection lacks nothing it needs.
 */
export function isDroppedTypesQuery(reason: unknown): boolean {
  const query = (reason as { query?: unknown } | null)?.query;
  return typeof query === 'string' && query.includes('pg_catalog.pg_type') && query.includes('typarray');
}

/**
 * Whether `error` is the driver's write to a connection it has already closed (in 3.4.9, reported
 * upstream and open): when PostgreSQL ends a session (a restart, a failover,
 * `pg_terminate_backend`) while a transaction holds it, the transaction's next statement is
 * written on a later turn of the event loop (a `setImmediate`), where the socket is already gone.
 * The TypeError reaches no caller, so it would stop the process, with every request in flight.
 * Nothing is lost by letting it go: the transaction has failed (its connection is gone, so
 * PostgreSQL rolled it back), and the statement that was not written never answers, so its call
 * runs out of time (availability.ts, 1 s, `503`) and the pool holding that connection is replaced.
 * Recognised by its first stack frame only: the driver's `nextWrite`, in its connection.js.
 */
export function isWriteAfterClose(error: unknown): boolean {
  if (!(error instanceof TypeError) || typeof error.stack !== 'string') return false;
  const frame = error.stack.split('\n').find((line) => line.trimStart().startsWith('at '));
  return frame !== undefined && /\bnextWrite\b/.test(frame) && /[\\/]postgres[\\/]src[\\/]connection\.js:\d+:\d+\)?$/.test(frame.trimEnd());
}
