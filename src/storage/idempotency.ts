/**
 * Idempotency-Key records as every storage engine keeps them: what a create made, remembered in
 * the same transaction as the creation, so that a retry is answered again instead of creating
 * again. How long a record lives is a storage rule, shared by both engines.
 *
 * A record keeps what the request made (the created pet, the placed order), never an HTTP answer:
 * the API builds the replay from it with the function that built the first answer, so the two are
 * the same bytes. Records written by earlier versions kept the answer itself, and still replay it.
 */
/** The operations whose requests may carry an Idempotency-Key; each has keys of its own. */
export type IdempotencyOperation = 'createPet' | 'placeOrder' | 'createWebhook';

/** A key is remembered for 24 h after the creation it made was stored. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** A response as records written by earlier versions kept it, and replay it. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The record a creation writes, in the same transaction as what it created (which the record then keeps). */
export interface IdempotencyWrite {
  apiKeyId: string;
  key: string;
  fingerprint: string;
  /** The record expires IDEMPOTENCY_TTL_MS after this instant (ms). */
  createdAt: number;
}

/**
 * A remembered creation and the fingerprint of the request body that made it: what it made
 * (`made`), or, in a record written by an earlier version, the response that was sent (`response`).
 */
export type IdempotencyRecord<T> = { fingerprint: string; createdAt: number } & ({ made: T } | { response: StoredResponse });

/**
 * A creation that the store did not make because its Idempotency-Key was taken meanwhile: by a
 * request still being processed on another instance (`in_flight`), or by one that has finished
 * (`recorded`), which may be an earlier creation of the same batch, committed with it. Outside
 * one batch, only a database written by several processes or threads meets these (PostgreSQL
 * instances, SQLite with WORKERS); SQLite reports only `recorded`, since its writers take turns.
 */
export type IdempotencyConflict<T> =
  | { conflict: 'in_flight' }
  | { conflict: 'recorded'; record: IdempotencyRecord<T> };

/**
 * The `response_status` of a record that keeps what its creation made: then `response_body` is
 * that value in its stored form (JSON, storage/stored-forms.ts) and `response_headers` is `{}`.
 * No response has this status, so a record written by an earlier version (a 201, its headers and
 * its body) is told apart, and replayed as it was kept: the columns kept their names and no
 * migration was needed.
 */
export const MADE = 0;

/** A record's row, as both engines select it. */
export interface IdempotencyRow {
  fingerprint: string;
  response_status: number;
  response_headers: string;
  response_body: string;
  created_at: number | string;
}

/** The `response_*` columns of a record that keeps `made`, given as its stored form. */
export function madeColumns(made: string): { status: number; headers: string; body: string } {
  return { status: MADE, headers: '{}', body: made };
}

/** The domain value of a record's row; `parse` reads the stored form of what its operation makes. */
export function toIdempotencyRecord<T>(row: IdempotencyRow, parse: (stored: string) => T): IdempotencyRecord<T> {
  const kept = { fingerprint: row.fingerprint, createdAt: Number(row.created_at) };
  if (row.response_status === MADE) return { ...kept, made: parse(row.response_body) };
  return { ...kept, response: { status: row.response_status, headers: JSON.parse(row.response_headers) as Record<string, string>, body: row.response_body } };
}
