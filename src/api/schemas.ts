/**
 * The service's schemas, as data. The validator interprets these objects and the OpenAPI
 * document is built from them, so a field is described exactly once. Each is `as const`, so that
 * a handler's validated input is typed from the very object that validates it (operation.ts).
 *
 * They are a subset of JSON Schema 2020-12 (what OpenAPI 3.1 uses) with one convention of ours:
 * `integer` with `format: int64` values arrive as `bigint` (see request-body.ts), because a
 * JSON number above 2^53 must keep its exact digits.
 */
import { PET_STATUSES } from '../storage/pets.ts';
import { ORDER_STATUSES } from '../storage/orders.ts';
import { EVENT_TYPES } from '../storage/events.ts';
import { ATTEMPTS_KEPT, MAX_WEBHOOKS_PER_ACCOUNT, WEBHOOK_ORDERS, WEBHOOK_STATUSES } from '../storage/webhooks.ts';
import { DELIVERY_ERRORS, MAX_URL_LENGTH } from '../webhooks/terms.ts';
import { MAX_RETRIES } from '../config.ts';

/** The int64 range, exact: bounds beyond 2^53 are bigints (the document writes their digits). */
export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;

/** The most pets one page of `GET /v1/pets` holds (the `limit` parameter's maximum). */
export const MAX_PAGE_SIZE = 100;

export interface StringSchema {
  type: 'string';
  description?: string;
  enum?: readonly string[];
  minLength?: number;
  /** Counted in Unicode code points, as JSON Schema does. */
  maxLength?: number;
  pattern?: string;
  default?: string;
  /** Annotation only (JSON Schema `examples`): shown in the OpenAPI document and on /docs. */
  examples?: readonly string[];
  /** The value may be null instead (`"type": ["string", "null"]` in the document); only in responses. */
  nullable?: true;
}

export interface IntegerSchema {
  type: 'integer';
  description?: string;
  /** int64 values arrive as bigints; int32 and unformatted ones as numbers. */
  format?: 'int32' | 'int64';
  minimum?: number | bigint;
  maximum?: number | bigint;
  default?: number;
}

/**
 * A JSON array property of a body: strings of `items`, `minItems` to `maxItems` of them, each at
 * most once when `uniqueItems`. No default: an omitted list is the handler's to fill in.
 */
export interface StringArraySchema {
  type: 'array';
  description?: string;
  items: StringSchema;
  minItems: number;
  maxItems: number;
  uniqueItems?: true;
  default?: undefined;
}

/** What a property of an object schema may be. */
export type PropertySchema = StringSchema | IntegerSchema | StringArraySchema;

export interface ObjectSchema {
  type: 'object';
  description?: string;
  properties: Readonly<Record<string, PropertySchema>>;
  required: readonly string[];
  additionalProperties: false;
}

export type Schema = StringSchema | IntegerSchema | ObjectSchema;

/** An array: a page in a response, or a comma-separated list in a query parameter. */
export interface ArraySchema {
  type: 'array';
  description?: string;
  items: Schema;
  maxItems: number;
}

/**
 * A query parameter that takes a comma-separated list (`?types=a,b`; OpenAPI's `style: form`,
 * `explode: false`): each item is checked against `items`.
 */
export interface ListSchema extends ArraySchema {
  items: StringSchema | IntegerSchema;
}

/** An OpenAPI parameter object; the validator reads `name`, `in`, `required` and `schema`. */
export interface Parameter {
  name: string;
  in: 'query' | 'path' | 'header';
  required?: boolean;
  description: string;
  schema: StringSchema | IntegerSchema | ListSchema;
}

export const petStatusSchema = {
  type: 'string',
  description: 'Availability of the animal.',
  enum: PET_STATUSES,
} as const satisfies StringSchema;

/**
 * 1 to 100 code points, at least one that is not whitespace (JavaScript's `\s`), no control
 * characters (C0, DEL, C1). Lone surrogates are refused for every string by the validator.
 */
export const petNameSchema = {
  type: 'string',
  description: "The animal's name: 1 to 100 characters, not only whitespace, no control characters.",
  minLength: 1,
  maxLength: 100,
  pattern: '^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$',
  examples: ['Rex'],
} as const satisfies StringSchema;

export const categoryIdSchema = {
  type: 'integer',
  format: 'int64',
  minimum: 1,
  maximum: INT64_MAX,
  description: 'Identifier of the category (1 to 9223372036854775807). Written as plain digits; exact above 2^53.',
} as const satisfies IntegerSchema;

export const petIdSchema = {
  type: 'integer',
  format: 'int64',
  minimum: 1,
  maximum: INT64_MAX,
  description: 'Unique identifier, assigned by the service on creation.',
} as const satisfies IntegerSchema;

export const newPetSchema = {
  type: 'object',
  description: 'A pet to create. Any other property (including id) is refused.',
  properties: {
    name: petNameSchema,
    categoryId: categoryIdSchema,
    status: { ...petStatusSchema, default: 'available' },
  },
  required: ['name', 'categoryId'],
  additionalProperties: false,
} as const satisfies ObjectSchema;

/**
 * The body of updatePet, a JSON merge patch (RFC 7396) of a pet, made from newPetSchema so that
 * each field's rules are written once: every property optional and without a default (an absent
 * field keeps its value). The property schemas admit no null, so no field can be removed, and
 * any other property (id included) is refused as in a creation.
 */
export const petPatchSchema = mergePatchOf(
  newPetSchema,
  'Changes to a pet as a JSON merge patch (RFC 7396): the fields sent replace the stored ones, the others are kept. ' +
    '`null` removes nothing and is refused, as is any other property (including id). `{}` changes nothing.',
);

/** The type of `mergePatchOf(schema)`: the same properties, none required, none with a default. */
type MergePatch<S extends ObjectSchema> = {
  type: 'object';
  description: string;
  properties: { readonly [K in keyof S['properties']]: Omit<S['properties'][K], 'default'> };
  required: readonly [];
  additionalProperties: false;
};

/**
 * An object schema as a merge patch of itself: none required, no defaults, and the very same
 * property objects, so a change to a field's rules reaches both (a property with a default is
 * copied without it).
 */
function mergePatchOf<S extends ObjectSchema>(schema: S, description: string): MergePatch<S> {
  const properties: Record<string, PropertySchema> = {};
  for (const [name, property] of Object.entries(schema.properties)) {
    if (property.default === undefined) {
      properties[name] = property;
      continue;
    }
    const { default: _default, ...rules } = property;
    properties[name] = rules as PropertySchema;
  }
  return { type: 'object', description, properties: properties as MergePatch<S>['properties'], required: [], additionalProperties: false };
}

export const petSchema = {
  type: 'object',
  description: 'An animal available for adoption.',
  properties: {
    id: petIdSchema,
    name: petNameSchema,
    categoryId: categoryIdSchema,
    status: petStatusSchema,
  },
  required: ['id', 'name', 'categoryId', 'status'],
  additionalProperties: false,
} as const satisfies ObjectSchema;

/** A page of `GET /v1/pets`. */
export const petsPageSchema = {
  type: 'array',
  description: 'Pets in id order.',
  items: petSchema,
  maxItems: MAX_PAGE_SIZE,
} as const satisfies ArraySchema;

export const listPetsParameters = [
  {
    name: 'limit',
    in: 'query',
    description: 'Maximum number of pets returned (decimal digits).',
    schema: { type: 'integer', format: 'int32', minimum: 1, maximum: MAX_PAGE_SIZE, default: 20 },
  },
  {
    name: 'status',
    in: 'query',
    description: 'Only pets with this status.',
    schema: petStatusSchema,
  },
  {
    name: 'cursor',
    in: 'query',
    description: 'Opaque position taken from a `Link: rel="next"` header.',
    schema: { type: 'string', minLength: 1, maxLength: 64 },
  },
] as const satisfies readonly Parameter[];

export const getPetParameters = [
  {
    name: 'petId',
    in: 'path',
    required: true,
    description: 'The identifier of the pet (an int64 in decimal).',
    // The whole int64 range: a well-formed id that no pet has is 404, not 400 (docs/api.md).
    schema: { type: 'integer', format: 'int64', minimum: INT64_MIN, maximum: INT64_MAX },
  },
] as const satisfies readonly Parameter[];

/**
 * The optional `Idempotency-Key` request header of createPet (docs/api.md, POST /v1/pets): a key
 * of 1 to 255 visible ASCII characters (`!` to `~`), sent bare or as a quoted string whose quotes
 * are not part of the key, so `""` is an empty key.
 */
export const createPetParameters = [
  {
    name: 'Idempotency-Key',
    in: 'header',
    description:
      'Makes a retry safe: the same key with the same body, by the same API key, within 24 h returns the first ' +
      'response (with `Idempotent-Replayed: true`) and creates nothing. 1 to 255 visible ASCII characters, bare or quoted.',
    schema: { type: 'string', minLength: 1, maxLength: 257, pattern: '^(?!""$)(?:[!-~]{1,255}|"[!-~]{1,255}")$' },
  },
] as const satisfies readonly Parameter[];

/**
 * The optional `If-Match` request header of updatePet and deletePet (docs/api.md). It is
 * parsed by src/http/if-match.ts (its grammar has no useful JSON Schema); described here once
 * for the OpenAPI document. Its length is bounded by the 16 KiB cap on all request headers.
 */
export const ifMatchParameters = [
  {
    name: 'If-Match',
    in: 'header',
    description:
      'Makes the change conditional: it is made only if the pet\'s current `ETag` is one of the listed entity tags (or `*`, ' +
      'any). Otherwise `412 precondition_failed` and nothing changes. Weak tags (`W/"..."`) never match; a malformed ' +
      'value is `400 bad_request`. Without it the change is unconditional.',
    schema: { type: 'string', maxLength: 16384 },
  },
] as const satisfies readonly Parameter[];

// --- Orders -----------------------------------------------------------------------------------

export const orderStatusSchema = {
  type: 'string',
  description: 'Where the order stands: `placed`, then `approved`, then `completed`; or `cancelled` from either of the first two.',
  enum: ORDER_STATUSES,
} as const satisfies StringSchema;

/** An RFC 3339 UTC instant with milliseconds, as the service writes them. */
const instantSchema = (description: string): StringSchema => ({
  type: 'string',
  description,
  minLength: 24,
  maxLength: 24,
  pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$',
  examples: ['2026-11-25T21:30:00.000Z'],
});

export const orderIdSchema = {
  type: 'integer',
  format: 'int64',
  minimum: 1,
  maximum: INT64_MAX,
  description: 'Unique identifier, assigned by the service: positive, increasing, never reused.',
} as const satisfies IntegerSchema;

export const orderSchema = {
  type: 'object',
  description: "One account's request to adopt one pet.",
  properties: {
    id: orderIdSchema,
    petId: { ...petIdSchema, description: 'The pet asked for.' },
    account: { type: 'string', description: 'The account of the key that placed it.', minLength: 6, maxLength: 100, pattern: '^acct_[0-9a-z]+$', examples: ['acct_5f0c2b7e9a1d4c36'] },
    status: orderStatusSchema,
    placedAt: instantSchema('When the order was placed.'),
    updatedAt: instantSchema('When the order last changed.'),
    expiresAt: {
      ...instantSchema(
        'While the order is `placed`: when its hold on the pet ends (`placedAt` plus the service\'s hold, 48 h by default). At that ' +
        'instant the service cancels it and the pet is available again, unless it was approved first. `null` in every other status.',
      ),
      nullable: true,
    },
  },
  required: ['id', 'petId', 'account', 'status', 'placedAt', 'updatedAt', 'expiresAt'],
  additionalProperties: false,
} as const satisfies ObjectSchema;

/** The body of placeOrder: the pet, with categoryId's rules (plain digits, 1 to int64 max). */
export const newOrderSchema = {
  type: 'object',
  description: 'An order for one pet. Any other property is refused.',
  properties: { petId: { ...categoryIdSchema, description: 'The pet to adopt (1 to 9223372036854775807, plain digits).' } },
  required: ['petId'],
  additionalProperties: false,
} as const satisfies ObjectSchema;

/** The body of updateOrder: a merge patch of the status only. */
export const orderPatchSchema = {
  type: 'object',
  description:
    'A JSON merge patch (RFC 7396) of the order\'s `status`: `approved`, `completed` or `cancelled`, as the transitions allow. ' +
    '`{}` or the current status changes nothing. `null` and any other property are refused.',
  properties: { status: orderStatusSchema },
  required: [],
  additionalProperties: false,
} as const satisfies ObjectSchema;

/** A page of `GET /v1/store/orders`. */
export const ordersPageSchema = {
  type: 'array',
  description: 'Orders in id order.',
  items: orderSchema,
  maxItems: MAX_PAGE_SIZE,
} as const satisfies ArraySchema;

export const inventorySchema: ObjectSchema = {
  type: 'object',
  description: 'How many pets have each status now.',
  properties: Object.fromEntries(PET_STATUSES.map((status) => [status, { type: 'integer', format: 'int64', minimum: 0, maximum: INT64_MAX, description: `Pets that are ${status}.` }])),
  required: PET_STATUSES,
  additionalProperties: false,
};

export const listOrdersParameters = [
  { ...listPetsParameters[0], description: 'Maximum number of orders returned (decimal digits).' },
  { name: 'status', in: 'query', description: 'Only orders with this status.', schema: orderStatusSchema },
  listPetsParameters[2],
] as const satisfies readonly Parameter[];

// --- Events -----------------------------------------------------------------------------------

export const eventTypeSchema = {
  type: 'string',
  description: 'What happened: a pet created, changed or deleted; an order placed, approved, completed or cancelled.',
  enum: EVENT_TYPES,
} as const satisfies StringSchema;

/** The longest wait of a long poll, in seconds. */
export const MAX_EVENT_WAIT_SECONDS = 30;

export const listEventsParameters = [
  {
    name: 'after',
    in: 'query',
    description: 'Only events with a greater id: the last id seen (decimal digits). Omitted: from the oldest event kept.',
    schema: { type: 'integer', format: 'int64', minimum: 0, maximum: INT64_MAX },
  },
  { ...listPetsParameters[0], description: 'Maximum number of events returned (decimal digits).' },
  {
    name: 'types',
    in: 'query',
    description: 'Only events of these types, comma-separated (`order.placed,order.cancelled`).',
    schema: { type: 'array', items: eventTypeSchema, maxItems: EVENT_TYPES.length },
  },
  {
    name: 'wait',
    in: 'query',
    description:
      'Seconds to wait, when no event is there to return yet, for one that the key may see to commit (answered within a second ' +
      'of it, on any instance); after that, `200 []`. 0 to 30, default 0 (answer at once).',
    schema: { type: 'integer', format: 'int32', minimum: 0, maximum: MAX_EVENT_WAIT_SECONDS, default: 0 },
  },
] as const satisfies readonly Parameter[];

/**
 * The optional `Last-Event-ID` request header of listEvents: where a stream resumes. Read by the
 * handler (src/api/events/handlers.ts), only for a stream; declared here so that the document
 * shows it and the input-complexity test measures it.
 */
export const lastEventIdParameters = [
  {
    name: 'Last-Event-ID',
    in: 'header',
    description:
      'With `Accept: text/event-stream`: the stream starts after this event id (wins over `after`); what an `EventSource` ' +
      'sends when it reconnects. 1 to 19 decimal digits; empty is as absent; anything else is `400 bad_request`. Ignored by a page.',
    schema: { type: 'string', maxLength: 19, pattern: '^[0-9]{0,19}$' },
  },
] as const satisfies readonly Parameter[];

/**
 * The stream's body, as the document describes a `text/event-stream` answer. Not a `string`
 * schema: a string has a bounded length (the OWASP ruleset requires one), and a stream has none.
 */
export const eventStreamSchema = {
  description:
    'Server-sent events, one per event the key may see, in id order: `id: <id>`, `event: <type>`, `data: <the event as JSON, ' +
    'as in a page>` and a blank line. A line starting with `:` (`: keep-alive`) is a comment, sent every 15 s of silence.',
} as const;

/** A reference to a component schema of the document. */
const componentRef = (name: string) => ({ $ref: `#/components/schemas/${name}` }) as const;

/** The component name of an event type's schema: `pet.created` is `PetCreatedEvent`. */
export const eventSchemaName = (type: string) => `${type.split('.').map((word) => word[0]!.toUpperCase() + word.slice(1)).join('')}Event`;

/** What each type of event carries as `data`: the resource after the change, or a deleted pet's id. */
const EVENT_DATA: Readonly<Record<(typeof EVENT_TYPES)[number], string>> = {
  'pet.created': 'Pet', 'pet.updated': 'Pet', 'pet.deleted': 'DeletedPet',
  'order.placed': 'Order', 'order.approved': 'Order', 'order.completed': 'Order', 'order.cancelled': 'Order',
};

/** The schema of one type of event, with its own `data`. */
function eventOfType(type: (typeof EVENT_TYPES)[number]) {
  return {
    type: 'object',
    description: `An event of type \`${type}\`.`,
    properties: {
      id: { type: 'integer', format: 'int64', minimum: 1, maximum: INT64_MAX, description: 'The event\'s position in the log: positive, increasing in commit order, never reused.' },
      type: { type: 'string', enum: [type], description: 'What happened.' },
      occurredAt: instantSchema('When the change committed.'),
      actor: {
        type: ['object', 'null'],
        description:
          'The account and the key whose request made the change; `null` for the service\'s own (an expired hold), and `null` to a reader ' +
          'who is neither of that account nor holds `orders:manage`.',
        properties: {
          account: orderSchema.properties.account,
          keyId: { type: 'string', description: 'The id of the key (never the key itself).', minLength: 5, maxLength: 100, pattern: '^key_[0-9a-z]+$', examples: ['key_92b5d313571fcf0a'] },
        },
        required: ['account', 'keyId'],
        additionalProperties: false,
      },
      data: { ...componentRef(EVENT_DATA[type]), description: type === 'pet.deleted' ? 'The id of the pet deleted.' : `The ${EVENT_DATA[type].toLowerCase()} after the change, as the API returns it.` },
    },
    required: ['id', 'type', 'occurredAt', 'actor', 'data'],
    additionalProperties: false,
  };
}

/**
 * The event schemas, written as JSON Schema (nested objects and a discriminated `oneOf`, which
 * only describe answers: no request is validated against them). Components of the document
 * beside SCHEMAS': `Event`, one schema per type, and `DeletedPet`.
 */
export const EVENT_SCHEMAS: Readonly<Record<string, object>> = {
  Event: {
    description: 'A change to a pet or an order, as the event log recorded it; `type` says which of the schemas below it is.',
    oneOf: EVENT_TYPES.map((type) => componentRef(eventSchemaName(type))),
    discriminator: { propertyName: 'type', mapping: Object.fromEntries(EVENT_TYPES.map((type) => [type, componentRef(eventSchemaName(type)).$ref])) },
  },
  ...Object.fromEntries(EVENT_TYPES.map((type) => [eventSchemaName(type), eventOfType(type)])),
  DeletedPet: {
    type: 'object',
    description: 'A pet that was deleted: its id only.',
    properties: { id: petIdSchema },
    required: ['id'],
    additionalProperties: false,
  },
};

/** A page of `GET /v1/events`. */
export const eventsPageSchema = {
  type: 'array',
  description: 'Events in id order.',
  items: componentRef('Event'),
  maxItems: MAX_PAGE_SIZE,
} as const;

/**
 * The most query parameters any operation takes: a query with more is refused before each of its
 * names is looked at (test/interface/input-complexity.test.ts checks this against every operation).
 */
export const MOST_QUERY_PARAMETERS = Math.max(listPetsParameters.length, listOrdersParameters.length, listEventsParameters.length);

export const getOrderParameters = [
  {
    name: 'orderId',
    in: 'path',
    required: true,
    description: 'The identifier of the order (an int64 in decimal).',
    // The whole int64 range: a well-formed id that no order has is 404, not 400.
    schema: { type: 'integer', format: 'int64', minimum: INT64_MIN, maximum: INT64_MAX },
  },
] as const satisfies readonly Parameter[];

/** The Idempotency-Key header of placeOrder: the same rules as createPet's, its own keys. */
export const placeOrderParameters = createPetParameters;

// --- Webhooks ---------------------------------------------------------------------------------

export const webhookIdSchema = {
  type: 'integer',
  format: 'int64',
  minimum: 1,
  maximum: INT64_MAX,
  description: 'Unique identifier, assigned by the service: positive, increasing, never reused.',
} as const satisfies IntegerSchema;

export const webhookUrlSchema = {
  type: 'string',
  description:
    'Where deliveries are POSTed: an absolute `https:` URL (`http:` only inside the networks the operator allows), at most ' +
    `${MAX_URL_LENGTH} characters, without user information or fragment. Its host must resolve only to public addresses: ` +
    'loopback, private, link-local, shared, unique local, multicast, documentation and every other special-purpose range are ' +
    'refused, however they are spelt, unless the operator allows them.',
  minLength: 1,
  maxLength: MAX_URL_LENGTH,
  examples: ['https://hooks.example.com/pets'],
} as const satisfies StringSchema;

export const webhookTypesSchema = {
  type: 'array',
  description: 'The types of event delivered, each at most once.',
  items: eventTypeSchema,
  minItems: 1,
  maxItems: EVENT_TYPES.length,
  uniqueItems: true,
} as const satisfies StringArraySchema;

export const webhookOrdersSchema = {
  type: 'string',
  description: 'Whose order events are delivered: `own`, the orders of the key\'s account; `all`, every order\'s (a key with `orders:manage` only).',
  enum: WEBHOOK_ORDERS,
} as const satisfies StringSchema;

export const webhookStatusSchema = {
  type: 'string',
  description: '`enabled`: events are delivered. `disabled`: none are, by request or after every attempt failed for 5 days; `enabled` again resumes with the events from then on.',
  enum: WEBHOOK_STATUSES,
} as const satisfies StringSchema;

export const newWebhookSchema = {
  type: 'object',
  description: 'An endpoint to deliver events to. Any other property is refused.',
  properties: {
    url: webhookUrlSchema,
    types: { ...webhookTypesSchema, description: `${webhookTypesSchema.description} Omitted means all ${EVENT_TYPES.length}, stored as that list.` },
    orders: { ...webhookOrdersSchema, default: 'own' },
  },
  required: ['url'],
  additionalProperties: false,
} as const satisfies ObjectSchema;

/** The body of updateWebhook: a merge patch of the fields a creation sets, and the status. */
export const webhookPatchSchema = mergePatchOf(
  { ...newWebhookSchema, properties: { ...newWebhookSchema.properties, types: webhookTypesSchema, status: webhookStatusSchema } },
  'Changes to a webhook as a JSON merge patch (RFC 7396): the fields sent replace the stored ones, the others are kept. ' +
    '`null` removes nothing and is refused, as is any other property. `{}` changes nothing.',
);

export const webhookSchema = {
  type: 'object',
  description: 'An endpoint of the key\'s account that events are delivered to. Its secret is shown only when it is created.',
  properties: {
    id: webhookIdSchema,
    url: webhookUrlSchema,
    types: webhookTypesSchema,
    orders: webhookOrdersSchema,
    status: webhookStatusSchema,
    createdAt: instantSchema('When the webhook was created.'),
  },
  required: ['id', 'url', 'types', 'orders', 'status', 'createdAt'],
  additionalProperties: false,
} as const satisfies ObjectSchema;

/** `whsec_` and the standard base64 of 32 bytes (webhooks/signature.ts). */
export const webhookSecretSchema = {
  type: 'string',
  description:
    'The key of the deliveries\' signatures (Standard Webhooks): `whsec_` and the base64 of 32 random bytes. Shown in this answer only ' +
    '(and in a replay of it under the same `Idempotency-Key`): keep it where the receiver can read it.',
  minLength: 50,
  maxLength: 50,
  pattern: '^whsec_[A-Za-z0-9+/]{43}=$',
  examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw2u1dObR0DVk='],
} as const satisfies StringSchema;

/** The answer of createWebhook: the webhook, and its secret last. */
export const createdWebhookSchema = {
  type: 'object',
  description: 'A webhook just created, with the secret that signs its deliveries (shown this once).',
  properties: { ...webhookSchema.properties, secret: webhookSecretSchema },
  required: [...webhookSchema.required, 'secret'],
  additionalProperties: false,
} as const satisfies ObjectSchema;

/** A page of `GET /v1/webhooks`: at most as many as an account may have. */
export const webhooksPageSchema = {
  type: 'array',
  description: 'Webhooks in id order.',
  items: webhookSchema,
  maxItems: MAX_PAGE_SIZE,
} as const satisfies ArraySchema;

export const webhookDeliverySchema = {
  type: 'object',
  description: 'One attempt to deliver an event to a webhook.',
  properties: {
    eventId: { type: 'integer', format: 'int64', minimum: 1, maximum: INT64_MAX, description: 'The event delivered (its `webhook-id`).' },
    attempt: { type: 'integer', format: 'int32', minimum: 1, maximum: MAX_RETRIES + 1, description: '1 for the first attempt at this event, then 2, 3 ...' },
    attemptedAt: instantSchema('When the attempt started.'),
    status: { type: ['integer', 'null'], format: 'int32', minimum: 100, maximum: 599, description: 'The endpoint\'s HTTP status (a `3xx` included), or `null` when none came.' },
    error: {
      type: ['string', 'null'],
      enum: [...DELIVERY_ERRORS, null],
      description:
        '`null` on success (a `2xx` within 10 s); else `timeout`, `connection_failed`, `address_refused` (the host resolved to an address ' +
        'not allowed), `redirect` (a `3xx`, never followed) or `http_status` (any other status).',
    },
    durationMs: { type: 'integer', format: 'int32', minimum: 0, maximum: 2_147_483_647, description: 'How long the attempt took, in milliseconds.' },
  },
  required: ['eventId', 'attempt', 'attemptedAt', 'status', 'error', 'durationMs'],
  additionalProperties: false,
} as const;

/** The answer of listWebhookDeliveries. */
export const webhookDeliveriesSchema = {
  type: 'array',
  description: `The webhook's newest attempts (at most ${ATTEMPTS_KEPT}), newest first.`,
  items: componentRef('WebhookDelivery'),
  maxItems: ATTEMPTS_KEPT,
} as const;

/** As petId: the whole int64 range, so that a well-formed id that no webhook of the account has is 404, not 400. */
export const webhookIdParameters = [
  { ...getPetParameters[0], name: 'webhookId', description: 'The identifier of the webhook (an int64 in decimal).' },
] as const satisfies readonly Parameter[];

export const listWebhooksParameters = [
  { ...listPetsParameters[0], description: `Maximum number of webhooks returned (decimal digits); an account has at most ${MAX_WEBHOOKS_PER_ACCOUNT}.` },
  listPetsParameters[2],
] as const satisfies readonly Parameter[];

/** The Idempotency-Key header of createWebhook: the same rules as createPet's, its own keys. */
export const createWebhookParameters = createPetParameters;

/** The webhook schemas written as JSON Schema (nullable integers and enums): components beside SCHEMAS'. */
export const WEBHOOK_SCHEMAS: Readonly<Record<string, object>> = {
  WebhookDelivery: webhookDeliverySchema,
};

/**
 * The component schemas of the OpenAPI document, by name: the table of operations refers to the
 * objects, and the document names each by its key here (and writes any other in place). The
 * Error schema is built from the error codes (openapi/json-schema.ts).
 */
export const SCHEMAS = {
  PetStatus: petStatusSchema,
  NewPet: newPetSchema,
  PetPatch: petPatchSchema,
  Pet: petSchema,
  Pets: petsPageSchema,
  OrderStatus: orderStatusSchema,
  NewOrder: newOrderSchema,
  OrderPatch: orderPatchSchema,
  Order: orderSchema,
  Orders: ordersPageSchema,
  Inventory: inventorySchema,
  NewWebhook: newWebhookSchema,
  WebhookPatch: webhookPatchSchema,
  Webhook: webhookSchema,
  CreatedWebhook: createdWebhookSchema,
  Webhooks: webhooksPageSchema,
} as const satisfies Readonly<Record<string, Schema | ArraySchema>>;
