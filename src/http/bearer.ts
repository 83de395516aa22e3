/**
 * The bearer token of a request (RFC 6750): how it is read from `Authorization`, and the
 * `WWW-Authenticate` challenges a 401 and a 403 carry. Nothing here looks the key up.
 */
import { httpError, type ApiError } from './api-error.ts';

export type Credentials =
  /** No Authorization header, another scheme, or an empty token: `401 missing_api_key`. */
  | { kind: 'missing' }
  | { kind: 'bearer'; token: string };

const BEARER = /^bearer(?:[ \t]+(.*))?$/i;

/** Reads `Authorization: Bearer <token>`; the scheme name is case-insensitive. */
export function readCredentials(header: string | undefined): Credentials {
  if (header === undefined) return { kind: 'missing' };
  const match = BEARER.exec(header);
  if (!match) return { kind: 'missing' };
  const token = (match[1] ?? '').trim();
  return token === '' ? { kind: 'missing' } : { kind: 'bearer', token };
}

/** `WWW-Authenticate` of a 401 without a usable key, and of one with an invalid key (RFC 6750). */
export const UNAUTHENTICATED_CHALLENGE = 'Bearer realm="pets"';
export const INVALID_TOKEN_CHALLENGE = 'Bearer realm="pets", error="invalid_token"';

/** `WWW-Authenticate` of a 403: the key lacks `scope`, the least scope that would allow the request (RFC 6750, 3.1). */
export function insufficientScopeChallenge(scope: string): string {
  return `Bearer realm="pets", error="insufficient_scope", scope="${scope}"`;
}

/**
 * The 403 of a key without `scope`, with its challenge: the one wording of `insufficient_scope`,
 * whether the operation needs the scope (`action` left as is) or one of its cases does
 * (`approve or complete an order`).
 */
export function insufficientScopeError(scope: string, action = 'call this operation'): ApiError {
  return httpError('insufficient_scope', `Only a key with ${scope} may ${action}.`, { 'WWW-Authenticate': insufficientScopeChallenge(scope) });
}
