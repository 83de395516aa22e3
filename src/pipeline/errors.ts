/**
 * The one place where anything thrown becomes the contract's Error body. An ApiError keeps its
 * code; a database that cannot be written or reached is `503 unavailable`; anything else is logged by name
 * only (never its message or stack, which may carry SQL or input) and answered `500`.
 */
import { ApiError } from '../http/api-error.ts';
import { errorJson, type Reply } from '../http/reply.ts';
import { DatabaseUnavailableError } from '../storage/errors.ts';

/** SQLite primary result codes meaning "the database cannot be written right now". */
const UNAVAILABLE_SQLITE_CODES = new Set([
  5, // SQLITE_BUSY: another connection holds the write lock past busy_timeout
  6, // SQLITE_LOCKED
  8, // SQLITE_READONLY
  10, // SQLITE_IOERR
  13, // SQLITE_FULL: the disk is full
  14, // SQLITE_CANTOPEN
]);

export type ErrorLog = (fields: Record<string, unknown>) => void;

/** Turns any thrown value into a Reply. `log` receives one record for unexpected errors. */
export function toErrorReply(error: unknown, log: ErrorLog): Reply {
  if (error instanceof ApiError) return reply(error);
  if (error instanceof DatabaseUnavailableError) {
    log({ level: 'error', event: 'database_unavailable', reason: error.reason });
    return reply(unavailable());
  }
  const sqliteCode = sqlitePrimaryCode(error);
  if (sqliteCode !== undefined && UNAVAILABLE_SQLITE_CODES.has(sqliteCode)) {
    log({ level: 'error', event: 'database_unavailable', sqliteCode });
    return reply(unavailable());
  }
  log({
    level: 'error',
    event: 'internal_error',
    error: errorName(error),
    ...(sqliteCode !== undefined ? { sqliteCode } : {}),
  });
  return reply(new ApiError('internal_error', 'Something went wrong on our side.'));
}

const unavailable = () => new ApiError('unavailable', 'The service cannot store data right now; retry later.', { 'Retry-After': '1' });

/** What may be logged of an unexpected error: its name, never its message or stack. */
export function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/** Whether an error came from the database (any SQLite error, or PostgreSQL unavailable), whatever it is answered with. */
export function isDatabaseError(error: unknown): boolean {
  return error instanceof DatabaseUnavailableError || sqlitePrimaryCode(error) !== undefined;
}

function reply(error: ApiError): Reply {
  return { status: error.status, body: errorJson(error.code, error.message, error.status), headers: { ...error.headers } };
}

function sqlitePrimaryCode(error: unknown): number | undefined {
  if (error instanceof Error && (error as { code?: unknown }).code === 'ERR_SQLITE_ERROR') {
    const errcode = (error as { errcode?: unknown }).errcode;
    if (typeof errcode === 'number') return errcode & 0xff;
  }
  return undefined;
}
