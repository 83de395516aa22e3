/**
 * The operations of the API, as data: one entry per operation, keyed by its operationId, from
 * which the router (src/pipeline/routes.ts), the handlers' types and validators (operation.ts),
 * the OpenAPI document (openapi/document.ts) and, through it, the /docs page are built. An entry
 * refers to the schema objects of schemas.ts and to the headers of response-headers.ts, never to
 * a copy. Adding an operation means adding its entry here and its handler (docs/architecture.md,
 * "Adding an operation").
 *
 * What every operation answers whatever it does (401, 429, 500, 503, and the 408/431 the HTTP
 * server writes itself) and the headers on every answer are added by the document's builder.
 */
import { JSON_BODY, MERGE_PATCH_BODY } from '../http/request-body.ts';
import type { HandlerContext, HandlersOf } from './handler.ts';
import { deprecationHeaders, sunsetDay, type OperationSpec } from './operation.ts';
import {
  createPetParameters, eventsPageSchema, eventStreamSchema, getOrderParameters, getPetParameters, ifMatchParameters, inventorySchema, lastEventIdParameters, listEventsParameters, listOrdersParameters, listPetsParameters,
  newOrderSchema, newPetSchema, orderPatchSchema, orderSchema, ordersPageSchema, petPatchSchema, petSchema, petsPageSchema,
  placeOrderParameters, createdWebhookSchema, createWebhookParameters, listWebhooksParameters, newWebhookSchema, webhookDeliveriesSchema,
  webhookIdParameters, webhookPatchSchema, webhookSchema, webhooksPageSchema,
} from './schemas.ts';
import { MAX_WEBHOOKS_PER_ACCOUNT } from '../storage/webhooks.ts';

/** The groups of operations, as the document and /docs show them. */
export const TAGS = {
  pets: 'Animals available for adoption.',
  store: 'Orders to adopt pets, and the store\'s inventory.',
  events: 'The log of every change to pets and orders, to follow without polling everything.',
  webhooks: 'Endpoints of the account that the events it may see are POSTed to, signed, as they happen.',
  meta: 'This document.',
} as const;

export type Tag = keyof typeof TAGS;

/** The two answers of a change of a pet that is not there, or not in the state expected. */
const PET_CHANGE_REFUSALS = {
  404: { description: 'No pet has this id (it never existed, or it was deleted).', codes: ['pet_not_found'] },
  412: { description: "`If-Match` lists none of the pet's current ETag: it was changed since. Nothing was changed.", codes: ['precondition_failed'] },
} as const;

/** The answers of a webhook's operations to a path that names none of the account's webhooks. */
const WEBHOOK_NOT_FOUND = {
  404: { description: 'The account has no webhook with this id (it never had, it was deleted, or it is another account\'s).', codes: ['webhook_not_found'] },
} as const;

/** What a webhook's body may be refused for, in words shared by its creation and its change. */
const WEBHOOK_BODY_RULES =
  'invalid fields (the message names every one), or a `url` that is not allowed: not absolute, not `https:`, longer than 2,048 ' +
  'characters, with user information or a fragment, or whose host does not resolve or resolves to an address that is not public ' +
  '(the message says why)';

/** Hoisted from the table: the deprecated getPet names it as its successor, and listOrders as its model. */
const listPets = {
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
    200: { description: 'A page of pets.', content: { 'application/json': petsPageSchema }, headers: ['NextLink'] },
    400: { description: 'A bad, repeated or unknown query parameter; the message names it.', codes: ['invalid_query', 'bad_request'] },
  },
} as const satisfies OperationSpec<Tag>;

/**
 * `GET /v1/pets/{petId}` is deprecated since the users' text of version 1.0.0 (RFC 9745) and
 * sunsets on the second date (RFC 8594).
 */
const GET_PET_DEPRECATION = { announcedMs: Date.UTC(2025, 11, 5), sunsetMs: Date.UTC(2030, 11, 5), successor: listPets } as const;
const SUNSET_DAY = sunsetDay(GET_PET_DEPRECATION);
const LIST_PETS = `${listPets.method} ${listPets.path}`;

export const OPERATIONS = {
  listPets,
  createPet: {
    method: 'POST',
    path: '/pets',
    tag: 'pets',
    summary: 'Add a pet',
    description: 'Stores a pet and answers once it is durably stored.',
    scope: 'pets:write',
    parameters: createPetParameters,
    requestBody: { description: 'At most 16 KiB.', schema: newPetSchema, mediaTypes: JSON_BODY },
    replayable: true,
    responses: {
      201: { description: 'The created pet.', content: { 'application/json': petSchema }, headers: ['Location', 'ETag', 'Idempotent-Replayed'] },
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
  getPet: {
    method: 'GET',
    path: '/pets/{petId}',
    tag: 'pets',
    summary: 'Get a pet (deprecated)',
    description:
      `Deprecated: removed on ${SUNSET_DAY} (\`Sunset: ${deprecationHeaders(GET_PET_DEPRECATION).Sunset}\`); from then on it answers \`410 gone\`. ` +
      `Use \`${LIST_PETS}\` with the \`status\` filter instead.`,
    scope: 'pets:read',
    deprecated: GET_PET_DEPRECATION,
    parameters: getPetParameters,
    responses: {
      200: { description: 'The pet.', content: { 'application/json': petSchema }, headers: ['ETag'] },
      400: { description: '`petId` is not an int64 in decimal.', codes: ['invalid_path', 'bad_request'] },
      404: { description: 'No pet has this id.', codes: ['pet_not_found'] },
      410: { description: `The operation was removed on ${SUNSET_DAY}; use \`${LIST_PETS}\`.`, codes: ['gone'] },
    },
  },
  updatePet: {
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
      schema: petPatchSchema,
      mediaTypes: MERGE_PATCH_BODY,
    },
    responses: {
      200: { description: 'The whole pet after the change.', content: { 'application/json': petSchema }, headers: ['ETag'] },
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
  deletePet: {
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
  listOrders: {
    method: 'GET',
    path: '/store/orders',
    tag: 'store',
    summary: 'List orders',
    description:
      'Orders sorted by id, as a plain JSON array: the account\'s own, or every account\'s for a key with `orders:manage`. ' +
      `Paginated like \`${LIST_PETS}\`: a \`Link: <...>; rel="next"\` header gives the next page.`,
    scope: 'orders:write',
    parameters: listOrdersParameters,
    responses: {
      200: { description: 'A page of orders.', content: { 'application/json': ordersPageSchema }, headers: ['NextLink'] },
      400: { description: 'A bad, repeated or unknown query parameter; the message names it.', codes: ['invalid_query', 'bad_request'] },
    },
  },
  placeOrder: {
    method: 'POST',
    path: '/store/orders',
    tag: 'store',
    summary: 'Place an order',
    description:
      'Asks to adopt an available pet: in one transaction the pet becomes `pending` (its ETag changes) and the order is stored as ' +
      '`placed`, for the account of the key. At most one order per pet is open: of concurrent orders for one pet, exactly one ' +
      'is placed and the others are `409 pet_not_available`. A placed order holds its pet until its `expiresAt`, when the ' +
      'service cancels it and frees the pet. Answers once durably stored.',
    scope: 'orders:write',
    parameters: placeOrderParameters,
    requestBody: { description: 'At most 16 KiB.', schema: newOrderSchema, mediaTypes: JSON_BODY },
    replayable: true,
    responses: {
      201: { description: 'The placed order.', content: { 'application/json': orderSchema }, headers: ['Location', 'ETag', 'Idempotent-Replayed'] },
      400: {
        description: 'A bad `Idempotency-Key`, an empty body or one that is not a JSON object, malformed JSON, or an invalid `petId` (the message names every bad field).',
        codes: ['invalid_idempotency_key', 'invalid_body', 'invalid_json', 'bad_request'],
      },
      404: { description: 'No pet has this id (it never existed, or it was deleted).', codes: ['pet_not_found'] },
      409: {
        description:
          'The pet is not available (the message names its status); or the account already has as many open orders as it may ' +
          '(`MAX_OPEN_ORDERS_PER_ACCOUNT`, 3 by default; the message names the limit; keys with `orders:manage` are never refused ' +
          'for it), checked after the pet; or a request with this `Idempotency-Key` is still being processed.',
        codes: ['pet_not_available', 'too_many_open_orders', 'idempotency_key_in_flight'],
        headers: [{ optional: 'Retry-After' }],
      },
      413: { description: 'The body is larger than 16 KiB.', codes: ['payload_too_large'] },
      415: { description: 'The body is not sent as `Content-Type: application/json`.', codes: ['unsupported_media_type'] },
      422: { description: 'This `Idempotency-Key` was used with a different body.', codes: ['idempotency_key_reused'] },
    },
  },
  getOrder: {
    method: 'GET',
    path: '/store/orders/{orderId}',
    tag: 'store',
    summary: 'Get an order',
    description: 'An order of the key\'s account, or any order for a key with `orders:manage`; any other is `404`, so the answer never tells whether another account\'s order exists.',
    scope: 'orders:write',
    parameters: getOrderParameters,
    responses: {
      200: { description: 'The order.', content: { 'application/json': orderSchema }, headers: ['ETag'] },
      400: { description: '`orderId` is not an int64 in decimal.', codes: ['invalid_path', 'bad_request'] },
      404: { description: 'No order has this id, or it belongs to another account.', codes: ['order_not_found'] },
    },
  },
  updateOrder: {
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
      schema: orderPatchSchema,
      mediaTypes: MERGE_PATCH_BODY,
    },
    responses: {
      200: { description: 'The whole order after the change (or as it is, for `{}` or its current status).', content: { 'application/json': orderSchema }, headers: ['ETag'] },
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
  getInventory: {
    method: 'GET',
    path: '/store/inventory',
    tag: 'store',
    summary: 'Count pets by status',
    description: 'How many pets have each status now, exactly. Its cost does not grow with the number of pets. Takes no query parameter.',
    scope: 'pets:read',
    responses: {
      200: { description: 'The counts, all three always present.', content: { 'application/json': inventorySchema } },
      400: { description: 'A query parameter (it takes none).', codes: ['invalid_query', 'bad_request'] },
    },
  },
  listEvents: {
    method: 'GET',
    path: '/events',
    tag: 'events',
    summary: 'Follow the event log',
    description:
      'The events after `after`, in id order: every pet event, and the order events of the key\'s own account (of every account ' +
      'with `orders:manage`). Ids become visible in commit order, so a consumer that follows `Link: rel="next"` forever sees every ' +
      'event it may see exactly once, on any instance. With `wait`, an empty page waits for the next event. ' +
      'With `Accept: text/event-stream`, the answer is a live stream of the same events instead (server-sent events): it starts ' +
      'after `Last-Event-ID` (the header, which wins) or `after`, keeps `types`, ignores `limit` and `wait`, writes each event within ' +
      'a second of its commit and a `: keep-alive` comment every 15 s of silence, and ends when the key is revoked or expires or ' +
      'the server drains (reconnect with `Last-Event-ID`). At most 5 streams per key and 1,000 per instance. See docs/events.md.',
    scope: 'events:read',
    parameters: [...listEventsParameters, ...lastEventIdParameters],
    responses: {
      200: {
        description: 'A page of events (empty when none came within `wait`); or, asked with `Accept: text/event-stream`, the live stream.',
        content: { 'application/json': eventsPageSchema, 'text/event-stream': eventStreamSchema },
        // The page's Link, or the stream's X-Accel-Buffering: each is required of its own media type.
        headers: [{ optional: 'EventsLink' }, { optional: 'X-Accel-Buffering' }],
      },
      400: { description: 'A bad, repeated or unknown query parameter, or a `Last-Event-ID` that is not an id; the message names it.', codes: ['invalid_query', 'bad_request'] },
      410: {
        description: '`after` is below the highest id that retention deleted (`EVENTS_RETENTION_DAYS`): events after it may be gone. Start again from a full read of the pets and orders.',
        codes: ['cursor_expired'],
      },
      429: {
        description:
          'Rate limit exceeded, or this caller is temporarily banned (retry after `Retry-After`, with exponential backoff); or, for a ' +
          'stream, this key already has 5 streams open or this instance 1,000 (`too_many_streams`). A stream counts as one request, when it opens.',
        codes: ['rate_limited', 'temporarily_banned', 'too_many_streams'],
        headers: ['Retry-After'],
      },
    },
  },
  listWebhooks: {
    method: 'GET',
    path: '/webhooks',
    tag: 'webhooks',
    summary: 'List webhooks',
    description: `The account's webhooks, sorted by id, as a plain JSON array (at most ${MAX_WEBHOOKS_PER_ACCOUNT}). Paginated like \`${LIST_PETS}\`. Never shows a secret.`,
    scope: 'webhooks:manage',
    parameters: listWebhooksParameters,
    responses: {
      200: { description: 'A page of webhooks.', content: { 'application/json': webhooksPageSchema }, headers: ['NextLink'] },
      400: { description: 'A bad, repeated or unknown query parameter; the message names it.', codes: ['invalid_query', 'bad_request'] },
    },
  },
  createWebhook: {
    method: 'POST',
    path: '/webhooks',
    tag: 'webhooks',
    summary: 'Add a webhook',
    description:
      'Registers an endpoint of the key\'s account: every event the account may see, of the types listed, is POSTed to it from then on, ' +
      'signed with the secret of this answer (Standard Webhooks; see the `webhooks` of this document). The secret is shown here only. ' +
      `An account has at most ${MAX_WEBHOOKS_PER_ACCOUNT}. \`orders: "all"\` needs \`orders:manage\` too, decided once the body is valid. ` +
      'Answers once durably stored.',
    scope: 'webhooks:manage',
    parameters: createWebhookParameters,
    requestBody: { description: 'At most 16 KiB.', schema: newWebhookSchema, mediaTypes: JSON_BODY },
    replayable: true,
    responses: {
      201: { description: 'The webhook, and its secret (shown this once).', content: { 'application/json': createdWebhookSchema }, headers: ['Location', 'Idempotent-Replayed'] },
      400: {
        description: `A bad \`Idempotency-Key\`, an empty body or one that is not a JSON object, malformed JSON, ${WEBHOOK_BODY_RULES}.`,
        codes: ['invalid_idempotency_key', 'invalid_body', 'invalid_json', 'bad_request'],
      },
      409: {
        description: `The account already has ${MAX_WEBHOOKS_PER_ACCOUNT} webhooks (the message names the limit); or a request with this \`Idempotency-Key\` is still being processed.`,
        codes: ['too_many_webhooks', 'idempotency_key_in_flight'],
        headers: [{ optional: 'Retry-After' }],
      },
      413: { description: 'The body is larger than 16 KiB.', codes: ['payload_too_large'] },
      415: { description: 'The body is not sent as `Content-Type: application/json`.', codes: ['unsupported_media_type'] },
      422: { description: 'This `Idempotency-Key` was used with a different body.', codes: ['idempotency_key_reused'] },
    },
  },
  getWebhook: {
    method: 'GET',
    path: '/webhooks/{webhookId}',
    tag: 'webhooks',
    summary: 'Get a webhook',
    description: 'A webhook of the key\'s account, without its secret; another account\'s is `404`, so the answer never tells whether it exists.',
    scope: 'webhooks:manage',
    parameters: webhookIdParameters,
    responses: {
      200: { description: 'The webhook.', content: { 'application/json': webhookSchema } },
      400: { description: '`webhookId` is not an int64 in decimal.', codes: ['invalid_path', 'bad_request'] },
      ...WEBHOOK_NOT_FOUND,
    },
  },
  updateWebhook: {
    method: 'PATCH',
    path: '/webhooks/{webhookId}',
    tag: 'webhooks',
    summary: 'Change a webhook',
    description:
      'Applies a JSON merge patch (RFC 7396) of `url`, `types`, `orders` and `status`, with the rules of a creation, and answers once the ' +
      'change is durably stored. `status: "enabled"` resumes deliveries of a disabled webhook with the events from then on. ' +
      'Checked in this order: the path, the webhook\'s existence, the body, then the scope `orders: "all"` needs.',
    scope: 'webhooks:manage',
    parameters: webhookIdParameters,
    requestBody: {
      description: 'At most 16 KiB, as `application/merge-patch+json` or `application/json`.',
      schema: webhookPatchSchema,
      mediaTypes: MERGE_PATCH_BODY,
    },
    responses: {
      200: { description: 'The whole webhook after the change.', content: { 'application/json': webhookSchema } },
      400: {
        description: `A bad \`webhookId\`, an empty body or one that is not a JSON object, malformed JSON, ${WEBHOOK_BODY_RULES}.`,
        codes: ['invalid_path', 'bad_request', 'invalid_body', 'invalid_json'],
      },
      ...WEBHOOK_NOT_FOUND,
      413: { description: 'The body is larger than 16 KiB.', codes: ['payload_too_large'] },
      415: { description: 'The body is not sent as `application/merge-patch+json` or `application/json`.', codes: ['unsupported_media_type'] },
    },
  },
  deleteWebhook: {
    method: 'DELETE',
    path: '/webhooks/{webhookId}',
    tag: 'webhooks',
    summary: 'Remove a webhook',
    description: 'Removes the webhook with its pending deliveries and their log, once that is durably stored: nothing more is delivered to it.',
    scope: 'webhooks:manage',
    parameters: webhookIdParameters,
    responses: {
      204: { description: 'The webhook is gone. No body.' },
      400: { description: '`webhookId` is not an int64 in decimal.', codes: ['invalid_path', 'bad_request'] },
      ...WEBHOOK_NOT_FOUND,
    },
  },
  listWebhookDeliveries: {
    method: 'GET',
    path: '/webhooks/{webhookId}/deliveries',
    tag: 'webhooks',
    summary: 'A webhook\'s delivery attempts',
    description: 'The webhook\'s last 100 delivery attempts, newest first: which event, which attempt, when, what the endpoint answered and how long it took.',
    scope: 'webhooks:manage',
    parameters: webhookIdParameters,
    responses: {
      200: { description: 'The attempts (empty before the first).', content: { 'application/json': webhookDeliveriesSchema } },
      400: { description: '`webhookId` is not an int64 in decimal.', codes: ['invalid_path', 'bad_request'] },
      ...WEBHOOK_NOT_FOUND,
    },
  },
  getOpenApiDocument: {
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
        content: {
          'application/json': {
            type: 'object',
            properties: { openapi: { type: 'string', maxLength: 16, pattern: '^3\\.1\\.[0-9]+$' }, info: { type: 'object' }, paths: { type: 'object' } },
            required: ['openapi', 'info', 'paths'],
          },
        },
      },
    },
  },
} as const satisfies Readonly<Record<string, OperationSpec<Tag>>>;

/** The operationId of every operation. */
export type OperationId = keyof typeof OPERATIONS;

/** The handler of every operation, by operationId: one missing or misspelt fails the type check. */
export type Handlers = HandlersOf<typeof OPERATIONS>;

/** What the handler of operation `Id` receives (of either, for a union of ids). */
export type ContextOf<Id extends OperationId> = Id extends OperationId ? HandlerContext<(typeof OPERATIONS)[Id]> : never;
