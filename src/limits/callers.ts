/**
 * The limiter's caller ids, which are also the rows of the stored limiter state (both engines):
 * `key:<key id>` for a request with a valid API key, `ip:<normalised address>` for any other.
 * The two kinds are held apart: keys are few and issued by an administrator, so
 * their state is never evicted, while addresses are countless and bounded in memory.
 */

/** The caller id of a valid API key (never the key itself: ids are stored and logged). */
export function keyCaller(keyId: string): string {
  return `key:${keyId}`;
}

/** The caller id of an anonymous caller: a client address already normalised by `http/client-address.ts`. */
export function addressCaller(address: string): string {
  return `ip:${address}`;
}

/** Whether `caller` is an API key's (made by `keyCaller`). */
export function isKeyCaller(caller: string): boolean {
  return caller.startsWith('key:');
}
