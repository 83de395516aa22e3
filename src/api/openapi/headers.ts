/**
 * The response headers of the API, each described once (the document's `components.headers`),
 * and how a response lists the ones it carries.
 */
import { MAX_ORIGIN_LENGTH } from '../../config.ts';
import { COMMON_HEADERS } from '../../http/reply.ts';
import { insufficientScopeChallenge, INVALID_TOKEN_CHALLENGE, UNAUTHENTICATED_CHALLENGE } from '../../http/bearer.ts';
import { SCOPES } from '../../keys/scopes.ts';
import { EXPOSED_HEADERS } from '../../http/cors.ts';
import { CLIENT_REQUEST_ID } from '../../http/request-id.ts';
import { DEPRECATION_HEADERS } from '../operations.ts';
import { ref, type JsonObject } from './json-schema.ts';

/** An integer header; every one fits the bounds of its format. */
const integerHeader = (description: string, format: 'int32' | 'int64', minimum: number, maximum: number) => ({
  description,
  required: true,
  schema: { type: 'integer', format, minimum, maximum },
});

/**
 * A key's numbers are positive safe integers (the keys command refuses larger ones, the limiter
 * throws on them), and so is every count of tokens.
 */
const MAX_TOKENS = Number.MAX_SAFE_INTEGER;
/** Retry-After is at most a day: a ban lasts at most 24 h, and one token of any bucket refills within its window. */
const MAX_RETRY_AFTER_SECONDS = 86_400;
/** Reset is a Unix time in seconds; 9999-12-31T23:59:59Z bounds any clock this service will run on. */
const MAX_UNIX_SECONDS = 253_402_300_799;
/** A rate-limit header of both buckets: two 16-digit counts and two short times, about 70 characters. */
const MAX_RATE_HEADER_LENGTH = 128;

/** Response headers, each described once; responses refer to them. */
export const HEADERS = {
  'X-Request-Id': {
    description: "The client's X-Request-Id when it is 1 to 128 of `A-Z a-z 0-9 . _ : -`, else a generated one. On every response.",
    required: true,
    schema: { type: 'string', maxLength: 128, pattern: CLIENT_REQUEST_ID.source },
  },
  'Cache-Control': { description: 'On every response.', required: true, schema: { type: 'string', enum: [COMMON_HEADERS['Cache-Control']] } },
  'X-Content-Type-Options': {
    description: 'On every response.',
    required: true,
    schema: { type: 'string', enum: [COMMON_HEADERS['X-Content-Type-Options']] },
  },
  'X-RateLimit-Limit': integerHeader('Capacity of the binding bucket (the one with the fewest tokens left; the minute bucket on a tie).', 'int64', 1, MAX_TOKENS),
  'X-RateLimit-Remaining': integerHeader('Whole tokens left in the binding bucket after this request.', 'int64', 0, MAX_TOKENS),
  'X-RateLimit-Reset': integerHeader('Unix time in seconds (rounded up) at which the binding bucket is full again.', 'int64', 0, MAX_UNIX_SECONDS),
  'RateLimit-Policy': {
    description: 'Both buckets (draft-ietf-httpapi-ratelimit-headers): quota `q` per window `w` seconds.',
    required: true,
    schema: { type: 'string', maxLength: MAX_RATE_HEADER_LENGTH, pattern: '^"minute";q=[0-9]+;w=60, "day";q=[0-9]+;w=86400$' },
  },
  RateLimit: {
    description: 'Both buckets (draft-ietf-httpapi-ratelimit-headers): `r` tokens left, `t` seconds until the bucket is full.',
    required: true,
    schema: { type: 'string', maxLength: MAX_RATE_HEADER_LENGTH, pattern: '^"minute";r=[0-9]+;t=[0-9]+, "day";r=[0-9]+;t=[0-9]+$' },
  },
  'Retry-After': integerHeader('Whole seconds (at least 1) until a request would be accepted.', 'int32', 1, MAX_RETRY_AFTER_SECONDS),
  'WWW-Authenticate': {
    description: 'The Bearer challenge; `error="invalid_token"` when a key was sent but is not valid.',
    required: true,
    schema: { type: 'string', enum: [UNAUTHENTICATED_CHALLENGE, INVALID_TOKEN_CHALLENGE] },
  },
  ScopeChallenge: {
    description: 'The Bearer challenge of a key without the scope the operation needs: `error="insufficient_scope"` and the least scope that would allow the request (RFC 6750, section 3.1).',
    required: true,
    schema: { type: 'string', enum: SCOPES.map(insufficientScopeChallenge) },
  },
  Allow: {
    description: 'The methods of this path (`GET, HEAD, PATCH, DELETE` on a pet); HEAD wherever GET.',
    required: true,
    schema: { type: 'string', maxLength: 64, pattern: '^[A-Z]+(, [A-Z]+)*$' },
  },
  NextLink: {
    description: 'RFC 8288 `Link` to the next page, carrying the effective `limit`, the `status` filter and a `cursor`. Absent on the last page.',
    required: false,
    schema: { type: 'string', maxLength: 256, pattern: '^</v1/pets\\?[^>]*cursor=[A-Za-z0-9_-]+[^>]*>; rel="next"$' },
  },
  OrdersNextLink: {
    description: 'RFC 8288 `Link` to the next page of orders, carrying the effective `limit`, the `status` filter and a `cursor`. Absent on the last page.',
    required: false,
    schema: { type: 'string', maxLength: 256, pattern: '^</v1/store/orders\\?[^>]*cursor=[A-Za-z0-9_-]+[^>]*>; rel="next"$' },
  },
  ETag: {
    description:
      "The resource's entity tag (a pet's or an order's): a strong validator (RFC 9110, section 8.8.3), opaque, that changes with every change to it. " +
      'Send it in `If-Match` to change it (or delete a pet) only if nobody changed it since.',
    required: true,
    schema: { type: 'string', pattern: '^"[!#-~]*"$', maxLength: 64 },
  },
  Location: {
    description: 'The created pet.',
    required: true,
    // `/v1/pets/` and at most 19 digits.
    schema: { type: 'string', maxLength: 28, pattern: '^/v1/pets/[1-9][0-9]*$' },
  },
  OrderLocation: {
    description: 'The placed order.',
    required: true,
    // `/v1/store/orders/` and at most 19 digits.
    schema: { type: 'string', maxLength: 37, pattern: '^/v1/store/orders/[1-9][0-9]*$' },
  },
  'Idempotent-Replayed': {
    description: 'Present when this is the stored first response to the same `Idempotency-Key` and body.',
    required: false,
    schema: { type: 'string', enum: ['true'] },
  },
  Deprecation: {
    description: 'RFC 9745: this operation is deprecated, since the given Unix time.',
    required: true,
    schema: { type: 'string', enum: [DEPRECATION_HEADERS.Deprecation] },
  },
  Sunset: {
    description: 'RFC 8594: when this operation stops working (it then answers 410).',
    required: true,
    schema: { type: 'string', enum: [DEPRECATION_HEADERS.Sunset] },
  },
  SuccessorLink: {
    description: 'RFC 8288 `Link` to the operation that replaces this one.',
    required: true,
    schema: { type: 'string', enum: [DEPRECATION_HEADERS.Link] },
  },
  // CORS (docs/api.md, "Cross-origin requests"): only with CORS_ALLOWED_ORIGINS set, hence never required.
  'Access-Control-Allow-Origin': {
    description:
      "The request's `Origin` when CORS_ALLOWED_ORIGINS allows it, or `*` when that setting is `*`; then a page of that origin may read the answer. " +
      'On the answers the HTTP server writes itself (408, 431, a malformed request, too many connections) only with `*`.',
    required: false,
    schema: { type: 'string', maxLength: MAX_ORIGIN_LENGTH, pattern: '^(\\*|https?://[^/]+)$' },
  },
  'Access-Control-Expose-Headers': {
    description: 'With `Access-Control-Allow-Origin`: the response headers a page may read.',
    required: false,
    schema: { type: 'string', enum: [EXPOSED_HEADERS.join(', ')] },
  },
  Vary: {
    description: 'With CORS_ALLOWED_ORIGINS set: the answer depends on the `Origin` request header.',
    required: false,
    schema: { type: 'string', enum: ['Origin'] },
  },
} as const;

export type HeaderName = keyof typeof HEADERS;
/** The header names on the wire of the two `Link` components. */
const WIRE_NAME: Partial<Record<HeaderName, string>> = {
  NextLink: 'Link', OrdersNextLink: 'Link', SuccessorLink: 'Link', ScopeChallenge: 'WWW-Authenticate', OrderLocation: 'Location',
};

/** How a response uses a header: as described, or optional where the component says required. */
export type HeaderUse = HeaderName | { optional: HeaderName };

/**
 * A response's headers. A header that may be absent is written out in place rather than as a
 * reference: openapi-typescript 7 types a referenced header as always present, whatever the
 * component's `required` says, while it reads `required` on a header written in place.
 */
export function headers(uses: readonly HeaderUse[]): JsonObject {
  const described: JsonObject = {};
  for (const use of [...uses, ...CORS]) {
    const name = typeof use === 'string' ? use : use.optional;
    const header = HEADERS[name];
    described[WIRE_NAME[name] ?? name] = typeof use !== 'string' ? { ...header, required: false } : header.required ? ref('headers', name) : header;
  }
  return described;
}

export const optional = (names: readonly HeaderName[]): HeaderUse[] => names.map((name) => ({ optional: name }));

/** On every response, including the ones Node writes before the pipeline runs (408, 431). */
export const EVERY: readonly HeaderName[] = ['X-Request-Id', 'Cache-Control', 'X-Content-Type-Options'];
/** On every response of a `/v1` request once the caller is limited (docs/keys-and-limits.md, "Rate limits"). */
export const RATE: readonly HeaderName[] = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit'];
export const DEPRECATION: readonly HeaderName[] = ['Deprecation', 'Sunset', 'SuccessorLink'];
/** On any response, every one of them declared, when CORS_ALLOWED_ORIGINS is set. */
export const CORS: readonly HeaderName[] = ['Access-Control-Allow-Origin', 'Access-Control-Expose-Headers', 'Vary'];
