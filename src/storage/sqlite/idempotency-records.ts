/**
 * The Idempotency-Key records of one operation on SQLite (createPet, placeOrder): the same key on
 * two operations names two requests, so every statement here names its operation.
 */
import type { DatabaseSync } from 'node:sqlite';
import { IDEMPOTENCY_TTL_MS, toIdempotencyRecord, type IdempotencyOperation, type IdempotencyRecord, type IdempotencyRow, type IdempotencyWrite, type StoredResponse } from '../idempotency.ts';

export interface IdempotencyRecords {
  /** The live record of an API key's key, or null. */
  recall(apiKeyId: string, key: string, now: number): IdempotencyRecord | null;
  /** Writes the record of a request just made; throws if a live one exists (which a lookup in the same transaction ruled out). */
  remember<T>(write: IdempotencyWrite<T>, response: StoredResponse): void;
}

/** Prepares the statements of `operation`'s records once. */
export function createIdempotencyRecords(db: DatabaseSync, operation: IdempotencyOperation): IdempotencyRecords {
  // An expired record that the purge has not reached yet is replaced; a live one never is (the
  // WHERE makes the upsert change nothing, which `remember` turns into a failed item).
  const upsert = db.prepare(`
    INSERT INTO idempotency_keys (api_key_id, operation, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
    VALUES (:apiKeyId, :operation, :key, :fingerprint, :status, :headers, :body, :createdAt)
    ON CONFLICT (api_key_id, operation, idempotency_key) DO UPDATE SET
      fingerprint = excluded.fingerprint, response_status = excluded.response_status,
      response_headers = excluded.response_headers, response_body = excluded.response_body,
      created_at = excluded.created_at
    WHERE idempotency_keys.created_at <= excluded.created_at - :ttl`);
  const select = db.prepare(`
    SELECT fingerprint, response_status, response_headers, response_body, created_at FROM idempotency_keys
    WHERE api_key_id = ? AND operation = ? AND idempotency_key = ? AND created_at > ?`);
  return {
    recall(apiKeyId, key, now) {
      const row = select.get(apiKeyId, operation, key, now - IDEMPOTENCY_TTL_MS) as IdempotencyRow | undefined;
      return row ? toIdempotencyRecord(row) : null;
    },
    remember(write, response) {
      const { changes } = upsert.run({
        apiKeyId: write.apiKeyId, operation, key: write.key, fingerprint: write.fingerprint,
        status: response.status, headers: JSON.stringify(response.headers), body: response.body, createdAt: write.createdAt, ttl: IDEMPOTENCY_TTL_MS,
      });
      // No live record was found in this transaction, so the upsert must write: should that ever
      // break, this item fails (rolled back alone) rather than overwrite a live record.
      if (changes !== 1) throw new Error('a live idempotency record already exists for this key');
    },
  };
}

/** Deletes up to `limit` records of every operation that have expired at `now`, oldest first. */
export function purgeExpiredRecords(db: DatabaseSync): (now: number, limit: number) => number {
  const purge = db.prepare(`
    DELETE FROM idempotency_keys WHERE id IN (
      SELECT id FROM idempotency_keys WHERE created_at <= ? ORDER BY created_at LIMIT ?)`);
  return (now, limit) => Number(purge.run(now - IDEMPOTENCY_TTL_MS, limit).changes);
}
