/**
 * The Idempotency-Key records of one creation at a time (placeOrder's, createWebhook's) on
 * PostgreSQL, each operation in a table of its own: the key is claimed with a transaction-level
 * advisory lock named after the operation (held by a request still being processed on another
 * instance: `in_flight`), its live record looked up, and, once the creation is made, its record
 * (what it made, in its stored form: made-forms.ts) written in the same transaction. createPet's, made by the batch, are pet-creations.ts's.
 */
import { IDEMPOTENCY_TTL_MS, madeColumns, toIdempotencyRecord, type IdempotencyConflict, type IdempotencyOperation, type IdempotencyRecord, type IdempotencyRow, type IdempotencyWrite } from '../idempotency.ts';
import { MADE_FORMS, type Made } from '../made-forms.ts';
import { parseStored, storedJson } from '../stored-forms.ts';
import type { PostgresSql } from './driver.ts';

/** Each operation's table of records (migrations 1, 4 and 8). */
export const RECORD_TABLES: Readonly<Record<IdempotencyOperation, string>> = {
  createPet: 'idempotency_keys', placeOrder: 'order_idempotency_keys', createWebhook: 'webhook_idempotency_keys',
};

/** Claims `operation`'s key for the rest of `tx` and looks up its live record: the conflict it meets, or null when it may be made. */
export async function claimKey<Op extends IdempotencyOperation>(tx: PostgresSql, operation: Op, apiKeyId: string, key: string, now: number): Promise<IdempotencyConflict<Made[Op]> | null> {
  const [lock] = await tx.unsafe<{ got: boolean }[]>('SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS got', [`${operation} ${apiKeyId} ${key}`], { prepare: true });
  if (!lock!.got) return { conflict: 'in_flight' };
  const record = await findRecord(tx, operation, apiKeyId, key, now);
  return record === null ? null : { conflict: 'recorded', record };
}

/** The live record at `now` of `operation`'s key, read in `sql` (a transaction, or the pool), or null. */
export async function findRecord<Op extends IdempotencyOperation>(sql: PostgresSql, operation: Op, apiKeyId: string, key: string, now: number): Promise<IdempotencyRecord<Made[Op]> | null> {
  const rows = await sql.unsafe<IdempotencyRow[]>(
    `SELECT * FROM ${RECORD_TABLES[operation]} WHERE api_key_id = $1 AND idempotency_key = $2 AND created_at > $3::bigint`,
    [apiKeyId, key, now - IDEMPOTENCY_TTL_MS],
    { prepare: true },
  );
  return rows.length === 0 ? null : recordOfRow(operation, rows[0]!);
}

/** A record's row read back, what it made parsed from its stored form. */
export function recordOfRow<Op extends IdempotencyOperation>(operation: Op, row: IdempotencyRow) {
  return toIdempotencyRecord(row, parseStored(MADE_FORMS[operation]));
}

/** Writes the record of a creation that just made `made` in `tx`; an expired record not purged yet is replaced, a live one never. */
export async function rememberRecord<Op extends IdempotencyOperation>(tx: PostgresSql, operation: Op, write: IdempotencyWrite, made: Made[Op]): Promise<void> {
  const { status, headers, body } = madeColumns(storedJson(MADE_FORMS[operation], made));
  await tx.unsafe(
    `INSERT INTO ${RECORD_TABLES[operation]} AS k (api_key_id, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7::bigint)
     ON CONFLICT (api_key_id, idempotency_key) DO UPDATE SET
       fingerprint = excluded.fingerprint, response_status = excluded.response_status,
       response_headers = excluded.response_headers, response_body = excluded.response_body, created_at = excluded.created_at
     WHERE k.created_at <= excluded.created_at - ${IDEMPOTENCY_TTL_MS}`,
    [write.apiKeyId, write.key, write.fingerprint, status, headers, body, write.createdAt],
    { prepare: true },
  );
}
