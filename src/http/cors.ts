/**
 * Cross-origin requests (docs/api.md, "Cross-origin requests"; the Fetch standard's CORS protocol). A page on an
 * allowed origin may read our answers, their rate-limit and paging headers included; a page on any
 * other origin may send what a form could send anyway, but reads nothing.
 *
 * Credentials mode is never allowed (`Access-Control-Allow-Credentials` is never sent): the key
 * travels in `Authorization`, set by the page's own script, so no cookie or ambient credential of
 * the browser can be spent by a page that does not hold the key.
 *
 * All header objects are built once here; a request only picks one.
 */
import type { IncomingMessage } from 'node:http';
import type { AllowedOrigins } from '../config.ts';

/** Every response header a client of the API needs to read (docs/api.md lists them). */
export const EXPOSED_HEADERS = [
  'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit', 'RateLimit-Policy', 'Retry-After',
  'Link', 'Location', 'ETag', 'Deprecation', 'Sunset', 'X-Request-Id', 'Idempotent-Replayed',
] as const;

/** The request headers a page may send: `Content-Type` covers JSON bodies, `Last-Event-ID` resumes a stream. */
export const ALLOWED_REQUEST_HEADERS = ['Authorization', 'Content-Type', 'Idempotency-Key', 'If-Match', 'Last-Event-ID', 'X-Request-Id'] as const;

/** Seconds a browser may reuse a preflight's answer for the same origin, URL and request. */
export const PREFLIGHT_MAX_AGE_SECONDS = 600;

type Headers = Readonly<Record<string, string>>;

export interface Cors {
  /**
   * Headers for an answer to a request with this `Origin`: the CORS headers when it is allowed,
   * else only `Vary: Origin`, which every answer carries because it depends on that header
   * (Fetch standard, "CORS protocol and HTTP caches").
   */
  responseHeaders(origin: string | undefined): Headers;
  /**
   * Headers for the `204` answer to a preflight from `origin` to a path whose methods are `allow`
   * (its `Allow` value, null when no route has the path). An origin that is not allowed learns
   * nothing, not even whether the path exists: no `Access-Control-*` header at all. An allowed
   * origin asking about a path that does not exist gets null, and the caller answers
   * `404 not_found`: the browser then fails the request, and its console names the status.
   */
  preflight(origin: string, allow: string | null): Headers | null;
}

/**
 * A CORS preflight (Fetch standard): `OPTIONS` with `Origin` and `Access-Control-Request-Method`.
 * Any other `OPTIONS` is an ordinary request.
 */
export function isPreflight(req: IncomingMessage): boolean {
  return req.method === 'OPTIONS' && req.headers.origin !== undefined && req.headers['access-control-request-method'] !== undefined;
}

const VARY: Headers = Object.freeze({ Vary: 'Origin' });
const EXPOSE = EXPOSED_HEADERS.join(', ');
const ALLOW_HEADERS = ALLOWED_REQUEST_HEADERS.join(', ');

/** The CORS policy of `CORS_ALLOWED_ORIGINS`; null when it is unset (then no CORS header is ever sent). */
export function createCors(allowed: AllowedOrigins | null): Cors | null {
  if (allowed === null) return null;
  const any = allowed === '*';
  const actual = (origin: string): Headers =>
    Object.freeze({ 'Access-Control-Allow-Origin': any ? '*' : origin, Vary: 'Origin', 'Access-Control-Expose-Headers': EXPOSE });
  const byOrigin = new Map<string, Headers>(any ? [] : allowed.map((origin) => [origin, actual(origin)]));
  const wildcard = any ? actual('*') : null;

  return {
    responseHeaders(origin) {
      if (origin === undefined) return VARY;
      return wildcard ?? byOrigin.get(origin) ?? VARY;
    },
    preflight(origin, allow) {
      if (!any && !byOrigin.has(origin)) return VARY;
      if (allow === null) return null;
      return {
        'Access-Control-Allow-Origin': any ? '*' : origin,
        'Access-Control-Allow-Methods': allow,
        'Access-Control-Allow-Headers': ALLOW_HEADERS,
        'Access-Control-Max-Age': String(PREFLIGHT_MAX_AGE_SECONDS),
        Vary: 'Origin',
      };
    },
  };
}
