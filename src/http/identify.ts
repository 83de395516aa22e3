/**
 * Who is calling (CONTRACT.md step 1): the bearer token if any, and the client address that
 * anonymous callers are limited by. Nothing here is built from the Host header.
 */
import type { IncomingMessage } from 'node:http';

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

/**
 * The client's address: the socket's peer, or with `trustProxy` the last hop of
 * X-Forwarded-For (the one our own proxy appended; earlier hops are the client's word).
 */
export function clientAddress(req: IncomingMessage, trustProxy: boolean): string {
  if (trustProxy) {
    const forwarded = req.headers['x-forwarded-for'];
    if (typeof forwarded === 'string') {
      const last = forwarded.slice(forwarded.lastIndexOf(',') + 1).trim();
      if (last !== '') return last;
    }
  }
  return req.socket.remoteAddress ?? 'unknown';
}

export const CLIENT_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** The client's X-Request-Id when it is acceptable, else a fresh one. */
export function requestId(header: string | string[] | undefined, generate: () => string): string {
  return typeof header === 'string' && CLIENT_REQUEST_ID.test(header) ? header : generate();
}

/** `WWW-Authenticate` of a 401 without a usable key, and of one with an invalid key (RFC 6750). */
export const UNAUTHENTICATED_CHALLENGE = 'Bearer realm="pets"';
export const INVALID_TOKEN_CHALLENGE = 'Bearer realm="pets", error="invalid_token"';
