/**
 * The one place where anything thrown becomes the contract's Error body. An ApiError keeps its
 * code; a database failure (recognised by the engine's `databaseErrorOf`) is `503 unavailable`
 * when the database cannot be written or reached right now, else `500`; anything else is logged
 * with its name and stack frames (never its message, which may carry SQL or input) and answered
 * `500` with no detail.
 */
import { ApiError, httpError } from '../http/api-error.ts';
import { errorFields } from '../http/access-log.ts';
import { errorJson, type Reply } from '../http/reply.ts';
import { databaseUnavailableOf, type DatabaseErrorOf } from '../storage/errors.ts';

export type ErrorLog = (fields: Record<string, unknown>) => void;

/**
 * Turns any thrown value into a Reply. `log` receives one record for unexpected errors;
 * `databaseErrorOf` recognises the engine's failures (default: DatabaseUnavailableError only).
 */
export function toErrorReply(error: unknown, log: ErrorLog, databaseErrorOf: DatabaseErrorOf = databaseUnavailableOf): Reply {
  if (error instanceof ApiError) return reply(error);
  const failure = databaseErrorOf(error);
  if (failure?.unavailable) {
    log({ level: 'error', event: 'database_unavailable', ...failure.fields });
    return reply(httpError('unavailable', 'The service cannot store data right now; retry later.', { 'Retry-After': '1' }));
  }
  log({ level: 'error', event: 'internal_error', ...errorFields(error), ...failure?.fields });
  return reply(httpError('internal_error', 'Something went wrong on our side.'));
}

function reply(error: ApiError): Reply {
  return { status: error.status, body: errorJson(error.code, error.message, error.status), headers: { ...error.headers } };
}
