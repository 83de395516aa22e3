/**
 * Idempotency-Key records as every storage engine keeps them: what a create remembers, in the
 * same transaction as what it created, so that a retry is answered with the first response
 * instead of creating again. How long a record lives is a storage rule, shared by both engines.
 */
/** The operations whose requests may carry an Idempotency-Key; each has keys of its own. */
export type IdempotencyOperation = 'createPet' | 'placeOrder' | 'createWebhook';

/** A key is remembered for 24 h after the response it produced was stored. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** A response as it is remembered under an Idempotency-Key and replayed. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What a creation remembers under its Idempotency-Key, written in the same transaction as what it created. */
export interface IdempotencyWrite<T> {
  apiKeyId: string;
  key: string;
  fingerprint: string;
  /** The record expires IDEMPOTENCY_TTL_MS after this instant (ms). */
  createdAt: number;
  /** The response to remember, built once what was created has its id. */
  respond(created: T): StoredResponse;
}

/** A remembered response and the fingerprint of the request body that produced it. */
export interface IdempotencyRecord {
  fingerprint: string;
  createdAt: number;
  response: StoredResponse;
}

/**
 * A creation that the store did not make because its Idempotency-Key was taken meanwhile: by a
 * request still being processed on another instance (`in_flight`), or by one that has finished
 * (`recorded`), which may be an earlier creation of the same batch, committed with it. Outside
 * one batch, only a database written by several processes or threads meets these (PostgreSQL
 * instances, SQLite with WORKERS); SQLite reports only `recorded`, since its writers take turns.
 */
export type IdempotencyConflict =
  | { conflict: 'in_flight' }
  | { conflict: 'recorded'; record: IdempotencyRecord };

/** A record's row, as both engines select it. */
export interface IdempotencyRow {
  fingerprint: string;
  response_status: number;
  response_headers: string;
  response_body: string;
  created_at: number | string;
}

/** The domain value of a record's row. */
export function toIdempotencyRecord(row: IdempotencyRow): IdempotencyRecord {
  return {
    fingerprint: row.fingerprint,
    createdAt: Number(row.created_at),
    response: { status: row.response_status, headers: JSON.parse(row.response_headers) as Record<string, string>, body: row.response_body },
  };
}
