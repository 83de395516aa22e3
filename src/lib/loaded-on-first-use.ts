/**
 * A value made by an asynchronous `load` (usually one that imports modules) on its first use and
 * kept: the parts of the service a start does not need are loaded this way (api/lazy-handlers.ts,
 * the pets' write paths, the webhook attempt), each module a start loads costing it about 0.3 ms
 * before its first answer.
 */
export interface LoadedOnFirstUse<T> {
  /** The value, loading it on the first call. A load that fails fails its callers and is tried again by the next call. */
  get(): Promise<T>;
  /** `fn(value)`: at once once loaded (no promise in between), else after the load. */
  use<R>(fn: (value: T) => R): R | Promise<Awaited<R>>;
}

export function loadedOnFirstUse<T>(load: () => Promise<T>): LoadedOnFirstUse<T> {
  let value: T | undefined;
  let loading: Promise<T> | undefined;
  const get = () => (loading ??= load().then(
    (made) => (value = made),
    (error: unknown) => {
      loading = undefined;
      throw error;
    },
  ));
  return {
    get,
    // `then` flattens a promise that `fn` returns, which is what Awaited says; TypeScript types it R.
    use: (fn) => (value !== undefined ? fn(value) : get().then(fn) as Promise<Awaited<ReturnType<typeof fn>>>),
  };
}
