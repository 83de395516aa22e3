/**
 * The `api_keys` table: every statement that touches it lives here.
 *
 * Times are milliseconds since the epoch in and out. Nothing is cached: `findByKey` reads the row
 * on each call, so a revocation by the command line takes effect on the server's next request
 * (contract, API keys). The lookup is one indexed read (`key_hash` is UNIQUE).
 */
import type { DatabaseSync } from 'node:sqlite';
import { dataVersion, transaction } from './database.ts';
import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import type { AppEnv } from '../../config.ts';
import type { Plan } from '../../limits/plans.ts';
import { PLANS } from '../../limits/plans.ts';
import type { RandomBytes } from '../../keys/api-keys.ts';
import { generateApiKey, hashApiKey, isWellFormedApiKey } from '../../keys/api-keys.ts';

/** An API key as the service knows it: never the key itself, nor its hash. */
export interface ApiKeyRecord {
  /** `key_` and 16 hex digits: short enough to type, shown in logs instead of the key. */
  id: string;
  label: string;
  plan: Plan;
  /** The plan's published numbers, or an enterprise key's own. */
  perMinute: number;
  perDay: number;
  createdAt: number;
  /** The key stops working at this instant (`expiresAt <= now` is expired). */
  expiresAt: number | null;
  revokedAt: number | null;
}

/** A freshly created key: the only moment the plain key exists outside the caller's hands. */
export interface IssuedKey {
  record: ApiKeyRecord;
  key: string;
}

export interface NewKey {
  plan: Plan;
  label?: string;
  /** Required for `enterprise`, refused for the other plans. */
  perMinute?: number;
  perDay?: number;
  expiresAt?: number | null;
  now: number;
}

/** Rotation either issues a new key or says why it did not. */
export type RotateResult =
  | { outcome: 'rotated'; record: ApiKeyRecord; key: string; previous: ApiKeyRecord }
  | { outcome: 'not_found' }
  | { outcome: 'revoked' | 'expired'; previous: ApiKeyRecord };

export interface KeysStore {
  create(input: NewKey): IssuedKey;
  findByKey(plainKey: string, now: number): ApiKeyRecord | null;
  get(id: string): ApiKeyRecord | null;
  list(): ApiKeyRecord[];
  revoke(id: string, now: number): boolean;
  rotate(id: string, graceSeconds: number, now: number): RotateResult;
  count(): number;
}

export interface KeysStoreOptions {
  /** Decides the prefix of new keys and which prefix `findByKey` accepts. */
  appEnv: AppEnv;
  randomBytes?: RandomBytes;
}

interface ApiKeyRow {
  id: string;
  label: string;
  plan: Plan;
  per_minute: number | null;
  per_day: number | null;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
}

const COLUMNS = 'id, label, plan, per_minute, per_day, created_at, expires_at, revoked_at';
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
 * is a return value.
 */
export function createKeysStore(db: DatabaseSync, options: KeysStoreOptions): KeysStore {
  const { appEnv } = options;
  const randomBytes = options.randomBytes ?? cryptoRandomBytes;

  const insert = db.prepare(
    `INSERT INTO api_keys (id, key_hash, label, plan, per_minute, per_day, created_at, expires_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  const selectActiveByHash = db.prepare(
    `SELECT ${COLUMNS} FROM api_keys
     WHERE key_hash = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
  );
  const selectById = db.prepare(`SELECT ${COLUMNS} FROM api_keys WHERE id = ?`);
  // rowid breaks ties in insertion order: keys made in the same millisecond keep their order.
  const selectAll = db.prepare(`SELECT ${COLUMNS} FROM api_keys ORDER BY created_at, rowid`);
  // A second revocation keeps the first time: that is when the key stopped working.
  const updateRevoked = db.prepare('UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?');
  const updateExpires = db.prepare('UPDATE api_keys SET expires_at = ? WHERE id = ?');
  const selectCount = db.prepare('SELECT count(*) AS n FROM api_keys');

  // Active keys by hash, so a request costs neither a query nor a row decode. A commit by any
  // other connection (the keys command revoking a key) changes data_version and empties it; a
  // write through any store on this connection empties it too. Expiry is checked on every hit.
  const externalVersion = dataVersion(db);
  const cache = connectionCache(db);
  const forget = () => cache.records.clear();

  function insertKey(input: NewKey): IssuedKey {
    const { plan, now } = input;
    const own = PLANS[plan] === null;
    if (own !== (input.perMinute !== undefined && input.perDay !== undefined)) {
      throw new TypeError(`per-minute and per-day numbers are required for enterprise and refused for ${plan}`);
    }
    if (own) {
      assertPositiveInteger(input.perMinute, 'perMinute');
      assertPositiveInteger(input.perDay, 'perDay');
    }
    const expiresAt = input.expiresAt ?? null;
    if (expiresAt !== null && !(Number.isSafeInteger(expiresAt) && expiresAt > now)) {
      throw new RangeError(`expiresAt must be an integer time after now, got ${expiresAt}`);
    }
    const row: ApiKeyRow = {
      id: `key_${randomBytes(8).toString('hex')}`,
      label: input.label ?? '',
      plan,
      per_minute: own ? input.perMinute! : null,
      per_day: own ? input.perDay! : null,
      created_at: now,
      expires_at: expiresAt,
      revoked_at: null,
    };
    const key = generateApiKey(appEnv, randomBytes);
    insert.run(row.id, hashApiKey(key), row.label, row.plan, row.per_minute, row.per_day, row.created_at, row.expires_at);
    forget();
    return { record: toRecord(row), key };
  }

  function get(id: string): ApiKeyRecord | null {
    const row = selectById.get(id) as ApiKeyRow | undefined;
    return row === undefined ? null : toRecord(row);
  }

  return {
    create: insertKey,

    findByKey(plainKey, now) {
      // The format check first: a mistyped key costs no hashing and no database read (a made-up
      // key with a valid checksum does get both; the per-address limit is what slows guessing).
      if (!isWellFormedApiKey(plainKey, appEnv)) return null;
      const version = externalVersion();
      if (version !== cache.version) {
        forget();
        cache.version = version;
      }
      const keyHash = hashApiKey(plainKey);
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
    },

    get,

    list() {
      return (selectAll.all() as unknown as ApiKeyRow[]).map(toRecord);
    },

    revoke(id, now) {
      forget();
      return Number(updateRevoked.run(now, id).changes) > 0;
    },

    rotate(id, graceSeconds, now) {
      if (!(Number.isSafeInteger(graceSeconds) && graceSeconds >= 0 && Number.isSafeInteger(now + graceSeconds * 1000))) {
        throw new RangeError(`graceSeconds must be a non-negative integer, got ${graceSeconds}`);
      }
      // IMMEDIATE takes the write lock before the read, so the old key cannot be revoked or
      // rotated by another process between the check and the update.
      return transaction(db, (): RotateResult => {
        const previous = get(id);
        if (previous === null) return { outcome: 'not_found' };
        if (previous.revokedAt !== null) return { outcome: 'revoked', previous };
        if (previous.expiresAt !== null && previous.expiresAt <= now) return { outcome: 'expired', previous };
        const own = PLANS[previous.plan] === null;
        // The new key keeps the old one's expiry: it belongs to the grant, not to the secret.
        const issued = insertKey({
          plan: previous.plan,
          label: previous.label,
          perMinute: own ? previous.perMinute : undefined,
          perDay: own ? previous.perDay : undefined,
          expiresAt: previous.expiresAt,
          now,
        });
        const graceEnd = now + graceSeconds * 1000;
        const expiresAt = previous.expiresAt === null ? graceEnd : Math.min(previous.expiresAt, graceEnd);
        updateExpires.run(expiresAt, id);
        forget();
        return { outcome: 'rotated', ...issued, previous: { ...previous, expiresAt } };
      });
    },

    count() {
      return Number((selectCount.get() as { n: number }).n);
    },
  };
}

/**
 * In `development` only, and only when there is no key at all, creates one `free` key so that a
 * newcomer can call the API at once; returns it for `main.ts` to print once. Otherwise null:
 * other environments never create keys.
 */
export function ensureDevelopmentKey(store: KeysStore, appEnv: AppEnv, now: number): string | null {
  if (appEnv !== 'development' || store.count() > 0) return null;
  return store.create({ plan: 'free', label: 'development', now }).key;
}

function toRecord(row: ApiKeyRow): ApiKeyRecord {
  const limits = PLANS[row.plan] ?? { perMinute: row.per_minute!, perDay: row.per_day! };
  return {
    id: row.id,
    label: row.label,
    plan: row.plan,
    perMinute: limits.perMinute,
    perDay: limits.perDay,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
  };
}

function assertPositiveInteger(value: number | undefined, name: string): void {
  if (!(Number.isSafeInteger(value) && value! >= 1)) {
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
  }
}

