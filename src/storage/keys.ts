/**
 * API keys as every storage engine stores them: the records, the store's interface, and the
 * rules that do not depend on the engine (what a new key may be, how a rotation ends the old
 * one), so that SQLite and PostgreSQL cannot drift apart.
 */
import type { AppEnv } from '../config.ts';
import type { Plan } from '../limits/plans.ts';
import { PLANS } from '../limits/plans.ts';
import type { RandomBytes } from '../keys/api-keys.ts';
import { generateApiKey, hashApiKey } from '../keys/api-keys.ts';
import { formatScopes, isScope, parseStoredScopes, SCOPES, type Scope } from '../keys/scopes.ts';

import type { MaybePromise } from '../lib/maybe-promise.ts';

const { randomBytes: cryptoRandomBytes } = process.getBuiltinModule('node:crypto');

/** An API key as the service knows it: never the key itself, nor its hash. */
export interface ApiKeyRecord {
  /** `key_` and 16 hex digits: short enough to type, shown in logs instead of the key. */
  id: string;
  /** The account the key belongs to: `acct_` and 16 hex digits. Orders belong to accounts. */
  account: string;
  /** What the key may do, in the order of SCOPES. */
  scopes: Scope[];
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
  /** An existing account; absent: a new account of its own. */
  account?: string;
  /**
   * Absent: every scope, for the keys of tests. Every path of the service names them: the keys
   * command refuses a key without `--scopes`, and the development key is given all of them.
   */
  scopes?: readonly Scope[];
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

/** `create` was told an account that no key has ever had. */
export class UnknownAccountError extends Error {
  readonly account: string;

  constructor(account: string) {
    super(`no account ${JSON.stringify(account)}`);
    this.name = 'UnknownAccountError';
    this.account = account;
  }
}

/**
 * The key store of either engine. Programmer errors throw; "no such key" is a return value. An
 * unknown `account` given to `create` throws UnknownAccountError (the keys command's exit 1).
 */
export interface KeysStore {
  create(input: NewKey): MaybePromise<IssuedKey>;
  /** The key a plain key belongs to when it is valid at `now`, else null. */
  findByKey(plainKey: string, now: number): MaybePromise<ApiKeyRecord | null>;
  /** The same, from `hashApiKey` of a well-formed key (the request path hashes once per connection). */
  findByHash(keyHash: string, now: number): MaybePromise<ApiKeyRecord | null>;
  get(id: string): MaybePromise<ApiKeyRecord | null>;
  /** Every key, oldest first. */
  list(): MaybePromise<ApiKeyRecord[]>;
  revoke(id: string, now: number): MaybePromise<boolean>;
  rotate(id: string, graceSeconds: number, now: number): MaybePromise<RotateResult>;
  /**
   * Replaces the key's scopes (a non-empty list; a programmer error otherwise). Returns the key as
   * it now is, or null when no key has that id. Every request that starts after it returned,
   * on any connection, instance or worker, is answered with the new scopes.
   */
  setScopes(id: string, scopes: readonly Scope[]): MaybePromise<ApiKeyRecord | null>;
  /** Creates the key only when the store holds no key at all, atomically; else null. */
  createFirst(input: NewKey): MaybePromise<IssuedKey | null>;
}

export interface KeysStoreOptions {
  /** Decides the prefix of new keys and which prefix `findByKey` accepts. */
  appEnv: AppEnv;
  randomBytes?: RandomBytes;
}

/**
 * A key's row, as both engines store it (times in ms since the epoch). PostgreSQL's driver
 * hands bigints over as text; `toRecord` turns either into numbers.
 */
export interface ApiKeyRow {
  id: string;
  account: string;
  /** Space-separated, in the order of SCOPES. */
  scopes: string;
  label: string;
  plan: Plan;
  per_minute: number | string | null;
  per_day: number | string | null;
  created_at: number | string;
  expires_at: number | string | null;
  revoked_at: number | string | null;
}

/** Every column of a key's row, as both engines select it. */
export const KEY_COLUMNS = 'id, account, scopes, label, plan, per_minute, per_day, created_at, expires_at, revoked_at';

/** A validated new key: its row, the plain key to show once, and the hash to store. */
export interface PreparedKey {
  row: ApiKeyRow;
  key: string;
  keyHash: string;
  /** The row's account is made now, for this key (else it must exist already). */
  newAccount: boolean;
}

/** Checks a new key's input (throwing on programmer errors) and generates its id and secret. */
export function prepareKey(input: NewKey, { appEnv, randomBytes = cryptoRandomBytes }: KeysStoreOptions): PreparedKey {
  const { plan, now } = input;
  const own = PLANS[plan] === null;
  if (own !== (input.perMinute !== undefined && input.perDay !== undefined)) {
    throw new TypeError(`per-minute and per-day numbers are required for enterprise and refused for ${plan}`);
  }
  if (own) {
    assertPositiveInteger(input.perMinute, 'perMinute');
    assertPositiveInteger(input.perDay, 'perDay');
  }
  const scopes = input.scopes ?? SCOPES;
  assertScopes(scopes);
  const expiresAt = input.expiresAt ?? null;
  if (expiresAt !== null && !(Number.isSafeInteger(expiresAt) && expiresAt > now)) {
    throw new RangeError(`expiresAt must be an integer time after now, got ${expiresAt}`);
  }
  const row: ApiKeyRow = {
    id: `key_${randomBytes(8).toString('hex')}`,
    account: input.account ?? `acct_${randomBytes(8).toString('hex')}`,
    scopes: formatScopes(scopes),
    label: input.label ?? '',
    plan,
    per_minute: own ? input.perMinute! : null,
    per_day: own ? input.perDay! : null,
    created_at: now,
    expires_at: expiresAt,
    revoked_at: null,
  };
  const key = generateApiKey(appEnv, randomBytes);
  return { row, key, keyHash: hashApiKey(key), newAccount: input.account === undefined };
}

/** Throws unless `scopes` is a non-empty list of scopes: a key that may do nothing is a mistake. */
export function assertScopes(scopes: readonly Scope[]): void {
  if (scopes.length === 0) throw new RangeError('a key needs at least one scope');
  const unknown = scopes.find((scope) => !isScope(scope));
  if (unknown !== undefined) throw new RangeError(`not a scope: ${JSON.stringify(unknown)}`);
}

/** Throws unless the grace period keeps `now + grace` an exact integer time. */
export function assertGraceSeconds(graceSeconds: number, now: number): void {
  if (!(Number.isSafeInteger(graceSeconds) && graceSeconds >= 0 && Number.isSafeInteger(now + graceSeconds * 1000))) {
    throw new RangeError(`graceSeconds must be a non-negative integer, got ${graceSeconds}`);
  }
}

/**
 * What rotating `previous` at `now` does: refuse (revoked, expired), or the new key's input and
 * the old key's new expiry (the end of the grace period, or its own earlier expiry).
 */
export function planRotation(previous: ApiKeyRecord, graceSeconds: number, now: number):
  | { outcome: 'revoked' | 'expired' }
  | { outcome: 'rotate'; replacement: NewKey; expiresAt: number } {
  if (previous.revokedAt !== null) return { outcome: 'revoked' };
  if (previous.expiresAt !== null && previous.expiresAt <= now) return { outcome: 'expired' };
  const own = PLANS[previous.plan] === null;
  const graceEnd = now + graceSeconds * 1000;
  return {
    outcome: 'rotate',
    // The new key keeps the old one's expiry: it belongs to the grant, not to the secret.
    replacement: {
      plan: previous.plan,
      account: previous.account,
      scopes: previous.scopes,
      label: previous.label,
      perMinute: own ? previous.perMinute : undefined,
      perDay: own ? previous.perDay : undefined,
      expiresAt: previous.expiresAt,
      now,
    },
    expiresAt: previous.expiresAt === null ? graceEnd : Math.min(previous.expiresAt, graceEnd),
  };
}

/** The record of a row: a plan's published numbers, or an enterprise key's own. */
export function toRecord(row: ApiKeyRow): ApiKeyRecord {
  const limits = PLANS[row.plan] ?? { perMinute: Number(row.per_minute), perDay: Number(row.per_day) };
  return {
    id: row.id,
    account: row.account,
    scopes: parseStoredScopes(row.scopes),
    label: row.label,
    plan: row.plan,
    perMinute: limits.perMinute,
    perDay: limits.perDay,
    createdAt: Number(row.created_at),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
    revokedAt: row.revoked_at === null ? null : Number(row.revoked_at),
  };
}

/**
 * In `development` only, and only when there is no key at all, creates one `free` key so that a
 * newcomer can call the API at once; returns it for `main.ts` to print once. Otherwise null:
 * other environments never create keys. Instances that start together create one key in all.
 */
export async function ensureDevelopmentKey(store: KeysStore, appEnv: AppEnv, now: number): Promise<string | null> {
  if (appEnv !== 'development') return null;
  // Every scope: the newcomer's key must be able to try every operation.
  const issued = await store.createFirst({ plan: 'free', scopes: SCOPES, label: 'development', now });
  return issued?.key ?? null;
}

function assertPositiveInteger(value: number | undefined, name: string): void {
  if (!(Number.isSafeInteger(value) && value! >= 1)) {
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
  }
}
