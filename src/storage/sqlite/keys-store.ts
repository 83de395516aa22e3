/**
 * The `api_keys` table: every statement that touches it lives here.
 *
 * Times are milliseconds since the epoch in and out. Active keys are cached by hash, and the cache
 * is emptied whenever another connection commits (see `findByHash`), so a revocation or a change
 * of scopes by the command line takes effect on the server's next request. The lookup is one
 * indexed read (`key_hash` is UNIQUE).
 */
import type { DatabaseSync } from 'node:sqlite';
import { transaction } from './database.ts';
import { dataVersion } from './data-version.ts';
import { wellFormedKeyHash } from '../../keys/api-keys.ts';
import { formatScopes, type Scope } from '../../keys/scopes.ts';
import {
  assertGraceSeconds, assertScopes, KEY_COLUMNS, planRotation, prepareKey, toRecord, UnknownAccountError,
  type ApiKeyRecord, type ApiKeyRow, type IssuedKey, type KeysStoreOptions, type NewKey, type RotateResult,
} from '../keys.ts';

/** The SQLite key store answers synchronously: no caller needs to wait for it. */
export interface SqliteKeysStore {
  create(input: NewKey): IssuedKey;
  findByKey(plainKey: string, now: number): ApiKeyRecord | null;
  findByHash(keyHash: string, now: number): ApiKeyRecord | null;
  get(id: string): ApiKeyRecord | null;
  list(): ApiKeyRecord[];
  revoke(id: string, now: number): boolean;
  rotate(id: string, graceSeconds: number, now: number): RotateResult;
  setScopes(id: string, scopes: readonly Scope[]): ApiKeyRecord | null;
  createFirst(input: NewKey): IssuedKey | null;
  count(): number;
}

const MAX_CACHED_KEYS = 10_000;

interface KeyCache {
  records: Map<string, ApiKeyRecord>;
  /** data_version when `records` was last known to be right. */
  version: number;
}

/** One cache per connection, shared by every store on it, so any store's write empties it. */
const caches = new WeakMap<DatabaseSync, KeyCache>();
function connectionCache(db: DatabaseSync): KeyCache {
  let cache = caches.get(db);
  if (!cache) caches.set(db, (cache = { records: new Map(), version: -1 }));
  return cache;
}

/**
 * The key store over an open, migrated database. Statements are prepared once, here.
 * Programmer errors (enterprise without numbers, an expiry in the past) throw; "no such key"
 * is a return value. One closure, longer than a screen, because the prepared statements and the
 * key cache are shared by every method; each method is short.
 */
export function createKeysStore(db: DatabaseSync, options: KeysStoreOptions & { external?: () => number }): SqliteKeysStore {
  const { appEnv } = options;

  const insert = db.prepare(
    `INSERT INTO api_keys (id, key_hash, account, scopes, label, plan, per_minute, per_day, created_at, expires_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const insertAccount = db.prepare('INSERT INTO accounts (id, created_at) VALUES (?, ?)');
  const accountExists = db.prepare('SELECT 1 FROM accounts WHERE id = ?');
  const selectActiveByHash = db.prepare(
    `SELECT ${KEY_COLUMNS} FROM api_keys
     WHERE key_hash = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
  );
  const selectById = db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = ?`);
  // rowid breaks ties in insertion order: keys made in the same millisecond keep their order.
  const selectAll = db.prepare(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, rowid`);
  // A second revocation keeps the first time: that is when the key stopped working.
  const updateRevoked = db.prepare('UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?');
  const updateExpires = db.prepare('UPDATE api_keys SET expires_at = ? WHERE id = ?');
  const updateScopes = db.prepare(`UPDATE api_keys SET scopes = ? WHERE id = ? RETURNING ${KEY_COLUMNS}`);
  const selectCount = db.prepare('SELECT count(*) AS n FROM api_keys');

  // Active keys by hash, so a request costs neither a query nor a row decode. A commit by any
  // other connection (the keys command revoking a key) changes data_version and empties it; a
  // write through any store on this connection empties it too. Expiry is checked on every hit.
  // On a reading connection `external` ignores the writer thread's commits, which never touch
  // keys (data-version.ts).
  const externalVersion = options.external ?? dataVersion(db);
  const cache = connectionCache(db);
  const forget = () => cache.records.clear();

  /** Inserts the key (and its new account), inside the caller's transaction. */
  function insertKey(input: NewKey): IssuedKey {
    const { row, key, keyHash, newAccount } = prepareKey(input, options);
    if (newAccount) insertAccount.run(row.account, row.created_at);
    else if (accountExists.get(row.account) === undefined) throw new UnknownAccountError(row.account);
    insert.run(row.id, keyHash, row.account, row.scopes, row.label, row.plan, row.per_minute, row.per_day, row.created_at, row.expires_at);
    forget();
    return { record: toRecord(row), key };
  }

  const countKeys = () => Number((selectCount.get() as { n: number }).n);

  function get(id: string): ApiKeyRecord | null {
    const row = selectById.get(id) as ApiKeyRow | undefined;
    return row === undefined ? null : toRecord(row);
  }

  function findByHash(keyHash: string, now: number): ApiKeyRecord | null {
    const version = externalVersion();
    if (version !== cache.version) {
      forget();
      cache.version = version;
    }
    let record = cache.records.get(keyHash);
    if (record === undefined) {
      const row = selectActiveByHash.get(keyHash, now) as ApiKeyRow | undefined;
      if (row === undefined) return null;
      record = Object.freeze(toRecord(row));
      // Only valid keys get here, so guessing cannot fill it; the cap bounds a huge key table.
      if (cache.records.size >= MAX_CACHED_KEYS) forget();
      cache.records.set(keyHash, record);
    }
    return record.expiresAt !== null && record.expiresAt <= now ? null : record;
  }

  return {
    create: (input) => transaction(db, () => insertKey(input)),

    findByKey(plainKey, now) {
      const keyHash = wellFormedKeyHash(plainKey, appEnv);
      return keyHash === null ? null : findByHash(keyHash, now);
    },

    findByHash,

    get,

    list() {
      return (selectAll.all() as unknown as ApiKeyRow[]).map(toRecord);
    },

    revoke(id, now) {
      forget();
      return Number(updateRevoked.run(now, id).changes) > 0;
    },

    rotate(id, graceSeconds, now) {
      assertGraceSeconds(graceSeconds, now);
      // IMMEDIATE takes the write lock before the read, so the old key cannot be revoked or
      // rotated by another process between the check and the update.
      return transaction(db, (): RotateResult => {
        const previous = get(id);
        if (previous === null) return { outcome: 'not_found' };
        const plan = planRotation(previous, graceSeconds, now);
        if (plan.outcome !== 'rotate') return { outcome: plan.outcome, previous };
        const issued = insertKey(plan.replacement);
        updateExpires.run(plan.expiresAt, id);
        forget();
        return { outcome: 'rotated', ...issued, previous: { ...previous, expiresAt: plan.expiresAt } };
      });
    },

    setScopes(id, scopes) {
      assertScopes(scopes);
      forget();
      const row = updateScopes.get(formatScopes(scopes), id) as ApiKeyRow | undefined;
      return row === undefined ? null : toRecord(row);
    },

    createFirst(input) {
      // IMMEDIATE: two processes starting on one file cannot both see an empty table.
      return transaction(db, () => (countKeys() > 0 ? null : insertKey(input)));
    },

    count: countKeys,
  };
}
