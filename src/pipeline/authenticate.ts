/**
 * Steps 1 and 3, and the scope check after routing: who the caller is, the 401 of a request that
 * needs a key and has no valid one, and the 403 of a key without the scope its operation needs.
 * A valid key is the caller; otherwise the client address is (step 1), so that a request without
 * a key is still rate limited before it is refused (step 3).
 */
import type { IncomingMessage } from 'node:http';
import { httpError, type ApiError } from '../http/api-error.ts';
import { insufficientScopeError, INVALID_TOKEN_CHALLENGE, readCredentials, UNAUTHENTICATED_CHALLENGE, type Credentials } from '../http/bearer.ts';
import type { Caller } from '../keys/caller.ts';
import { allows, type Scope } from '../keys/scopes.ts';
import { andThen, type MaybePromise } from '../lib/maybe-promise.ts';
import type { PipelineObserver } from './observer.ts';

/**
 * Returns the key a bearer token belongs to when it is valid now, else null. `connection` is the
 * request's socket, for work that can be done once per connection (hashing the token).
 */
export type Authenticate = (token: string, connection: object) => MaybePromise<Caller | null>;

export interface Identified {
  credentials: Credentials;
  apiKey: Caller | null;
}

/**
 * Step 1. The stores answer at once (SQLite) or later (PostgreSQL): await only a promise, so the
 * synchronous engine's requests take no extra microtask turn.
 */
export function identify(req: IncomingMessage, authenticate: Authenticate): MaybePromise<Identified> {
  const credentials = readCredentials(req.headers.authorization);
  const found = credentials.kind === 'bearer' ? authenticate(credentials.token, req.socket) : null;
  return andThen(found, (apiKey) => ({ credentials, apiKey }));
}

/** Step 3: the 401 for a request without a valid key, with its RFC 6750 challenge. */
export function unauthenticated(credentials: Credentials, observer: PipelineObserver): ApiError {
  const code = credentials.kind === 'missing' ? 'missing_api_key' : 'invalid_api_key';
  observer.apiKeyRejected(code);
  return code === 'missing_api_key'
    ? httpError('missing_api_key', 'Send your API key as Authorization: Bearer <key>.', { 'WWW-Authenticate': UNAUTHENTICATED_CHALLENGE })
    : httpError('invalid_api_key', 'The API key is unknown, revoked or expired.', { 'WWW-Authenticate': INVALID_TOKEN_CHALLENGE });
}

/**
 * After routing, before the handler validates anything: the 403 for a key that lacks the scope
 * the operation needs (RFC 6750, section 3.1), or null when the key has it.
 */
export function insufficientScope(apiKey: Caller, needed: Scope, observer: PipelineObserver): ApiError | null {
  if (allows(apiKey.scopes, needed)) return null;
  observer.apiKeyRejected('insufficient_scope');
  return insufficientScopeError(needed);
}
