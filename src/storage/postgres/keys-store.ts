/**
 * API keys in PostgreSQL, shared by every instance and by the keys command.
 *
 * Nothing is cached: each request's key is read from the table by a statement that starts after
 * the request arrived, so a revocation, a rotation or a change of scopes committed before is seen
 * by the next request on every instance. The lookups of one event-loop turn go as one statement (`key_hash = ANY`).
 */
import { wellFormedKeyHash } from '../../keys/api-keys.ts';
import { formatScopes } from '../../keys/scopes.ts';
import { createGroupCommit } from '../../lib/group-commit.ts';
import {
  assertGraceSeconds, assertScopes, KEY_COLUMNS, planRotation, prepareKey, toRecord, UnknownAccountError,
  type ApiKeyRecord, type ApiKeyRow, type IssuedKey, type KeysStore, type KeysStoreOptions, type NewKey,
} from '../keys.ts';
import { guard, guardRead } from './database.ts';
import type { PostgresSql } from './driver.ts';

/** Serialises writers that must see "no key yet" atomically (the first development key). */
const FIRST_KEY_LOCK = '7370646576';

type Sql = PostgresSql;

/** The keys of a batch of lookups ($1: the hashes of their tokens). */
export const KEYS_BY_HASH = `SELECT key_hash, ${KEY_COLUMNS} FROM api_keys WHERE key_hash = ANY($1::text[])`;

/**
 * The key store over a migrated PostgreSQL database. One closure, longer than a screen, because
 * the pool and the batched lookups are shared by every method; each method is short.
 */
export function createKeysStore(sql: PostgresSql, options: KeysStoreOptions): KeysStore {
  const { appEnv } = options;

  /** Inserts the key (and its new account), inside the caller's transaction. */
  async function insertKey(tx: Sql, input: NewKey): Promise<IssuedKey> {
    const { row, key, keyHash, newAccount } = prepareKey(input, options);
    if (newAccount) await tx`INSERT INTO accounts (id, created_at) VALUES (${row.account}, ${row.created_at})`;
    try {
      await tx`
        INSERT INTO api_keys (id, key_hash, account, scopes, label, plan, per_minute, per_day, created_at, expires_at)
        VALUES (${row.id}, ${keyHash}, ${row.account}, ${row.scopes}, ${row.label}, ${row.plan}, ${row.per_minute}, ${row.per_day}, ${row.created_at}, ${row.expires_at})`;
    } catch (error) {
      // foreign_key_violation: the account named is not one of the accounts table.
      if ((error as { code?: unknown }).code === '23503') throw new UnknownAccountError(row.account);
      throw error;
    }
    return { record: toRecord(row), key };
  }

  async function get(tx: Sql, id: string, lock = false): Promise<ApiKeyRecord | null> {
    const rows = await tx.unsafe<ApiKeyRow[]>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1${lock ? ' FOR UPDATE' : ''}`, [id], { prepare: true });
    return rows.length === 0 ? null : toRecord(rows[0]!);
  }

  const lookups = createGroupCommit<string, ApiKeyRecord | null>({
    async commit(hashes) {
      const rows = await guardRead(() =>
        sql.unsafe<(ApiKeyRow & { key_hash: string })[]>(KEYS_BY_HASH, [hashes as string[]], { prepare: true }),
      );
      const byHash = new Map(rows.map((row) => [row.key_hash, toRecord(row)]));
      return hashes.map((hash) => byHash.get(hash) ?? null);
    },
    maxInFlight: 2,
  });

  async function findByHash(keyHash: string, now: number): Promise<ApiKeyRecord | null> {
    const record = await lookups.submit(keyHash);
    if (record === null || record.revokedAt !== null || (record.expiresAt !== null && record.expiresAt <= now)) return null;
    return record;
  }

  return {
    create: (input) => guard(() => sql.begin((tx) => insertKey(tx as unknown as Sql, input))),

    findByKey(plainKey, now) {
      const keyHash = wellFormedKeyHash(plainKey, appEnv);
      return keyHash === null ? Promise.resolve(null) : findByHash(keyHash, now);
    },

    findByHash,

    get: (id) => guard(() => get(sql, id)),

    async list() {
      const rows = await guard(() => sql.unsafe<ApiKeyRow[]>(`SELECT ${KEY_COLUMNS} FROM api_keys ORDER BY created_at, seq`));
      return rows.map(toRecord);
    },

    async revoke(id, now) {
      // A second revocation keeps the first time: that is when the key stopped working.
      const result = await guard(() => sql`UPDATE api_keys SET revoked_at = coalesce(revoked_at, ${now}) WHERE id = ${id}`);
      return result.count > 0;
    },

    async rotate(id, graceSeconds, now) {
      assertGraceSeconds(graceSeconds, now);
      // FOR UPDATE holds the old key's row, so another command cannot revoke or rotate it
      // between the check and the update.
      return guard(() =>
        sql.begin(async (tx) => {
          const previous = await get(tx as unknown as Sql, id, true);
          if (previous === null) return { outcome: 'not_found' as const };
          const plan = planRotation(previous, graceSeconds, now);
          if (plan.outcome !== 'rotate') return { outcome: plan.outcome, previous };
          const issued = await insertKey(tx as unknown as Sql, plan.replacement);
          await tx`UPDATE api_keys SET expires_at = ${plan.expiresAt} WHERE id = ${id}`;
          return { outcome: 'rotated' as const, ...issued, previous: { ...previous, expiresAt: plan.expiresAt } };
        }),
      );
    },

    async setScopes(id, scopes) {
      assertScopes(scopes);
      const rows = await guard(() =>
        sql.unsafe<ApiKeyRow[]>(`UPDATE api_keys SET scopes = $1 WHERE id = $2 RETURNING ${KEY_COLUMNS}`, [formatScopes(scopes), id]));
      return rows.length === 0 ? null : toRecord(rows[0]!);
    },

    createFirst(input) {
      return guard(() =>
        sql.begin(async (tx) => {
          await tx`SELECT pg_advisory_xact_lock(${FIRST_KEY_LOCK}::bigint)`;
          const [row] = await tx<{ any: boolean }[]>`SELECT EXISTS (SELECT 1 FROM api_keys) AS any`;
          return row!.any ? null : insertKey(tx as unknown as Sql, input);
        }),
      );
    },
  };
}
