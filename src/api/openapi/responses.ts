/**
 * Responses of the document: an error response narrowed to the codes it can carry, and the
 * responses that read the same on every operation (the document's `components.responses`).
 */
import { ERROR_STATUS, type ErrorCode } from '../errors.ts';
import type { HeaderName, HeaderSubject, HeaderUse } from '../response-headers.ts';
import { EVERY, headers, optional, RATE } from './headers.ts';
import { ERROR_CODES, ref, type JsonObject } from './json-schema.ts';

export const json = (schema: JsonObject) => ({ 'application/json': { schema } });

/**
 * An error response: the Error schema, narrowed to the codes this response can carry. A code
 * with another status is a programmer error, thrown at start. `subject` is the operation whose
 * answer it is, for the headers described per operation.
 */
export function errorResponse(
  status: number | readonly number[],
  description: string,
  codes: readonly ErrorCode[],
  uses: readonly HeaderUse[],
  subject?: HeaderSubject,
): JsonObject {
  const statuses = typeof status === 'number' ? [status] : status;
  for (const code of codes) {
    if (!statuses.includes(ERROR_STATUS[code])) throw new Error(`error code ${code} is not a ${statuses.join(' or ')}`);
  }
  // The Error schema bounds `status` already; this narrows it to the codes of each status.
  const narrowing = (one: number) => ({
    type: 'object',
    properties: { code: { type: 'string', enum: codes.filter((code) => ERROR_STATUS[code] === one) }, status: { const: one } },
  });
  return {
    description: `${description} Codes: ${codes.map((code) => `\`${code}\``).join(', ')}.`,
    headers: headers(uses, subject),
    content: json({ allOf: [ref('schemas', 'Error'), statuses.length === 1 ? narrowing(statuses[0]!) : { oneOf: statuses.map(narrowing) }] }),
  };
}

export const codesOf = (status: number) => ERROR_CODES.filter((code) => ERROR_STATUS[code] === status);

/** A 500 may come before the caller was limited, so the rate-limit headers are optional. */
export function internalError(extra: readonly HeaderName[] = [], subject?: HeaderSubject): JsonObject {
  return errorResponse(500, 'An unexpected error; the body never carries detail.', codesOf(500), [...EVERY, ...optional([...RATE, ...extra])], subject);
}

/** A key without the scope: decided after routing, so it carries the route's headers (`extra`). */
export function forbidden(extra: readonly HeaderName[] = [], subject?: HeaderSubject): JsonObject {
  return errorResponse(403, 'The API key lacks the scope this operation needs (named in `WWW-Authenticate`).', codesOf(403), [...EVERY, ...RATE, ...extra, 'ScopeChallenge'], subject);
}

/** A /v1 request is limited before it learns that the server is shutting down or cannot write. */
export function unavailable(extra: readonly HeaderName[] = [], subject?: HeaderSubject): JsonObject {
  return errorResponse(
    503,
    'The server is shutting down (retry on a new connection), or cannot store data right now (retry after `Retry-After`).',
    codesOf(503),
    [...EVERY, ...RATE, ...optional(['Retry-After', ...extra])],
    subject,
  );
}

/**
 * Error responses that read the same on every operation, by name and status. NotFound and
 * MethodNotAllowed belong to no operation: they answer paths and methods that have none.
 */
export const SHARED_RESPONSES = {
  Unauthorized: [
    401,
    errorResponse(401, 'No API key, or one that is unknown, revoked or expired.', codesOf(401), [...EVERY, ...RATE, 'WWW-Authenticate']),
  ],
  Forbidden: [403, forbidden()],
  NotFound: [
    404,
    errorResponse(404, 'No such path: any path under the base address that no operation has.', ['not_found'], [...EVERY, ...RATE]),
  ],
  MethodNotAllowed: [
    405,
    errorResponse(405, 'The path exists, but not with this method: any method that no operation of the path has.', ['method_not_allowed'], [
      ...EVERY,
      ...RATE,
      'Allow',
    ]),
  ],
  // Written by the HTTP server itself before the request reaches the limiter, so without the
  // rate-limit headers that every response of the API carries: `default`, the responses no
  // operation lists, rather than a 4XX that would promise them.
  AnsweredByServer: [
    'default',
    errorResponse([408, 431], 'The HTTP server answered before the request reached the API: it did not arrive in time (408), or its headers are larger than 16 KiB (431). The connection is closed.', [...codesOf(408), ...codesOf(431)], EVERY),
  ],
  TooManyRequests: [
    429,
    errorResponse(
      429,
      'Rate limit exceeded, or this caller is temporarily banned for repeating requests after 429s. Retry after `Retry-After`, with exponential backoff.',
      // A stream's own cap is a 429 too, but only the feed's: it lists it in its own answer.
      ['rate_limited', 'temporarily_banned'],
      [...EVERY, ...RATE, 'Retry-After'],
    ),
  ],
  InternalError: [500, internalError()],
  NotImplemented: [501, errorResponse(501, 'This operation is not available in this version.', codesOf(501), [...EVERY, ...RATE])],
  Unavailable: [503, unavailable()],
} as const satisfies Record<string, readonly [number | 'default', JsonObject]>;

export type SharedResponse = keyof typeof SHARED_RESPONSES;

/** References to shared responses, keyed by status as an operation's `responses` are. */
export function shared(...names: SharedResponse[]): JsonObject {
  return Object.fromEntries(names.map((name) => [String(SHARED_RESPONSES[name][0]), ref('responses', name)]));
}

/** What every API operation can answer whatever it does. */
export const EVERY_OPERATION: SharedResponse[] = ['Unauthorized', 'TooManyRequests', 'AnsweredByServer', 'InternalError', 'Unavailable'];
