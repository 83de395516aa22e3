/**
 * A value now or later: SQLite answers at once, PostgreSQL over the network. Callers that must
 * serve both chain with `andThen`, which calls on at once for a plain value, so the synchronous
 * engine's requests take no extra microtask turn (and no allocation) for the other's sake.
 */
export type MaybePromise<T> = T | Promise<T>;

/** `fn(value)` now when `value` is plain, else once it resolves. */
export function andThen<T, R>(value: MaybePromise<T>, fn: (resolved: T) => MaybePromise<R>): MaybePromise<R> {
  return value instanceof Promise ? value.then(fn) : fn(value);
}
