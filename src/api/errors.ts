/**
 * The API's own error codes: those of its resources and their rules (a pet, an order and its
 * transitions, a webhook, an Idempotency-Key, a deprecated operation) and of its validation of paths and
 * queries. Each has its status and its one message, made from the details of the case, so that
 * no code is worded twice. The HTTP-level codes are in src/http/api-error.ts; ERROR_STATUS below
 * is both, the contract's table of permanent codes (docs/api.md lists every one; a test checks).
 */
import { ApiError, HTTP_ERROR_STATUS } from '../http/api-error.ts';

interface ErrorDefinition {
  status: number;
  message: (...details: never[]) => string;
  /** Headers that every answer with this code carries. */
  headers?: Readonly<Record<string, string>>;
}

/** The transitions an order may take from `from`, as a 409 names them (`approved or cancelled`). */
function transitionsFrom(from: string, allowed: readonly string[]): string {
  return allowed.length === 0 ? `a ${from} order cannot change any more` : `from ${from} an order may become ${allowed.join(' or ')}`;
}

const API_ERRORS = {
  invalid_query: { status: 400, message: (problems: string) => `Invalid query: ${problems}.` },
  invalid_path: { status: 400, message: (problems: string) => `Invalid path: ${problems}.` },
  invalid_idempotency_key: {
    status: 400,
    message: () => 'Idempotency-Key must be 1 to 255 visible ASCII characters (! to ~), bare or in double quotes.',
  },
  pet_not_found: { status: 404, message: (petId: bigint | number) => `No pet has id ${petId}.` },
  order_not_found: { status: 404, message: (orderId: bigint) => `No order has id ${orderId}.` },
  webhook_not_found: { status: 404, message: (webhookId: bigint) => `This account has no webhook with id ${webhookId}.` },
  idempotency_key_in_flight: {
    status: 409,
    message: () => 'A request with this Idempotency-Key is still being processed; retry later.',
    headers: { 'Retry-After': '1' },
  },
  pet_not_available: { status: 409, message: (petId: bigint, status: string) => `Pet ${petId} is ${status}, not available: it cannot be ordered now.` },
  pet_has_open_order: {
    status: 409,
    message: (petId: bigint) => `Pet ${petId} is held by an open order: its status and its existence belong to the order until the order is completed or cancelled.`,
  },
  too_many_open_orders: {
    status: 409,
    message: (limit: number) =>
      `This account already has ${limit} open order${limit === 1 ? '' : 's'} (placed or approved), the most it may have: cancel one, or wait for one to be completed or to expire.`,
  },
  too_many_webhooks: {
    status: 409,
    message: (limit: number) => `This account already has ${limit} webhook${limit === 1 ? '' : 's'}, the most it may have: delete one, or change one to deliver what a new one would.`,
  },
  invalid_transition: {
    status: 409,
    message: (from: string, to: string, allowed: readonly string[]) => `An order cannot go from ${from} to ${to}: ${transitionsFrom(from, allowed)}.`,
  },
  gone: {
    status: 410,
    message: (operation: string, day: string, successor: string) => `${operation} was removed on ${day}; use ${successor} with the status filter.`,
  },
  cursor_expired: {
    status: 410,
    message: (after: bigint, deletedThrough: number) =>
      `Events after ${after} may have been deleted (the log keeps events for EVENTS_RETENTION_DAYS; it has deleted up to id ${deletedThrough}): ` +
      'start again from a full read of the pets and orders, then follow the feed from its newest event.',
  },
  precondition_failed: {
    status: 412,
    message: (resource: 'pet' | 'order') => `If-Match does not match the ${resource}'s current ETag: it was changed since. Nothing was changed.`,
  },
  idempotency_key_reused: {
    status: 422,
    message: () => 'This Idempotency-Key was already used with a different body; use a new key for a new request.',
  },
  too_many_streams: {
    status: 429,
    message: (cap: 'key' | 'instance', limit: number) =>
      cap === 'key'
        ? `This key already has ${limit} event streams open, the most one key may have: close one, or follow the feed's pages.`
        : `This instance already serves ${limit} event streams, the most it serves at once: retry after Retry-After, or follow the feed's pages.`,
    headers: { 'Retry-After': '5' },
  },
  not_implemented: { status: 501, message: () => 'This operation is not available in this version.' },
} as const satisfies Readonly<Record<string, ErrorDefinition>>;

export type ApiErrorCode = keyof typeof API_ERRORS;

/** The error of one of the API's codes, its message made from the case's `details`. */
export function apiError<C extends ApiErrorCode>(code: C, ...details: Parameters<(typeof API_ERRORS)[C]['message']>): ApiError {
  const definition: ErrorDefinition = API_ERRORS[code];
  const message = definition.message as (...details: unknown[]) => string;
  return new ApiError(code, definition.status, message(...details), definition.headers);
}

/**
 * Every error code of the contract with the HTTP status it always carries, ordered by status
 * (the order of the document's Error schema and of the error table on /docs).
 */
export const ERROR_STATUS: Readonly<Record<ErrorCode, number>> = Object.fromEntries(
  [...Object.entries(HTTP_ERROR_STATUS), ...Object.entries(API_ERRORS).map(([code, { status }]) => [code, status] as const)].sort((a, b) => a[1] - b[1]),
) as Record<ErrorCode, number>;

export type ErrorCode = keyof typeof HTTP_ERROR_STATUS | ApiErrorCode;
