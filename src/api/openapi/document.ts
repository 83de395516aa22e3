/**
 * The OpenAPI 3.1 document of the service, built once at start from what the code itself uses:
 * the table of operations (../operations.ts), the schema objects and parameter arrays the
 * validator interprets (../schemas.ts, whose SCHEMAS names the components), the error registry
 * (api-error.ts) and the header values the pipeline sends. There is no second copy of a field or
 * an operation to keep in step.
 */
import type { AppEnv } from '../../config.ts';
import { SCOPE_MEANINGS, SCOPES } from '../../keys/scopes.ts';
import { BASE_PATH, deprecationHeaders, type OperationSpec, type OperationTable, type ResponseSpec } from '../operation.ts';
import { OPERATIONS, TAGS } from '../operations.ts';
import { HEADERS, type HeaderName, type HeaderSubject, type HeaderUse } from '../response-headers.ts';
import { EVENT_SCHEMAS, SCHEMAS, WEBHOOK_SCHEMAS, type ArraySchema, type ObjectSchema, type Schema } from '../schemas.ts';
import { ATTEMPT_DEADLINE_MS } from '../../webhooks/attempt.ts';
import { CORS, DEPRECATION, EVERY, headers, RATE } from './headers.ts';
import { errorSchema, jsonSchema, parameter, ref, requestSchema, type JsonObject } from './json-schema.ts';
import { errorResponse, EVERY_OPERATION, forbidden, internalError, shared, SHARED_RESPONSES, unavailable, type SharedResponse } from './responses.ts';

export type { JsonObject } from './json-schema.ts';

export interface OpenApiOptions {
  /** The environment of the server serving the document: it lists that environment's address only. */
  appEnv: AppEnv;
  /** `PUBLIC_BASE_URL` (ends in `/v1`), or null when not configured. */
  publicBaseUrl: string | null;
  /** `STAGING_BASE_URL` (ends in `/v1`), or null when not configured. */
  stagingBaseUrl: string | null;
}

export interface OpenApiDocument extends JsonObject {
  openapi: string;
  info: JsonObject & { title: string; version: string };
  servers: { url: string; description: string; 'x-internal': boolean }[];
  paths: Record<string, Record<string, JsonObject>>;
  webhooks: Record<string, Record<string, JsonObject>>;
  components: Record<string, Record<string, JsonObject>>;
}

/**
 * The interface version: 1.0.0 was the pets catalogue; 1.1.0 added changing and removing pets;
 * 1.2.0 adoption (accounts, scopes, orders, the inventory); 1.3.0 holds that expire, a cap of open
 * orders per account, and least privilege for keys. Each kept every earlier answer but where it
 * said otherwise: `GET /v1/store/orders` answered 501 before 1.2.0, and 1.3.0 cancels placed
 * orders whose hold ended and refuses an account's placement over the cap.
 */
export const API_VERSION = '1.3.0';

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

// --- Operations -------------------------------------------------------------------------------

/** The component names of the schema objects of SCHEMAS: a schema the table refers to by one of these is a `$ref`. */
const COMPONENT_NAMES = new Map<unknown, string>(Object.entries(SCHEMAS).map(([name, schema]) => [schema, name]));

/** A schema the table refers to: a reference to its component, or the schema written in place. */
function schemaOrRef(schema: object): JsonObject {
  const name = COMPONENT_NAMES.get(schema);
  return name === undefined ? { ...schema } : ref('schemas', name);
}

/** One answer of an operation: a success with its body, or an error narrowed to its codes. */
function response(spec: OperationSpec, subject: HeaderSubject, status: number, { description, content, codes, headers: own = [] }: ResponseSpec): JsonObject {
  // Once routed, every answer of a deprecated operation carries the deprecation headers.
  const uses: HeaderUse[] = [...EVERY, ...RATE, ...(spec.deprecated ? DEPRECATION : []), ...own];
  if (codes !== undefined) return errorResponse(status, description, codes, uses, subject);
  const described: JsonObject = { description, headers: headers(uses, subject) };
  if (content !== undefined) described.content = Object.fromEntries(Object.entries(content).map(([type, schema]) => [type, { schema: schemaOrRef(schema) }]));
  return described;
}

/** Every answer of an operation: its own, then the shared ones, then the variants it needs. */
function responses(spec: OperationSpec, subject: HeaderSubject): JsonObject {
  const own = Object.entries(spec.responses).map(([status, answer]) => [status, response(spec, subject, Number(status), answer)]);
  // The document itself needs no key, so it never answers 401.
  const every: SharedResponse[] = spec.scope === null ? EVERY_OPERATION.filter((name) => name !== 'Unauthorized') : [...EVERY_OPERATION, 'Forbidden'];
  // An answer of its own (the feed's 429, with the streams' cap) replaces the shared one of its status.
  const common = every.filter((name) => !(String(SHARED_RESPONSES[name][0]) in spec.responses));
  const variants: JsonObject = {};
  // A replay returns the first response, whatever the operation answered.
  const replayed: HeaderName[] = spec.replayable ? ['Idempotent-Replayed'] : [];
  // Once routed, a 500 carries the deprecation headers too; before routing it cannot.
  const extra500 = [...(spec.deprecated ? DEPRECATION : []), ...replayed];
  if (extra500.length > 0) variants[500] = internalError(extra500, subject);
  // So does a 403, which comes after routing.
  if (spec.deprecated && spec.scope !== null) variants[403] = forbidden(DEPRECATION, subject);
  if (replayed.length > 0) variants[503] = unavailable(replayed, subject);
  return {
    ...Object.fromEntries(own),
    ...shared(...(spec.notImplemented ? ['NotImplemented' as const] : []), ...common),
    ...variants,
  };
}

/** An operation object of the document. */
function operation(operationId: string, spec: OperationSpec): JsonObject {
  const body = spec.requestBody;
  const subject: HeaderSubject = { path: BASE_PATH + spec.path, deprecation: spec.deprecated ? deprecationHeaders(spec.deprecated) : null };
  return {
    operationId,
    tags: [spec.tag],
    summary: spec.summary,
    description: spec.description,
    ...(spec.deprecated ? { deprecated: true } : {}),
    ...(spec.parameters ? { parameters: spec.parameters.map(parameter) } : {}),
    ...(body
      ? { requestBody: { required: true, description: body.description, content: Object.fromEntries(body.mediaTypes.types.map((type) => [type, { schema: schemaOrRef(body.schema) }])) } }
      : {}),
    // The least scope the operation needs; or optional authentication: anonymous, or a bearer key
    // that decides the rate limit.
    security: spec.scope === null ? [{}, { bearerAuth: [] }] : [{ bearerAuth: [spec.scope] }],
    responses: responses(spec, subject),
  };
}

/** The document's `paths`: every operation of the table, under its path and method. */
function paths(table: OperationTable): OpenApiDocument['paths'] {
  const described: OpenApiDocument['paths'] = {};
  for (const [operationId, spec] of Object.entries(table)) (described[spec.path] ??= {})[spec.method.toLowerCase()] = operation(operationId, spec);
  return described;
}

/**
 * The component schemas: every schema of SCHEMAS, as JSON Schema. A schema that some operation
 * takes as its request body says its defaults in words (see requestSchema); an array refers to
 * its items' component.
 */
function componentSchemas(table: OperationTable): Record<string, JsonObject> {
  const requestBodies = new Set<unknown>(Object.values(table).map((spec) => spec.requestBody?.schema));
  const component = (schema: Schema | ArraySchema): JsonObject => {
    if (schema.type === 'array') return { ...schema, items: schemaOrRef(schema.items) };
    if (schema.type === 'string') return { ...schema, ...(schema.enum ? { enum: [...schema.enum] } : {}) };
    return requestBodies.has(schema) ? requestSchema(schema as ObjectSchema) : jsonSchema(schema);
  };
  return {
    ...Object.fromEntries(Object.entries(SCHEMAS).map(([name, schema]) => [name, component(schema)])),
    ...(EVENT_SCHEMAS as Record<string, JsonObject>),
    ...(WEBHOOK_SCHEMAS as Record<string, JsonObject>),
    Error: errorSchema,
  };
}

// --- Webhooks ---------------------------------------------------------------------------------

/**
 * What the service sends to a webhook's URL (OpenAPI 3.1's top-level `webhooks`): one POST per
 * event, the Standard Webhooks headers, and what the receiver's answer means. The receiver is the
 * server here, so there is no key and no rate limit: the signature is its authentication.
 */
function webhooks(): OpenApiDocument['webhooks'] {
  const header = (name: string, description: string, schema: JsonObject) => ({ name, in: 'header', required: true, description, schema });
  const seconds = ATTEMPT_DEADLINE_MS / 1000;
  return {
    event: {
      post: {
        operationId: 'deliverEvent',
        tags: ['webhooks'],
        summary: 'An event delivered to a webhook',
        description:
          'Each event a webhook sees (of the types it lists; every pet event, and the order events of its account, or of every account ' +
          'with `orders: "all"`) is POSTed to its URL, the event as the body, exactly as `GET /v1/events` shows it to the account. ' +
          'Verify `webhook-signature` over the raw body before believing it, and deduplicate on `webhook-id`: a delivery may come ' +
          'more than once, and deliveries come in no guaranteed order. See docs/webhooks.md.',
        parameters: [
          header('webhook-id', 'The event\'s id: the same for every attempt at this event. Deduplicate on it.', { type: 'string', pattern: '^[1-9][0-9]{0,18}$', maxLength: 19 }),
          header('webhook-timestamp', 'When this attempt started, in whole seconds since the Unix epoch (signed: refuse one too far from now).', {
            type: 'string', pattern: '^[0-9]{1,12}$', maxLength: 12,
          }),
          header(
            'webhook-signature',
            '`v1,` and the standard base64 of the HMAC-SHA256, keyed with the bytes the secret\'s base64 (after `whsec_`) decodes to, of ' +
              '`<webhook-id>.<webhook-timestamp>.<body>`.',
            { type: 'string', pattern: '^v1,[A-Za-z0-9+/]{43}=$', maxLength: 47 },
          ),
        ],
        requestBody: {
          required: true,
          description: 'The event, as JSON (`Content-Type: application/json`).',
          content: { 'application/json': { schema: ref('schemas', 'Event') } },
        },
        security: [],
        responses: {
          '2XX': { description: `Delivered: any \`2xx\` within ${seconds} s. The body is read up to 64 KiB and discarded.` },
          default: {
            description:
              `Not delivered: any other status (a \`3xx\` too: redirects are not followed), or none within ${seconds} s. The attempt is ` +
              'retried after each wait of `WEBHOOK_RETRY_SCHEDULE` in turn, then abandoned; an endpoint whose every attempt failed ' +
              'for 5 days is disabled.',
          },
        },
      },
    },
  };
}

// --- The document -----------------------------------------------------------------------------
/**
 * The server's own base address only: production lists `PUBLIC_BASE_URL`, staging
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
  return [{ url: BASE_PATH, description, 'x-internal': false }];
}

/**
 * Builds the document of `table` (the service's own by default); serialise it once at start
 * (serializeOpenApiDocument).
 */
export function buildOpenApiDocument(options: OpenApiOptions, table: OperationTable = OPERATIONS): OpenApiDocument {
  return {
    openapi: '3.1.1',
    info: {
      title: 'Animal adoption store',
      version: API_VERSION,
      description:
        'Browse and manage animals available for adoption. Every operation takes an API key as `Authorization: Bearer <key>`. ' +
        `Every error body is the \`Error\` schema. Outside this API, \`GET /healthz\` (at the root, not under \`${BASE_PATH}\`) answers ` +
        '`200 {"status":"ok"}` without a key, for readiness probes.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: servers(options),
    security: [{ bearerAuth: [] }],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths: paths(table),
    webhooks: webhooks(),
    components: {
      schemas: componentSchemas(table),
      // Only the headers that are always present when described: the others are written in place.
      // The CORS headers too, so that a client can find them among the components.
      headers: Object.fromEntries(Object.entries(HEADERS).filter(([name, header]) => header.required || CORS.includes(name as HeaderName))),
      responses: Object.fromEntries(Object.entries(SHARED_RESPONSES).map(([name, [, answer]]) => [name, answer])),
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'API key',
          description: 'An API key (`pk_live_...` in production, `pk_test_...` elsewhere) as `Authorization: Bearer <key>`. ' +
            `Each key holds the scopes it was given, of: ${SCOPES.map((scope) => `\`${scope}\` (${SCOPE_MEANINGS[scope]})`).join('; ')}. ` +
            'Each operation names the least scope it needs in its security requirement.',
          // A bearer scheme has no `scopes` of its own in OpenAPI (only OAuth flows do); this is
          // where a client finds every scope a key may hold, with what it allows.
          'x-scopes': SCOPE_MEANINGS,
        },
      },
    },
  };
}
