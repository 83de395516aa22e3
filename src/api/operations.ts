/**
 * The operations of the API, as data: one entry per operation, from which the router
 * (src/pipeline/routes.ts), the OpenAPI document (openapi/document.ts) and, through it, the
 * /docs page are built. Each entry names its handler by operationId (the pets' are in
 * pets/handlers.ts); a field's rules live in schemas.ts and are referenced here, never repeated.
 * Adding an operation means adding one entry here and its handler.
 *
 * What every operation answers whatever it does (401, 429, 500, 503, and the 408/431 the HTTP
 * server writes itself) and the headers on every answer are added by the document's builder.
 */
import type { IncomingMessage } from 'node:http';
import type { ErrorCode } from '../http/api-error.ts';
import type { Reply } from '../http/reply.ts';
import type { Params } from '../http/router.ts';
import type { Caller } from '../keys/caller.ts';
import type { Scope } from '../keys/scopes.ts';
import type { HeaderUse } from './openapi/headers.ts';
import {
  createPetParameters, getOrderParameters, getPetParameters, ifMatchParameters, listOrdersParameters, listPetsParameters,
  placeOrderParameters, type Parameter,
} from './schemas.ts';

/** Paths below are under this base address. */
export const BASE_PATH = '/v1';

/** `GET /v1/pets/{petId}` is deprecated (RFC 9745) and sunsets (RFC 8594) on this instant. */
export const SUNSET_MS = Date.UTC(2030, 11, 5);
/** When the deprecation was announced: the users' text of version 1.0.0. */
export const DEPRECATED_MS = Date.UTC(2025, 11, 5);

/** Headers on every response of the deprecated operation once it is routed, errors included. */
export const DEPRECATION_HEADERS: Readonly<Record<string, string>> = {
  Deprecation: `@${DEPRECATED_MS / 1000}`,
  Sunset: new Date(SUNSET_MS).toUTCString(),
  Link: '</v1/pets>; rel="successor-version"',
};

export type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** One answer of an operation. */
export interface ResponseSpec {
  description: string;
  /** A success body: the name of a component schema, or a schema written in place. */
  body?: string | Readonly<Record<string, unknown>>;
  /** An error response: the codes it can carry (each must have this status). */
  codes?: readonly ErrorCode[];
  /** Headers beyond those on every answer (the request id, the common ones, the rate limit). */
  headers?: readonly HeaderUse[];
}

export interface RequestBodySpec {
  description: string;
  /** The name of the component schema the body is validated against. */
  schema: string;
  /** The media types accepted, as the document lists them. */
  mediaTypes: readonly string[];
}

export interface OperationSpec {
  operationId: string;
  method: Method;
  /** Under BASE_PATH, with `{name}` for each path parameter. */
  path: string;
  tag: 'pets' | 'store' | 'meta';
  summary: string;
  description: string;
  /**
   * The least scope a key needs (401 without a valid key, then 403 insufficient_scope without
   * this scope); null: anyone, and a valid key only decides whose rate limit counts the request.
   */
  scope: Scope | null;
  /** Deprecated: every answer carries DEPRECATION_HEADERS once routed. */
  deprecated?: boolean;
  parameters?: readonly Parameter[];
  requestBody?: RequestBodySpec;
  /** Its own answers, by status; the shared ones are added by the document's builder. */
  responses: Readonly<Record<number, ResponseSpec>>;
  /** Answers may be replays of a first answer stored under an Idempotency-Key. */
  replayable?: boolean;
  /** The shared answer for operations announced but not built in this version. */
  notImplemented?: boolean;
}

/** What a handler receives once the request was identified, limited, authenticated and routed. */
export interface HandlerContext {
  req: IncomingMessage;
  /** The path parameters, as sent (each handler validates its own). */
  params: Params;
  /** The query string without `?`. */
  search: string;
  /** Who is calling; null for an anonymous caller of an operation that needs no key. */
  caller: Caller | null;
}

/** What an operation does; it throws an ApiError for any answer but its own success. */
export type Handler = (context: HandlerContext) => Reply | Promise<Reply>;

/** Handlers by operationId. */
export type Handlers = Readonly<Record<string, Handler>>;

/** The two answers of a change of a pet that is not there, or not in the state expected. */
const PET_CHANGE_REFUSALS: Readonly<Record<number, ResponseSpec>> = {
  404: { description: 'No pet has this id (it never existed, or it was deleted).', codes: ['pet_not_found'] },
  412: { description: "`If-Match` lists none of the pet's current ETag: it was changed since. Nothing was changed.", codes: ['precondition_failed'] },
};

const SUNSET_DAY = new Date(SUNSET_MS).toISOString().slice(0, 10);

export const OPERATIONS: readonly OperationSpec[] = [
  {
    operationId: 'listPets',
    method: 'GET',
    path: '/pets',
    tag: 'pets',
    summary: 'List pets',
    description:
      'Pets sorted by id, as a plain JSON array. When more pets follow, a `Link: <...>; rel="next"` header gives the next page; ' +
      'following it from the first page visits every matching pet exactly once.',
    scope: 'pets:read',
    parameters: listPetsParameters,
    responses: {
      200: { description: 'A page of pets.', body: 'Pets', headers: ['NextLink'] },
      400: { description: 'A bad, repeated or unknown query parameter; the message names it.', codes: ['invalid_query', 'bad_request'] },
    },
  },
  {
    operationId: 'createPet',
    method: 'POST',
    path: '/pets',
    tag: 'pets',
    summary: 'Add a pet',
    description: 'Stores a pet and answers once it is durably stored.',
    scope: 'pets:write',
    parameters: createPetParameters,
    requestBody: { description: 'At most 16 KiB.', schema: 'NewPet', mediaTypes: ['application/json'] },
    replayable: true,
    responses: {
      201: { description: 'The created pet.', body: 'Pet', headers: ['Location', 'ETag', 'Idempotent-Replayed'] },
      400: {
        description: 'A bad `Idempotency-Key`, an empty body or one that is not a JSON object, malformed JSON, or invalid fields (the message names every one).',
        codes: ['invalid_idempotency_key', 'invalid_body', 'invalid_json', 'bad_request'],
      },
      409: { description: 'A request with this `Idempotency-Key` is still being processed.', codes: ['idempotency_key_in_flight'], headers: ['Retry-After'] },
      413: { description: 'The body is larger than 16 KiB.', codes: ['payload_too_large'] },
      415: { description: 'The body is not sent as `Content-Type: application/json`.', codes: ['unsupported_media_type'] },
      422: { description: 'This `Idempotency-Key` was used with a different body.', codes: ['idempotency_key_reused'] },
    },
  },
  {
    operationId: 'getPet',
    method: 'GET',
    path: '/pets/{petId}',
    tag: 'pets',
    summary: 'Get a pet (deprecated)',
    description:
      `Deprecated: removed on ${SUNSET_DAY} (\`Sunset: ${DEPRECATION_HEADERS.Sunset}\`); from then on it answers \`410 gone\`. ` +
      'Use `GET /pets` with the `status` filter instead.',
    scope: 'pets:read',
    deprecated: true,
    parameters: getPetParameters,
    responses: {
      200: { description: 'The pet.', body: 'Pet', headers: ['ETag'] },
      400: { description: '`petId` is not an int64 in decimal.', codes: ['invalid_path', 'bad_request'] },
      404: { description: 'No pet has this id.', codes: ['pet_not_found'] },
      410: { description: `The operation was removed on ${SUNSET_DAY}; use \`GET /pets\`.`, codes: ['gone'] },
    },
  },
  {
    operationId: 'updatePet',
    method: 'PATCH',
    path: '/pets/{petId}',
    tag: 'pets',
    summary: 'Change a pet',
    description:
      'Applies a JSON merge patch (RFC 7396) of `name`, `categoryId` and `status` and answers once the change is durably stored. ' +
      'Any status may change to any other, except while an open order holds the pet: then its status belongs to the order (`409`). ' +
      'Checked in this order: the path, the pet\'s existence, `If-Match`, the body, then the open order.',
    scope: 'pets:write',
    parameters: [...getPetParameters, ...ifMatchParameters],
    requestBody: {
      description: 'At most 16 KiB, as `application/merge-patch+json` or `application/json`.',
      schema: 'PetPatch',
      mediaTypes: ['application/merge-patch+json', 'application/json'],
    },
    responses: {
      200: { description: 'The whole pet after the change.', body: 'Pet', headers: ['ETag'] },
      400: {
        description: 'A bad `petId`, a malformed `If-Match`, an empty body or one that is not a JSON object, malformed JSON, or invalid fields (the message names every one).',
        codes: ['invalid_path', 'bad_request', 'invalid_body', 'invalid_json'],
      },
      ...PET_CHANGE_REFUSALS,
      409: { description: 'The body holds `status` while an open order holds the pet: its status belongs to the order. Nothing was changed.', codes: ['pet_has_open_order'] },
      413: { description: 'The body is larger than 16 KiB.', codes: ['payload_too_large'] },
      415: { description: 'The body is not sent as `application/merge-patch+json` or `application/json`.', codes: ['unsupported_media_type'] },
    },
  },
  {
    operationId: 'deletePet',
    method: 'DELETE',
    path: '/pets/{petId}',
    tag: 'pets',
    summary: 'Remove a pet',
    description:
      'Removes the pet from every list and lookup, once that is durably stored; its id is never used again. ' +
      'Checked in this order: the path, the pet\'s existence, `If-Match`.',
    scope: 'pets:write',
    parameters: [...getPetParameters, ...ifMatchParameters],
    responses: {
      204: { description: 'The pet is gone. No body.' },
      400: { description: 'A bad `petId` or a malformed `If-Match`.', codes: ['invalid_path', 'bad_request'] },
      ...PET_CHANGE_REFUSALS,
      409: { description: 'An open order holds the pet: it cannot be removed until the order is completed or cancelled.', codes: ['pet_has_open_order'] },
    },
  },
  {
    operationId: 'listOrders',
    method: 'GET',
    path: '/store/orders',
    tag: 'store',
    summary: 'List orders',
    description:
      'Orders sorted by id, as a plain JSON array: the account\'s own, or every account\'s for a key with `orders:manage`. ' +
      'Paginated like `GET /pets`: a `Link: <...>; rel="next"` header gives the next page.',
    scope: 'orders:write',
    parameters: listOrdersParameters,
    responses: {
      200: { description: 'A page of orders.', body: 'Orders', headers: ['OrdersNextLink'] },
      400: { description: 'A bad, repeated or unknown query parameter; the message names it.', codes: ['invalid_query', 'bad_request'] },
    },
  },
  {
    operationId: 'placeOrder',
    method: 'POST',
    path: '/store/orders',
    tag: 'store',
    summary: 'Place an order',
    description:
      'Asks to adopt an available pet: in one transaction the pet becomes `pending` (its ETag changes) and the order is stored as ' +
      '`placed`, for the account of the key. At most one order per pet is open: of concurrent orders for one pet, exactly one ' +
      'is placed and the others are `409 pet_not_available`. Answers once durably stored.',
    scope: 'orders:write',
    parameters: placeOrderParameters,
    requestBody: { description: 'At most 16 KiB.', schema: 'NewOrder', mediaTypes: ['application/json'] },
    replayable: true,
    responses: {
      201: { description: 'The placed order.', body: 'Order', headers: ['OrderLocation', 'ETag', 'Idempotent-Replayed'] },
      400: {
        description: 'A bad `Idempotency-Key`, an empty body or one that is not a JSON object, malformed JSON, or an invalid `petId` (the message names every bad field).',
        codes: ['invalid_idempotency_key', 'invalid_body', 'invalid_json', 'bad_request'],
      },
      404: { description: 'No pet has this id (it never existed, or it was deleted).', codes: ['pet_not_found'] },
      409: {
        description: 'The pet is not available (the message names its status), or a request with this `Idempotency-Key` is still being processed.',
        codes: ['pet_not_available', 'idempotency_key_in_flight'],
        headers: [{ optional: 'Retry-After' }],
      },
      413: { description: 'The body is larger than 16 KiB.', codes: ['payload_too_large'] },
      415: { description: 'The body is not sent as `Content-Type: application/json`.', codes: ['unsupported_media_type'] },
      422: { description: 'This `Idempotency-Key` was used with a different body.', codes: ['idempotency_key_reused'] },
    },
  },
  {
    operationId: 'getOrder',
    method: 'GET',
    path: '/store/orders/{orderId}',
    tag: 'store',
    summary: 'Get an order',
    description: 'An order of the key\'s account, or any order for a key with `orders:manage`; any other is `404`, so the answer never tells whether another account\'s order exists.',
    scope: 'orders:write',
    parameters: getOrderParameters,
    responses: {
      200: { description: 'The order.', body: 'Order', headers: ['ETag'] },
      400: { description: '`orderId` is not an int64 in decimal.', codes: ['invalid_path', 'bad_request'] },
      404: { description: 'No order has this id, or it belongs to another account.', codes: ['order_not_found'] },
    },
  },
  {
    operationId: 'updateOrder',
    method: 'PATCH',
    path: '/store/orders/{orderId}',
    tag: 'store',
    summary: 'Change an order',
    description:
      'Moves the order through `placed` -> `approved` -> `completed`, or to `cancelled` from `placed` or `approved`, each step ' +
      'moving the pet in the same transaction (`completed`: `sold`; `cancelled`: `available`). Approving and completing need ' +
      '`orders:manage`; the order\'s own account may cancel it. Checked in this order: the path, the order\'s existence, `If-Match`, ' +
      'the body, the transition, the scope.',
    scope: 'orders:write',
    parameters: [...getOrderParameters, ...ifMatchParameters],
    requestBody: {
      description: 'At most 16 KiB, as `application/merge-patch+json` or `application/json`.',
      schema: 'OrderPatch',
      mediaTypes: ['application/merge-patch+json', 'application/json'],
    },
    responses: {
      200: { description: 'The whole order after the change (or as it is, for `{}` or its current status).', body: 'Order', headers: ['ETag'] },
      400: {
        description: 'A bad `orderId`, a malformed `If-Match`, an empty body or one that is not a JSON object, malformed JSON, or an invalid `status`.',
        codes: ['invalid_path', 'bad_request', 'invalid_body', 'invalid_json'],
      },
      404: { description: 'No order has this id, or it belongs to another account.', codes: ['order_not_found'] },
      409: { description: 'No such transition from the order\'s current status (the message names the ones allowed).', codes: ['invalid_transition'] },
      412: { description: "`If-Match` lists none of the order's current ETag: it was changed since. Nothing was changed.", codes: ['precondition_failed'] },
      413: { description: 'The body is larger than 16 KiB.', codes: ['payload_too_large'] },
      415: { description: 'The body is not sent as `application/merge-patch+json` or `application/json`.', codes: ['unsupported_media_type'] },
    },
  },
  {
    operationId: 'getInventory',
    method: 'GET',
    path: '/store/inventory',
    tag: 'store',
    summary: 'Count pets by status',
    description: 'How many pets have each status now, exactly. Its cost does not grow with the number of pets. Takes no query parameter.',
    scope: 'pets:read',
    responses: {
      200: { description: 'The counts, all three always present.', body: 'Inventory' },
      400: { description: 'A query parameter (it takes none).', codes: ['invalid_query', 'bad_request'] },
    },
  },
  {
    operationId: 'getOpenApiDocument',
    method: 'GET',
    path: '/openapi.json',
    tag: 'meta',
    summary: 'This document',
    description:
      'Needs no key (an unknown key still gets 200), but is rate limited like every request under the base address: ' +
      'by the key when a valid one is sent, else by the client address.',
    scope: null,
    responses: {
      200: {
        description: 'The OpenAPI 3.1 document.',
        body: {
          type: 'object',
          properties: { openapi: { type: 'string', maxLength: 16, pattern: '^3\\.1\\.[0-9]+$' }, info: { type: 'object' }, paths: { type: 'object' } },
          required: ['openapi', 'info', 'paths'],
        },
      },
    },
  },
];
