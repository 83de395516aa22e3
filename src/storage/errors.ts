/**
 * How a storage engine tells the one error mapping (src/pipeline/errors.ts) that a failure came
 * from its database, without the mapping knowing any engine: each engine's stores come with a
 * `databaseErrorOf` that recognises its own failures.
 */

/**
 * The database cannot be reached or cannot take the work right now (PostgreSQL down, restarting,
 * out of connections). Thrown by a storage engine instead of its driver's own error, so that the
 * one error mapping answers `503 unavailable` with Retry-After without knowing the engine.
 */
export class DatabaseUnavailableError extends Error {
  /** The driver's or server's code (`ECONNREFUSED`, `57P01`): safe to log, never SQL or input. */
  readonly reason: string;

  constructor(reason: string) {
    super(`the database is unavailable (${reason})`);
    this.name = 'DatabaseUnavailableError';
    this.reason = reason;
  }
}

/** A failure that came from the database, as the error mapping needs it. */
export interface DatabaseFailure {
  /** Not now rather than wrong: answered `503 unavailable` with Retry-After, else `500`. */
  unavailable: boolean;
  /** What may be logged of it: codes only, never SQL or input. */
  fields: Record<string, unknown>;
}

/** Recognises an engine's database failures; null for any other error. */
export type DatabaseErrorOf = (error: unknown) => DatabaseFailure | null;

/** The failures every engine may throw: DatabaseUnavailableError (PostgreSQL throws only these). */
export const databaseUnavailableOf: DatabaseErrorOf = (error) =>
  error instanceof DatabaseUnavailableError ? { unavailable: true, fields: { reason: error.reason } } : null;
