/**
 * The one error type of the service, and the HTTP-level codes: those of a request's form (its
 * syntax, size, media type and body), of its key and its rate, of routing, and of the server
 * itself. The API's own codes, of its resources and their rules, are with their messages in
 * src/api/errors.ts; together they are the contract's table of permanent codes, which a test
 * holds docs/api.md to.
 *
 * Unlike Hono's HTTPException, the status is not passed by the thrower: it comes with the code
 * from its registry, so a code never travels with another status.
 */

/** The HTTP-level codes, with the status each always carries. */
export const HTTP_ERROR_STATUS = {
  bad_request: 400,
  invalid_json: 400,
  invalid_body: 400,
  missing_api_key: 401,
  invalid_api_key: 401,
  insufficient_scope: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  temporarily_banned: 429,
  headers_too_large: 431,
  internal_error: 500,
  unavailable: 503,
} as const;

export type HttpErrorCode = keyof typeof HTTP_ERROR_STATUS;

/**
 * Thrown by any layer to answer with the contract's Error body. Made only by the registries:
 * httpError here, apiError in src/api/errors.ts.
 */
export class ApiError extends Error {
  readonly code: string;
  readonly status: number;
  /** Extra response headers that belong to this error (`Allow`, `Retry-After`, ...). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: string, status: number, message: string, headers: Readonly<Record<string, string>> = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.status = status;
    this.headers = headers;
  }
}

/** An HTTP-level error, with the status of its code. */
export function httpError(code: HttpErrorCode, message: string, headers?: Readonly<Record<string, string>>): ApiError {
  return new ApiError(code, HTTP_ERROR_STATUS[code], message, headers);
}

/** 405 for a path that exists with other methods, listed in `Allow` (both listeners use it). */
export function methodNotAllowed(method: string, allow: string): ApiError {
  return httpError('method_not_allowed', `${method} is not allowed here; use ${allow}.`, { Allow: allow });
}
