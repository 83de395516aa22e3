/**
 * The opaque `cursor` of `GET /v1/pets`: only a position (the last id of the previous page),
 * so it combines with any `limit` and `status`. Opaque to clients, not secret.
 */
import { ApiError } from '../http/api-error.ts';
import { INT64_MAX } from './schemas.ts';

const DECODED = /^after:(0|[1-9][0-9]{0,18})$/;

/** Encodes "the page after `id`". */
export function encodeCursor(afterId: number | bigint): string {
  return Buffer.from(`after:${afterId}`).toString('base64url');
}

/** Decodes a cursor made by encodeCursor; anything else is `400 invalid_query`. */
export function decodeCursor(cursor: string): bigint {
  const text = Buffer.from(cursor, 'base64url').toString('latin1');
  const match = DECODED.exec(text);
  // Re-encoding must give the input back: base64 decoders skip junk that would otherwise pass.
  if (match) {
    const id = BigInt(match[1]!);
    if (id <= INT64_MAX && encodeCursor(id) === cursor) return id;
  }
  throw new ApiError('invalid_query', 'Invalid query: cursor is not a cursor this service issued.');
}
