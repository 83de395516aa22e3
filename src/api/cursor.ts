/**
 * The opaque `cursor` of the lists (`GET /v1/pets`, `GET /v1/store/orders`): only a position (the
 * last id of the previous page), so it combines with any `limit` and `status`. Opaque to clients,
 * not secret. Also the `Link` to the next page that carries it, and the one every list's next page
 * is built with (the event feed's too).
 */
import { apiError } from './errors.ts';
import { BASE_PATH, type OperationSpec } from './operation.ts';
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
  throw apiError('invalid_query', 'cursor is not a cursor this service issued');
}

/**
 * The RFC 8288 `Link` to the page after `afterId` of a list operation, on its own path, with the
 * effective `limit` and the `status` filter, as the document's `NextLink` header describes it.
 */
function nextPageLink(operation: Pick<OperationSpec, 'path'>, { limit, status, afterId }: { limit: number; status: string | undefined; afterId: number | bigint }): string {
  return nextLink(operation, { limit, status: status || undefined, cursor: encodeCursor(afterId) });
}

/**
 * The headers of a list's page that was read with one row more than `limit` (which tells whether
 * a next page exists without a COUNT): the page is cut to `limit`, and when that extra row was
 * there, the `Link` to the page after its last row.
 */
export function cutPage(operation: Pick<OperationSpec, 'path'>, page: { id: number | bigint }[], { limit, status }: { limit: number; status: string | undefined }): Record<string, string> {
  if (page.length <= limit) return {};
  page.length = limit;
  return { Link: nextPageLink(operation, { limit, status, afterId: page[limit - 1]!.id }) };
}

/**
 * The RFC 8288 `Link` to the next page of `operation`, on its own path under BASE_PATH, with the
 * query parameters given, in their order, those undefined left out. The values are the
 * operation's own validated ones (digits, names of a schema's enum, a cursor in base64url), so
 * none needs escaping.
 */
export function nextLink(operation: Pick<OperationSpec, 'path'>, query: Record<string, string | number | bigint | undefined>): string {
  const pairs = Object.entries(query).flatMap(([name, value]) => (value === undefined ? [] : [`${name}=${value}`]));
  return `<${BASE_PATH}${operation.path}?${pairs.join('&')}>; rel="next"`;
}
