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
