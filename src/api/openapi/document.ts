/**
 * The OpenAPI 3.1 document of the service, built once at start from what the code itself uses:
 * the schema objects and parameter arrays the validator interprets (schemas.ts), the error
 * registry (api-error.ts) and the header values the pipeline sends. There is no second copy of a
 * field to keep in step: change a schema object and the validator and the document change together.
 *
 * The schemas of schemas.ts are already JSON Schema 2020-12, which OpenAPI 3.1 uses as is; the
 * one convention of ours (int64 values arrive as bigints) is invisible on the wire.
 */
import { MAX_ORIGIN_LENGTH, type AppEnv } from '../../config.ts';
import { ERROR_STATUS, type ErrorCode } from '../../http/api-error.ts';
import { COMMON_HEADERS } from '../../http/reply.ts';
import { INVALID_TOKEN_CHALLENGE, UNAUTHENTICATED_CHALLENGE } from '../../http/bearer.ts';
import { EXPOSED_HEADERS } from '../../http/cors.ts';
import { CLIENT_REQUEST_ID } from '../../http/request-id.ts';
import { DEPRECATION_HEADERS, SUNSET_MS } from '../pets/operations.ts';
import {
  createPetParameters,
  getPetParameters,
  ifMatchParameters,
  listPetsParameters,
  newPetSchema,
  petPatchSchema,
  petSchema,
  petsPageSchema,
  petStatusSchema,
  type IntegerSchema,
  type ObjectSchema,
  type Parameter,
  type Schema,
  type StringSchema,
} from '../schemas.ts';

export interface OpenApiOptions {
  /** The environment of the server serving the document: it lists that environment's address only. */
  appEnv: AppEnv;
  /** `PUBLIC_BASE_URL` (ends in `/v1`), or null when not configured. */
  publicBaseUrl: string | null;
  /** `STAGING_BASE_URL` (ends in `/v1`), or null when not configured. */
  stagingBaseUrl: string | null;
}

/** A JSON object of the document; the parts are plain data, built for JSON.stringify. */
export type JsonObject = { [key: string]: unknown };

export interface OpenApiDocument extends JsonObject {
  openapi: string;
  info: JsonObject & { title: string; version: string };
  servers: { url: string; description: string; 'x-internal': boolean }[];
  paths: Record<string, Record<string, JsonObject>>;
  components: Record<string, Record<string, JsonObject>>;
}

/** The interface version of the users' text ("Versioning"). */
export const API_VERSION = '1.0.0';

const ref = (kind: 'schemas' | 'headers' | 'responses', name: string) => ({ $ref: `#/components/${kind}/${name}` });

/**
 * `JSON.rawJSON` (ES2025, in Node 24, not yet in TypeScript's lib): JSON.stringify writes its
 * digits as they are, so an int64 bound such as 9223372036854775807 is exact in the document.
 */
const rawJson = (JSON as unknown as { rawJSON(text: string): object }).rawJSON;

/**
 * The document as served. Its int64 bounds are bigints (exact, and plain data for the /docs page
 * and structuredClone), which JSON.stringify alone refuses: they are written as their digits.
 */
export function serializeOpenApiDocument(document: OpenApiDocument): string {
  return JSON.stringify(document, (_key, value: unknown) => (typeof value === 'bigint' ? rawJson(String(value)) : value));
}

// --- Schemas ----------------------------------------------------------------------------------

/**
 * A schema object of schemas.ts as a JSON Schema. A string schema that shares the status enum
 * becomes a reference to the `PetStatus` component, keeping its own annotations (a default).
 */
function jsonSchema(schema: Schema): JsonObject {
  if (schema.type === 'string' && schema.enum !== undefined && schema.enum === petStatusSchema.enum) {
    const { type: _type, enum: _enum, ...annotations } = schema;
    return { ...ref('schemas', 'PetStatus'), ...annotations };
  }
  if (schema.type === 'object') {
    const properties: JsonObject = {};
    for (const [name, property] of Object.entries(schema.properties)) properties[name] = jsonSchema(property);
    return { ...schema, properties, required: [...schema.required] };
  }
  return schema.type === 'string' && schema.enum ? { ...schema, enum: [...schema.enum] } : { ...schema };
}

/**
 * A schema that is only ever a request body. Its defaults are said in words, not with the
 * `default` keyword: openapi-typescript 7 types a property with a default as always present
 * (right for responses, where the service filled it in) unless the schema is written inside the
 * request body, and a component schema is not.
 */
function requestSchema(schema: ObjectSchema): JsonObject {
  const properties: Record<string, StringSchema | IntegerSchema> = {};
  for (const [name, property] of Object.entries(schema.properties)) {
    if (property.default === undefined) {
      properties[name] = property;
      continue;
    }
    const { default: fallback, ...rest } = property;
    properties[name] = { ...rest, description: `${rest.description ?? ''} Omitted means \`${fallback}\`.`.trimStart() } as StringSchema | IntegerSchema;
  }
  return jsonSchema({ ...schema, properties });
}

function parameter(source: Parameter): JsonObject {
  return {
    name: source.name,
    in: source.in,
    // Path parameters are always required (OpenAPI 3.1, Parameter Object).
    ...(source.required || source.in === 'path' ? { required: true } : {}),
    description: source.description,
    schema: jsonSchema(source.schema),
  };
}

const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/**
 * An upper bound of an error message, in characters. Messages are short except those that name
 * every bad field of a request: each unknown body property or query parameter is named, so a
 * request of 16 KiB of two-character names provokes the longest (about 11 characters of message
 * per byte of query, 5 per byte of body: under 200,000). test/api/openapi-bounds.test.ts sends
 * those requests.
 */
export const MAX_ERROR_MESSAGE_LENGTH = 262_144;

const errorSchema = {
  type: 'object',
  description: 'Every error body: exactly these three properties.',
  properties: {
    code: { type: 'string', description: 'Machine-readable and permanent.', enum: ERROR_CODES },
    message: { type: 'string', description: 'For people; may change. It names every bad field of the request.', maxLength: MAX_ERROR_MESSAGE_LENGTH },
    status: { type: 'integer', format: 'int32', description: 'The HTTP status of the response.', minimum: 400, maximum: 599 },
  },
  required: ['code', 'message', 'status'],
  additionalProperties: false,
};

// --- Headers ----------------------------------------------------------------------------------

/** An integer header; every one fits the bounds of its format. */
const integerHeader = (description: string, format: 'int32' | 'int64', minimum: number, maximum: number) => ({
  description,
  required: true,
  schema: { type: 'integer', format, minimum, maximum },
});

/**
 * A key's numbers are positive safe integers (the keys command refuses larger ones, the limiter
 * throws on them), and so is every count of tokens.
 */
const MAX_TOKENS = Number.MAX_SAFE_INTEGER;
/** Retry-After is at most a day: a ban lasts at most 24 h, and one token of any bucket refills within its window. */
const MAX_RETRY_AFTER_SECONDS = 86_400;
/** Reset is a Unix time in seconds; 9999-12-31T23:59:59Z bounds any clock this service will run on. */
const MAX_UNIX_SECONDS = 253_402_300_799;
/** A rate-limit header of both buckets: two 16-digit counts and two short times, about 70 characters. */
const MAX_RATE_HEADER_LENGTH = 128;

/** Response headers, each described once; responses refer to them. */
const HEADERS = {
  'X-Request-Id': {
    description: "The client's X-Request-Id when it is 1 to 128 of `A-Z a-z 0-9 . _ : -`, else a generated one. On every response.",
    required: true,
    schema: { type: 'string', maxLength: 128, pattern: CLIENT_REQUEST_ID.source },
  },
  'Cache-Control': { description: 'On every response.', required: true, schema: { type: 'string', enum: [COMMON_HEADERS['Cache-Control']] } },
  'X-Content-Type-Options': {
    description: 'On every response.',
    required: true,
    schema: { type: 'string', enum: [COMMON_HEADERS['X-Content-Type-Options']] },
  },
  'X-RateLimit-Limit': integerHeader('Capacity of the binding bucket (the one with the fewest tokens left; the minute bucket on a tie).', 'int64', 1, MAX_TOKENS),
  'X-RateLimit-Remaining': integerHeader('Whole tokens left in the binding bucket after this request.', 'int64', 0, MAX_TOKENS),
  'X-RateLimit-Reset': integerHeader('Unix time in seconds (rounded up) at which the binding bucket is full again.', 'int64', 0, MAX_UNIX_SECONDS),
  'RateLimit-Policy': {
    description: 'Both buckets (draft-ietf-httpapi-ratelimit-headers): quota `q` per window `w` seconds.',
    required: true,
    schema: { type: 'string', maxLength: MAX_RATE_HEADER_LENGTH, pattern: '^"minute";q=[0-9]+;w=60, "day";q=[0-9]+;w=86400$' },
  },
  RateLimit: {
    description: 'Both buckets (draft-ietf-httpapi-ratelimit-headers): `r` tokens left, `t` seconds until the bucket is full.',
    required: true,
    schema: { type: 'string', maxLength: MAX_RATE_HEADER_LENGTH, pattern: '^"minute";r=[0-9]+;t=[0-9]+, "day";r=[0-9]+;t=[0-9]+$' },
  },
  'Retry-After': integerHeader('Whole seconds (at least 1) until a request would be accepted.', 'int32', 1, MAX_RETRY_AFTER_SECONDS),
  'WWW-Authenticate': {
    description: 'The Bearer challenge; `error="invalid_token"` when a key was sent but is not valid.',
    required: true,
    schema: { type: 'string', enum: [UNAUTHENTICATED_CHALLENGE, INVALID_TOKEN_CHALLENGE] },
  },
  Allow: {
    description: 'The methods of this path (`GET, HEAD, PATCH, DELETE` on a pet); HEAD wherever GET.',
    required: true,
    schema: { type: 'string', maxLength: 64, pattern: '^[A-Z]+(, [A-Z]+)*$' },
  },
  NextLink: {
    description: 'RFC 8288 `Link` to the next page, carrying the effective `limit`, the `status` filter and a `cursor`. Absent on the last page.',
    required: false,
    schema: { type: 'string', maxLength: 256, pattern: '^</v1/pets\\?[^>]*cursor=[A-Za-z0-9_-]+[^>]*>; rel="next"$' },
  },
  ETag: {
    description:
      "The pet's entity tag: a strong validator (RFC 9110, section 8.8.3), opaque, that changes with every change to the pet. " +
      'Send it in `If-Match` to change or delete the pet only if nobody changed it since.',
    required: true,
    schema: { type: 'string', pattern: '^"[!#-~]*"$', maxLength: 64 },
  },
  Location: {
    description: 'The created pet.',
    required: true,
    // `/v1/pets/` and at most 19 digits.
    schema: { type: 'string', maxLength: 28, pattern: '^/v1/pets/[1-9][0-9]*$' },
  },
  'Idempotent-Replayed': {
    description: 'Present when this is the stored first response to the same `Idempotency-Key` and body.',
    required: false,
    schema: { type: 'string', enum: ['true'] },
  },
  Deprecation: {
    description: 'RFC 9745: this operation is deprecated, since the given Unix time.',
    required: true,
    schema: { type: 'string', enum: [DEPRECATION_HEADERS.Deprecation] },
  },
  Sunset: {
    description: 'RFC 8594: when this operation stops working (it then answers 410).',
    required: true,
    schema: { type: 'string', enum: [DEPRECATION_HEADERS.Sunset] },
  },
  SuccessorLink: {
    description: 'RFC 8288 `Link` to the operation that replaces this one.',
    required: true,
    schema: { type: 'string', enum: [DEPRECATION_HEADERS.Link] },
  },
  // CORS (CONTRACT.md, "Browsers"): only with CORS_ALLOWED_ORIGINS set, hence never required.
  'Access-Control-Allow-Origin': {
    description:
      "The request's `Origin` when CORS_ALLOWED_ORIGINS allows it, or `*` when that setting is `*`; then a page of that origin may read the answer. " +
      'On the answers the HTTP server writes itself (408, 431, a malformed request, too many connections) only with `*`.',
    required: false,
    schema: { type: 'string', maxLength: MAX_ORIGIN_LENGTH, pattern: '^(\\*|https?://[^/]+)$' },
  },
  'Access-Control-Expose-Headers': {
    description: 'With `Access-Control-Allow-Origin`: the response headers a page may read.',
    required: false,
    schema: { type: 'string', enum: [EXPOSED_HEADERS.join(', ')] },
  },
  Vary: {
    description: 'With CORS_ALLOWED_ORIGINS set: the answer depends on the `Origin` request header.',
    required: false,
    schema: { type: 'string', enum: ['Origin'] },
  },
} as const;

type HeaderName = keyof typeof HEADERS;
/** The header names on the wire of the two `Link` components. */
const WIRE_NAME: Partial<Record<HeaderName, string>> = { NextLink: 'Link', SuccessorLink: 'Link' };

/** How a response uses a header: as described, or optional where the component says required. */
type HeaderUse = HeaderName | { optional: HeaderName };

/**
 * A response's headers. A header that may be absent is written out in place rather than as a
 * reference: openapi-typescript 7 types a referenced header as always present, whatever the
 * component's `required` says, while it reads `required` on a header written in place.
 */
function headers(uses: readonly HeaderUse[]): JsonObject {
  const described: JsonObject = {};
  for (const use of [...uses, ...CORS]) {
    const name = typeof use === 'string' ? use : use.optional;
    const header = HEADERS[name];
    described[WIRE_NAME[name] ?? name] = typeof use !== 'string' ? { ...header, required: false } : header.required ? ref('headers', name) : header;
  }
  return described;
}

const optional = (names: readonly HeaderName[]): HeaderUse[] => names.map((name) => ({ optional: name }));

/** On every response, including the ones Node writes before the pipeline runs (408, 431). */
const EVERY: readonly HeaderName[] = ['X-Request-Id', 'Cache-Control', 'X-Content-Type-Options'];
/** On every response of a `/v1` request once the caller is limited (CONTRACT.md, "Rate limits"). */
const RATE: readonly HeaderName[] = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit'];
const DEPRECATION: readonly HeaderName[] = ['Deprecation', 'Sunset', 'SuccessorLink'];
/** On any response, every one of them declared, when CORS_ALLOWED_ORIGINS is set. */
const CORS: readonly HeaderName[] = ['Access-Control-Allow-Origin', 'Access-Control-Expose-Headers', 'Vary'];

// --- Responses --------------------------------------------------------------------------------

const json = (schema: JsonObject) => ({ 'application/json': { schema } });

/**
 * An error response: the Error schema, narrowed to the codes this response can carry. A code
 * with another status is a programmer error, thrown at start.
 */
function errorResponse(status: number | readonly number[], description: string, codes: readonly ErrorCode[], uses: readonly HeaderUse[]): JsonObject {
  const statuses = typeof status === 'number' ? [status] : status;
  for (const code of codes) {
    if (!statuses.includes(ERROR_STATUS[code])) throw new Error(`error code ${code} is not a ${statuses.join(' or ')}`);
  }
  // The Error schema bounds `status` already; this narrows it to the codes of each status.
  const narrowing = (one: number) => ({
    type: 'object',
    properties: { code: { type: 'string', enum: codes.filter((code) => ERROR_STATUS[code] === one) }, status: { const: one } },
  });
  return {
    description: `${description} Codes: ${codes.map((code) => `\`${code}\``).join(', ')}.`,
    headers: headers(uses),
    content: json({ allOf: [ref('schemas', 'Error'), statuses.length === 1 ? narrowing(statuses[0]!) : { oneOf: statuses.map(narrowing) }] }),
  };
}

const codesOf = (status: number) => ERROR_CODES.filter((code) => ERROR_STATUS[code] === status);

/** A 500 may come before the caller was limited, so the rate-limit headers are optional. */
function internalError(extra: readonly HeaderName[] = []): JsonObject {
  return errorResponse(500, 'An unexpected error; the body never carries detail.', codesOf(500), [...EVERY, ...optional([...RATE, ...extra])]);
}

/** A /v1 request is limited before it learns that the server is shutting down or cannot write. */
function unavailable(extra: readonly HeaderName[] = []): JsonObject {
  return errorResponse(
    503,
    'The server is shutting down (retry on a new connection), or cannot store data right now (retry after `Retry-After`).',
    codesOf(503),
    [...EVERY, ...RATE, ...optional(['Retry-After', ...extra])],
  );
}

/**
 * Error responses that read the same on every operation, by name and status. NotFound and
 * MethodNotAllowed belong to no operation: they answer paths and methods that have none.
 */
const SHARED_RESPONSES = {
  Unauthorized: [
    401,
    errorResponse(401, 'No API key, or one that is unknown, revoked or expired.', codesOf(401), [...EVERY, ...RATE, 'WWW-Authenticate']),
  ],
  NotFound: [
    404,
    errorResponse(404, 'No such path: any path under the base address that no operation has.', ['not_found'], [...EVERY, ...RATE]),
  ],
  MethodNotAllowed: [
    405,
    errorResponse(405, 'The path exists, but not with this method: any method that no operation of the path has.', ['method_not_allowed'], [
      ...EVERY,
      ...RATE,
      'Allow',
    ]),
  ],
  // Written by the HTTP server itself before the request reaches the limiter, so without the
  // rate-limit headers that every response of the API carries: `default`, the responses no
  // operation lists, rather than a 4XX that would promise them.
  AnsweredByServer: [
    'default',
    errorResponse([408, 431], 'The HTTP server answered before the request reached the API: it did not arrive in time (408), or its headers are larger than 16 KiB (431). The connection is closed.', [...codesOf(408), ...codesOf(431)], EVERY),
  ],
  TooManyRequests: [
    429,
    errorResponse(
      429,
      'Rate limit exceeded, or this caller is temporarily banned for repeating requests after 429s. Retry after `Retry-After`, with exponential backoff.',
      codesOf(429),
      [...EVERY, ...RATE, 'Retry-After'],
    ),
  ],
  InternalError: [500, internalError()],
  NotImplemented: [501, errorResponse(501, 'This operation is not available in this version.', codesOf(501), [...EVERY, ...RATE])],
  Unavailable: [503, unavailable()],
} as const satisfies Record<string, readonly [number | 'default', JsonObject]>;

type SharedResponse = keyof typeof SHARED_RESPONSES;

/** References to shared responses, keyed by status as an operation's `responses` are. */
function shared(...names: SharedResponse[]): JsonObject {
  return Object.fromEntries(names.map((name) => [String(SHARED_RESPONSES[name][0]), ref('responses', name)]));
}

/** What every API operation can answer whatever it does. */
const EVERY_OPERATION: SharedResponse[] = ['Unauthorized', 'TooManyRequests', 'AnsweredByServer', 'InternalError', 'Unavailable'];

const SUNSET = new Date(SUNSET_MS);

/** The answers of updatePet and deletePet when the pet is not there or not in the state expected. */
const petChangeRefusals = {
  404: errorResponse(404, 'No pet has this id (it never existed, or it was deleted).', ['pet_not_found'], [...EVERY, ...RATE]),
  412: errorResponse(412, "`If-Match` lists none of the pet's current ETag: it was changed since. Nothing was changed.", codesOf(412), [...EVERY, ...RATE]),
};

// --- The document -----------------------------------------------------------------------------

/**
 * The server's own base address only (issue #15): production lists `PUBLIC_BASE_URL`, staging
 * `STAGING_BASE_URL`, each falling back to `/v1` on the server that serves the document when
 * unset. Development always lists that relative `/v1`: a client generated from a development
 * server, or a key pasted into its reference page, must never be sent to production.
 * `x-internal: false` (OWASP API9): each is for the API's clients, not only for ourselves.
 */
function servers({ appEnv, publicBaseUrl, stagingBaseUrl }: OpenApiOptions): OpenApiDocument['servers'] {
  if (appEnv === 'production' && publicBaseUrl !== null) return [{ url: publicBaseUrl, description: 'Production', 'x-internal': false }];
  if (appEnv === 'staging' && stagingBaseUrl !== null) return [{ url: stagingBaseUrl, description: 'Staging', 'x-internal': false }];
  // Each description names its environment in terms the OWASP ruleset knows (API9: "local").
  const description =
    appEnv === 'production' ? 'This production server (PUBLIC_BASE_URL is not set)'
    : appEnv === 'staging' ? 'This staging server (STAGING_BASE_URL is not set)'
    : 'This local development server';
  return [{ url: '/v1', description, 'x-internal': false }];
}

/** Builds the document; serialise it once at start (serializeOpenApiDocument). */
export function buildOpenApiDocument(options: OpenApiOptions): OpenApiDocument {
  const sunsetDay = SUNSET.toISOString().slice(0, 10);
  return {
    openapi: '3.1.1',
    info: {
      title: 'Animal adoption store',
      version: API_VERSION,
      description:
        'Browse and manage animals available for adoption. Every operation takes an API key as `Authorization: Bearer <key>`. ' +
        'Every error body is the `Error` schema. Outside this API, `GET /healthz` (at the root, not under `/v1`) answers ' +
        '`200 {"status":"ok"}` without a key, for readiness probes.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: servers(options),
    security: [{ bearerAuth: [] }],
    tags: [
      { name: 'pets', description: 'Animals available for adoption.' },
      { name: 'store', description: 'Store orders.' },
      { name: 'meta', description: 'This document.' },
    ],
    paths: {
      '/pets': {
        get: {
          operationId: 'listPets',
          tags: ['pets'],
          summary: 'List pets',
          description:
            'Pets sorted by id, as a plain JSON array. When more pets follow, a `Link: <...>; rel="next"` header gives the next page; ' +
            'following it from the first page visits every matching pet exactly once.',
          parameters: listPetsParameters.map(parameter),
          responses: {
            200: { description: 'A page of pets.', headers: headers([...EVERY, ...RATE, 'NextLink']), content: json(ref('schemas', 'Pets')) },
            400: errorResponse(400, 'A bad, repeated or unknown query parameter; the message names it.', ['invalid_query', 'bad_request'], [...EVERY, ...RATE]),
            ...shared(...EVERY_OPERATION),
          },
        },
        post: {
          operationId: 'createPet',
          tags: ['pets'],
          summary: 'Add a pet',
          description: 'Stores a pet and answers once it is durably stored.',
          parameters: createPetParameters.map(parameter),
          requestBody: { required: true, description: 'At most 16 KiB.', content: json(ref('schemas', 'NewPet')) },
          responses: {
            201: {
              description: 'The created pet.',
              headers: headers([...EVERY, ...RATE, 'Location', 'ETag', 'Idempotent-Replayed']),
              content: json(ref('schemas', 'Pet')),
            },
            400: errorResponse(
              400,
              'A bad `Idempotency-Key`, an empty body or one that is not a JSON object, malformed JSON, or invalid fields (the message names every one).',
              ['invalid_idempotency_key', 'invalid_body', 'invalid_json', 'bad_request'],
              [...EVERY, ...RATE],
            ),
            409: errorResponse(409, 'A request with this `Idempotency-Key` is still being processed.', codesOf(409), [...EVERY, ...RATE, 'Retry-After']),
            413: errorResponse(413, 'The body is larger than 16 KiB.', codesOf(413), [...EVERY, ...RATE]),
            415: errorResponse(415, 'The body is not sent as `Content-Type: application/json`.', codesOf(415), [...EVERY, ...RATE]),
            422: errorResponse(422, 'This `Idempotency-Key` was used with a different body.', codesOf(422), [...EVERY, ...RATE]),
            ...shared(...EVERY_OPERATION),
            // A replay returns the first response, whatever the operation answered (CONTRACT.md).
            500: internalError(['Idempotent-Replayed']),
            503: unavailable(['Idempotent-Replayed']),
          },
        },
      },
      '/pets/{petId}': {
        get: {
          operationId: 'getPet',
          tags: ['pets'],
          summary: 'Get a pet (deprecated)',
          description:
            `Deprecated: removed on ${sunsetDay} (\`Sunset: ${DEPRECATION_HEADERS.Sunset}\`); from then on it answers \`410 gone\`. ` +
            'Use `GET /pets` with the `status` filter instead.',
          deprecated: true,
          parameters: getPetParameters.map(parameter),
          responses: {
            200: { description: 'The pet.', headers: headers([...EVERY, ...RATE, ...DEPRECATION, 'ETag']), content: json(ref('schemas', 'Pet')) },
            400: errorResponse(400, '`petId` is not an int64 in decimal.', ['invalid_path', 'bad_request'], [...EVERY, ...RATE, ...DEPRECATION]),
            404: errorResponse(404, 'No pet has this id.', ['pet_not_found'], [...EVERY, ...RATE, ...DEPRECATION]),
            410: errorResponse(410, `The operation was removed on ${sunsetDay}; use \`GET /pets\`.`, codesOf(410), [...EVERY, ...RATE, ...DEPRECATION]),
            ...shared(...EVERY_OPERATION),
            // Once routed, a 500 carries the deprecation headers too; before routing it cannot.
            500: internalError(DEPRECATION),
          },
        },
        patch: {
          operationId: 'updatePet',
          tags: ['pets'],
          summary: 'Change a pet',
          description:
            'Applies a JSON merge patch (RFC 7396) of `name`, `categoryId` and `status` and answers once the change is durably stored. ' +
            'Any status may change to any other. Checked in this order: the path, the pet\'s existence, `If-Match`, then the body.',
          parameters: [...getPetParameters, ...ifMatchParameters].map(parameter),
          requestBody: {
            required: true,
            description: 'At most 16 KiB, as `application/merge-patch+json` or `application/json`.',
            content: { 'application/merge-patch+json': { schema: ref('schemas', 'PetPatch') }, ...json(ref('schemas', 'PetPatch')) },
          },
          responses: {
            200: { description: 'The whole pet after the change.', headers: headers([...EVERY, ...RATE, 'ETag']), content: json(ref('schemas', 'Pet')) },
            400: errorResponse(
              400,
              'A bad `petId`, a malformed `If-Match`, an empty body or one that is not a JSON object, malformed JSON, or invalid fields (the message names every one).',
              ['invalid_path', 'bad_request', 'invalid_body', 'invalid_json'],
              [...EVERY, ...RATE],
            ),
            ...petChangeRefusals,
            413: errorResponse(413, 'The body is larger than 16 KiB.', codesOf(413), [...EVERY, ...RATE]),
            415: errorResponse(415, 'The body is not sent as `application/merge-patch+json` or `application/json`.', codesOf(415), [...EVERY, ...RATE]),
            ...shared(...EVERY_OPERATION),
          },
        },
        delete: {
          operationId: 'deletePet',
          tags: ['pets'],
          summary: 'Remove a pet',
          description:
            'Removes the pet from every list and lookup, once that is durably stored; its id is never used again. ' +
            'Checked in this order: the path, the pet\'s existence, `If-Match`.',
          parameters: [...getPetParameters, ...ifMatchParameters].map(parameter),
          responses: {
            204: { description: 'The pet is gone. No body.', headers: headers([...EVERY, ...RATE]) },
            400: errorResponse(400, 'A bad `petId` or a malformed `If-Match`.', ['invalid_path', 'bad_request'], [...EVERY, ...RATE]),
            ...petChangeRefusals,
            ...shared(...EVERY_OPERATION),
          },
        },
      },
      '/store/orders': {
        get: {
          operationId: 'listOrders',
          tags: ['store'],
          summary: 'List store orders',
          description: 'Exists, is authenticated and rate limited, and is not implemented in this version.',
          responses: shared('NotImplemented', ...EVERY_OPERATION),
        },
      },
      '/openapi.json': {
        get: {
          operationId: 'getOpenApiDocument',
          tags: ['meta'],
          summary: 'This document',
          description:
            'Needs no key (an unknown key still gets 200), but is rate limited like every request under the base address: ' +
            'by the key when a valid one is sent, else by the client address.',
          // Optional authentication: anonymous, or a bearer key that decides the rate limit.
          security: [{}, { bearerAuth: [] }],
          responses: {
            200: {
              description: 'The OpenAPI 3.1 document.',
              headers: headers([...EVERY, ...RATE]),
              content: json({
                type: 'object',
                properties: { openapi: { type: 'string', maxLength: 16, pattern: '^3\\.1\\.[0-9]+$' }, info: { type: 'object' }, paths: { type: 'object' } },
                required: ['openapi', 'info', 'paths'],
              }),
            },
            ...shared('TooManyRequests', 'AnsweredByServer', 'InternalError', 'Unavailable'),
          },
        },
      },
    },
    components: {
      schemas: {
        PetStatus: { ...petStatusSchema, enum: [...petStatusSchema.enum!] },
        NewPet: requestSchema(newPetSchema),
        PetPatch: requestSchema(petPatchSchema),
        Pet: jsonSchema(petSchema),
        Pets: { ...petsPageSchema, items: ref('schemas', 'Pet') },
        Error: errorSchema,
      },
      // Only the headers that are always present when described: the others are written in place.
      // The CORS headers too, so that a client can find them among the components.
      headers: Object.fromEntries(Object.entries(HEADERS).filter(([name, header]) => header.required || CORS.includes(name as HeaderName))),
      responses: Object.fromEntries(Object.entries(SHARED_RESPONSES).map(([name, [, response]]) => [name, response])),
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'API key',
          description: 'An API key (`pk_live_...` in production, `pk_test_...` elsewhere) as `Authorization: Bearer <key>`.',
        },
      },
    },
  };
}
