/**
 * The response headers of the API, each described once: the document's `components.headers` and
 * every response that lists one (openapi/headers.ts). The table of operations names them; those
 * whose value depends on the operation (its own path, its deprecation) are described for each
 * operation that sends them.
 */
import { MAX_ORIGIN_LENGTH } from '../config.ts';
import { COMMON_HEADERS } from '../http/reply.ts';
import { insufficientScopeChallenge, INVALID_TOKEN_CHALLENGE, UNAUTHENTICATED_CHALLENGE } from '../http/bearer.ts';
import { SCOPES } from '../keys/scopes.ts';
import { EXPOSED_HEADERS } from '../http/cors.ts';
import { CLIENT_REQUEST_ID } from '../http/request-id.ts';

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
  'X-Accel-Buffering': {
    description: 'On an event stream only: `no`, so that a proxy (nginx reads this header) passes each event on at once rather than buffering the response.',
    required: true,
    schema: { type: 'string', enum: ['no'] },
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
  ETag: {
    description:
      "The resource's entity tag (a pet's or an order's): a strong validator (RFC 9110, section 8.8.3), opaque, that changes with every change to it. " +
      'Send it in `If-Match` to change it (or delete a pet) only if nobody changed it since.',
    required: true,
    schema: { type: 'string', pattern: '^"[!#-~]*"$', maxLength: 64 },
  },
  'Idempotent-Replayed': {
    description: 'Present when this is the stored first response to the same `Idempotency-Key` and body.',
    required: false,
    schema: { type: 'string', enum: ['true'] },
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

/** A header as the document describes it. */
export interface HeaderObject {
  description: string;
  required: boolean;
  schema: Readonly<Record<string, unknown>>;
}

/** What a header described for one operation knows of that operation. */
export interface HeaderSubject {
  /** The operation's path, under the base address, as a request names it (`/v1/pets`). */
  path: string;
  /** The values of its deprecation headers, when it is deprecated. */
  deprecation: Readonly<Record<'Deprecation' | 'Sunset' | 'Link', string>> | null;
}

/** A path as a regular expression that matches it literally. */
const literally = (path: string) => path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Values are at most 19 digits (a positive int64). */
const MAX_ID_DIGITS = 19;

/** Response headers whose value depends on the operation that sends them. */
export const OPERATION_HEADERS = {
  NextLink: ({ path }: HeaderSubject): HeaderObject => ({
    description: 'RFC 8288 `Link` to the next page, carrying the effective `limit`, the `status` filter and a `cursor`. Absent on the last page.',
    required: false,
    schema: { type: 'string', maxLength: 256, pattern: `^<${literally(path)}\\?[^>]*cursor=[A-Za-z0-9_-]+[^>]*>; rel="next"$` },
  }),
  EventsLink: ({ path }: HeaderSubject): HeaderObject => ({
    description:
      'RFC 8288 `Link` to the next page of the feed, on every answer: `after` the last id returned (unchanged, or `0` when omitted, ' +
      'on an empty page), the effective `limit`, and `types` and `wait` when they were given. Following it forever sees every event once. ' +
      'On every page; a stream has none.',
    required: true,
    schema: { type: 'string', maxLength: 256, pattern: `^<${literally(path)}\\?after=(0|[1-9][0-9]*)&limit=[1-9][0-9]*(&types=[a-z.,]+)?(&wait=[0-9]+)?>; rel="next"$` },
  }),
  Location: ({ path }: HeaderSubject): HeaderObject => ({
    description: 'Where what was created is: this path and its id.',
    required: true,
    schema: { type: 'string', maxLength: path.length + 1 + MAX_ID_DIGITS, pattern: `^${literally(path)}/[1-9][0-9]*$` },
  }),
  Deprecation: ({ deprecation }: HeaderSubject): HeaderObject => ({
    description: 'RFC 9745: this operation is deprecated, since the given Unix time.',
    required: true,
    schema: { type: 'string', enum: [deprecation?.Deprecation] },
  }),
  Sunset: ({ deprecation }: HeaderSubject): HeaderObject => ({
    description: 'RFC 8594: when this operation stops working (it then answers 410).',
    required: true,
    schema: { type: 'string', enum: [deprecation?.Sunset] },
  }),
  SuccessorLink: ({ deprecation }: HeaderSubject): HeaderObject => ({
    description: 'RFC 8288 `Link` to the operation that replaces this one.',
    required: true,
    schema: { type: 'string', enum: [deprecation?.Link] },
  }),
} as const;

export type HeaderName = keyof typeof HEADERS | keyof typeof OPERATION_HEADERS;

/** How a response uses a header: as described, or optional where the description says required. */
export type HeaderUse = HeaderName | { optional: HeaderName };
