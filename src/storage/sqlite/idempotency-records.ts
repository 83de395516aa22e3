/**
 * The Idempotency-Key records of one operation on SQLite: the same key on createPet and on
 * placeOrder names two requests, so each operation keeps its records in a table of its own
 * (createPet's is the table of the previous versions, unchanged).
 */
import type { DatabaseSync } from 'node:sqlite';
import { IDEMPOTENCY_TTL_MS, madeColumns, toIdempotencyRecord, type IdempotencyOperation, type IdempotencyRecord, type IdempotencyRow, type IdempotencyWrite } from '../idempotency.ts';
import { MADE_FORMS, type Made } from '../made-forms.ts';
import { parseStored, storedJson } from '../stored-forms.ts';

export interface IdempotencyRecords<T> {
  /** The live record of an API key's key, or null. */
  recall(apiKeyId: string, key: string, now: number): IdempotencyRecord<T> | null;
  /** Writes the record of a request that just made `made`; throws if a live one exists (which a lookup in the same transaction ruled out). */
  remember(write: IdempotencyWrite, made: T): void;
}

/** Each operation's table of records. */
export const RECORD_TABLES: Readonly<Record<IdempotencyOperation, string>> = {
  createPet: 'idempotency_keys', placeOrder: 'order_idempotency_keys', createWebhook: 'webhook_idempotency_keys',
};

/** Prepares the statements of `operation`'s records once. */
export function createIdempotencyRecords<Op extends IdempotencyOperation>(db: DatabaseSync, operation: Op): IdempotencyRecords<Made[Op]> {
  const table = RECORD_TABLES[operation];
  const form = MADE_FORMS[operation];
  const parse = parseStored(form);
  // An expired record that the purge has not reached yet is replaced; a live one never is (the
  // WHERE makes the upsert change nothing, which `remember` turns into a failed item).
  const upsert = db.prepare(`
    INSERT INTO ${table} (api_key_id, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
    VALUES (:apiKeyId, :key, :fingerprint, :status, :headers, :body, :createdAt)
    ON CONFLICT (api_key_id, idempotency_key) DO UPDATE SET
      fingerprint = excluded.fingerprint, response_status = excluded.response_status,
      response_headers = excluded.response_headers, response_body = excluded.response_body,
      created_at = excluded.created_at
    WHERE ${table}.created_at <= excluded.created_at - :ttl`);
  const select = db.prepare(`
    SELECT fingerprint, response_status, response_headers, response_body, created_at FROM ${table}
    WHERE api_key_id = ? AND idempotency_key = ? AND created_at > ?`);
  return {
    recall(apiKeyId, key, now) {
      const row = select.get(apiKeyId, key, now - IDEMPOTENCY_TTL_MS) as IdempotencyRow | undefined;
      return row ? toIdempotencyRecord(row, parse) : null;
    },
    remember(write, made) {
      const { changes } = upsert.run({
        apiKeyId: write.apiKeyId, key: write.key, fingerprint: write.fingerprint,
        ...madeColumns(storedJson(form, made)), createdAt: write.createdAt, ttl: IDEMPOTENCY_TTL_MS,
      });
      // No live record was found in this transaction, so the upsert must write: should that ever
      // break, this item fails (rolled back alone) rather than overwrite a live record.
      if (changes !== 1) throw new Error('a live idempotency record already exists for this key');
    },
  };
}

/** Deletes up to `limit` records of every operation that have expired at `now`, oldest first. */
export function purgeExpiredRecords(db: DatabaseSync): (now: number, limit: number) => number {
  const purges = Object.values(RECORD_TABLES).map((table) => db.prepare(`
    DELETE FROM ${table} WHERE id IN (
      SELECT id FROM ${table} WHERE created_at <= ? ORDER BY created_at LIMIT ?)`));
  return (now, limit) => {
    let purged = 0;
    for (const purge of purges) if (purged < limit) purged += Number(purge.run(now - IDEMPOTENCY_TTL_MS, limit - purged).changes);
    return purged;
  };
}
