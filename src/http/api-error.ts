/**
 * The one error type of the service and the registry of its permanent codes.
 *
 * Unlike Hono's HTTPException, the status is not passed by the thrower: it is looked up from
 * the code, so a code can never travel with the wrong status (the contract's table is the
 * registry below, and a test checks that docs/api.md lists every code).
 */

/** Every error code of the contract, with the HTTP status it always carries. */
export const ERROR_STATUS = {
  bad_request: 400,
  invalid_json: 400,
  invalid_body: 400,
  invalid_query: 400,
  invalid_path: 400,
  invalid_idempotency_key: 400,
  missing_api_key: 401,
  invalid_api_key: 401,
  insufficient_scope: 403,
  not_found: 404,
  pet_not_found: 404,
  order_not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  idempotency_key_in_flight: 409,
  pet_not_available: 409,
  pet_has_open_order: 409,
  invalid_transition: 409,
  gone: 410,
  precondition_failed: 412,
  payload_too_large: 413,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  rate_limited: 429,
  temporarily_banned: 429,
  headers_too_large: 431,
  internal_error: 500,
  not_implemented: 501,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** Thrown by any layer to answer with the contract's Error body. */
export class ApiError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Extra response headers that belong to this error (`Allow`, `Retry-After`, ...). */
  readonly headers: Readonly<Record<string, string>>;

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.headers = headers;
  }
}

/** 405 for a path that exists with other methods, listed in `Allow` (both listeners use it). */
export function methodNotAllowed(method: string, allow: string): ApiError {
  return new ApiError('method_not_allowed', `${method} is not allowed here; use ${allow}.`, { Allow: allow });
}
