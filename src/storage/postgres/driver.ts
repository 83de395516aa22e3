/**
 * The PostgreSQL driver (`postgres`, porsager/postgres): the only package the service can load at
 * run time, and only from here, only when DATABASE_URL is set. It is an optional peer dependency,
 * so a default install brings no runtime package; a deployment that wants PostgreSQL installs it.
 */
import type postgres from 'postgres';
import type { Sql, TransactionSql } from 'postgres';

/** A connection pool (the driver's `sql` function), with no custom types. */
export type PostgresSql = Sql<Record<string, never>>;
/** The handle of one transaction (`sql.begin`), which can also take savepoints. */
export type PostgresTransaction = TransactionSql<Record<string, never>>;
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
