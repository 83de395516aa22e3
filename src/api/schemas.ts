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

export interface ObjectSchema {
  type: 'object';
  description?: string;
  properties: Readonly<Record<string, StringSchema | IntegerSchema>>;
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
  const properties: Record<string, StringSchema | IntegerSchema> = {};
  for (const [name, property] of Object.entries(schema.properties)) {
    if (property.default === undefined) {
      properties[name] = property;
      continue;
    }
    const { default: _default, ...rules } = property;
    properties[name] = rules;
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

/**
 * The most query parameters any operation takes: a query with more is refused before each of its
 * names is looked at (test/interface/input-complexity.test.ts checks this against every operation).
 */
export const MOST_QUERY_PARAMETERS = Math.max(listPetsParameters.length, listOrdersParameters.length);

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
} as const satisfies Readonly<Record<string, Schema | ArraySchema>>;
