import { test } from 'node:test';
import assert from 'node:assert/strict';
import { compileErrors, validate } from '@readme/openapi-parser';
import type { OpenAPIV3_1 } from 'openapi-types';
import { buildOpenApiDocument, serializeOpenApiDocument, type OpenApiDocument, type OpenApiOptions } from '../../../src/api/openapi/document.ts';
import { ApiError } from '../../../src/http/api-error.ts';
import { ERROR_STATUS } from '../../../src/api/errors.ts';
import { OPERATIONS } from '../../../src/api/operations.ts';
import { INT64_MAX, INT64_MIN, listPetsParameters, MAX_PAGE_SIZE, newPetSchema, petNameSchema } from '../../../src/api/schemas.ts';
import { validateBody, validateQuery } from '../../../src/api/validator.ts';
import { errorBody, json, startTestServer } from '../../support/test-server.ts';

const UNSET = { appEnv: 'development', publicBaseUrl: null, stagingBaseUrl: null } as const;
const BOTH = { appEnv: 'development', publicBaseUrl: 'https://api.example.com/v1', stagingBaseUrl: 'https://staging.example.com/v1' } as const;

/** The document as a client reads it: through JSON, loosely typed for assertions. */
function served(options: OpenApiOptions = UNSET): any {
  return JSON.parse(serializeOpenApiDocument(buildOpenApiDocument(options)));
}

/** Validates with @readme/openapi-parser (schema of OpenAPI 3.1 plus its semantic rules); it mutates, so give it a copy. */
async function assertValid(document: unknown): Promise<void> {
  const result = await validate(structuredClone(document) as OpenAPIV3_1.Document);
  assert.ok(result.valid, result.valid ? '' : compileErrors(result));
  assert.deepEqual(result.warnings, []);
}

/** `[path, method, operationId]` of every entry of the table, in its order. */
const TABLE = Object.entries(OPERATIONS).map(([operationId, spec]) => [spec.path, spec.method.toLowerCase(), operationId] as const);

function operation(document: any, operationId: string): any {
  const found = TABLE.find(([, , id]) => id === operationId)!;
  return document.paths[found[0]][found[1]];
}

/** A response with `$ref` followed. */
function response(document: any, operationId: string, status: number | 'default'): any {
  const described = operation(document, operationId).responses[String(status)];
  assert.ok(described, `${operationId} ${status} is described`);
  return described.$ref ? document.components.responses[described.$ref.split('/').pop()] : described;
}

test('the document is a valid OpenAPI 3.1 document, with and without configured base addresses', async () => {
  for (const options of [UNSET, BOTH, { ...BOTH, appEnv: 'production' }, { ...BOTH, appEnv: 'staging' }, { ...UNSET, appEnv: 'production' }] as const) {
    const document = served(options);
    assert.match(document.openapi, /^3\.1\.\d+$/);
    await assertValid(document);
  }
});

test('the validator is not a rubber stamp: it rejects a broken reference and a duplicate operationId', async () => {
  const broken = served();
  broken.paths['/pets'].get.responses['200'].content['application/json'].schema.$ref = '#/components/schemas/Nope';
  assert.equal((await validate(broken)).valid, false);
  const duplicate = served();
  duplicate.paths['/store/orders'].get.operationId = 'listPets';
  assert.equal((await validate(duplicate)).valid, false);
  const noVersion = served();
  delete noVersion.info.version;
  assert.equal((await validate(noVersion)).valid, false);
});

test('info.version is the interface version, 1.3.0', () => {
  assert.equal(served().info.version, '1.3.0');
});

test('servers list only the environment\'s own base address: production PUBLIC_BASE_URL, staging STAGING_BASE_URL', () => {
  assert.deepEqual(served({ ...BOTH, appEnv: 'production' }).servers, [{ url: 'https://api.example.com/v1', description: 'Production', 'x-internal': false }]);
  assert.deepEqual(served({ ...BOTH, appEnv: 'staging' }).servers, [{ url: 'https://staging.example.com/v1', description: 'Staging', 'x-internal': false }]);
  // Unset, the server that serves the document is the address.
  assert.deepEqual(served({ ...BOTH, appEnv: 'production', publicBaseUrl: null }).servers.map((server: { url: string }) => server.url), ['/v1']);
  assert.deepEqual(served({ ...BOTH, appEnv: 'staging', stagingBaseUrl: null }).servers.map((server: { url: string }) => server.url), ['/v1']);
});

test('a development server lists only itself (/v1), never the production or staging address', () => {
  assert.deepEqual(served(BOTH).servers, [{ url: '/v1', description: 'This local development server', 'x-internal': false }]);
  assert.deepEqual(served(UNSET).servers, served(BOTH).servers);
});

test('bearerAuth is an HTTP bearer scheme applied to every operation with the least scope it needs; only the document itself may be read anonymously', () => {
  const document = served();
  assert.deepEqual({ type: document.components.securitySchemes.bearerAuth.type, scheme: document.components.securitySchemes.bearerAuth.scheme }, { type: 'http', scheme: 'bearer' });
  assert.deepEqual(document.security, [{ bearerAuth: [] }]);
  for (const [, , operationId] of TABLE) {
    const security = operation(document, operationId).security ?? document.security;
    assert.ok(security.some((requirement: object) => 'bearerAuth' in requirement), operationId);
  }
  assert.deepEqual(operation(document, 'getOpenApiDocument').security, [{}, { bearerAuth: [] }]);
  const scopes = {
    listPets: 'pets:read', getPet: 'pets:read', createPet: 'pets:write', updatePet: 'pets:write', deletePet: 'pets:write',
    placeOrder: 'orders:write', listOrders: 'orders:write', getOrder: 'orders:write', updateOrder: 'orders:write', getInventory: 'pets:read',
  };
  for (const [operationId, scope] of Object.entries(scopes)) {
    assert.deepEqual(operation(document, operationId).security, [{ bearerAuth: [scope] }], operationId);
  }
});

test('the bearer scheme lists every scope a key may hold, in order, with what it allows, also where /docs shows it', () => {
  const scheme = served().components.securitySchemes.bearerAuth;
  const all = ['pets:read', 'pets:write', 'orders:write', 'orders:manage', 'events:read', 'webhooks:manage'];
  assert.deepEqual(Object.keys(scheme['x-scopes']), all);
  for (const scope of all) {
    assert.equal(typeof scheme['x-scopes'][scope], 'string');
    assert.ok(scheme.description.includes(`\`${scope}\` (${scheme['x-scopes'][scope]})`), scope);
  }
});

test('the operations are those of the table (getPet deprecated, with the sunset date), and nothing else', () => {
  const document = served();
  const found = Object.entries(document.paths).flatMap(([path, item]: [string, any]) => Object.keys(item).map((method) => [path, method, item[method].operationId]));
  assert.deepEqual(found, TABLE.map((entry) => [...entry]));
  const getPet = operation(document, 'getPet');
  assert.equal(getPet.deprecated, true);
  assert.match(getPet.description, /2030-12-05/);
  assert.match(getPet.description, /Thu, 05 Dec 2030 00:00:00 GMT/);
  for (const operationId of ['listPets', 'createPet', 'updatePet', 'deletePet', 'placeOrder', 'listOrders', 'getOrder', 'updateOrder', 'getInventory', 'getOpenApiDocument']) {
    assert.equal(operation(document, operationId).deprecated, undefined, operationId);
  }
});

test('every parameter carries its constraints', () => {
  const document = served();
  const [limit, status, cursor] = operation(document, 'listPets').parameters;
  assert.deepEqual(limit, { name: 'limit', in: 'query', description: limit.description, schema: { type: 'integer', format: 'int32', minimum: 1, maximum: 100, default: 20 } });
  assert.equal(status.in, 'query');
  assert.equal(status.schema.$ref, '#/components/schemas/PetStatus');
  assert.deepEqual(document.components.schemas.PetStatus.enum, ['available', 'pending', 'sold']);
  assert.deepEqual([cursor.name, cursor.in, cursor.schema.type], ['cursor', 'query', 'string']);
  const [petId] = operation(document, 'getPet').parameters;
  assert.deepEqual([petId.name, petId.in, petId.required, petId.schema], ['petId', 'path', true, { type: 'integer', format: 'int64', minimum: -(2 ** 63), maximum: 2 ** 63 }]);
  // int64 bounds are written with their exact digits, not rounded to the nearest double.
  const text = serializeOpenApiDocument(buildOpenApiDocument(UNSET));
  assert.ok(text.includes(`"minimum":${INT64_MIN},"maximum":${INT64_MAX}`), 'the petId bounds are exact');
  const [idempotencyKey] = operation(document, 'createPet').parameters;
  assert.deepEqual([idempotencyKey.name, idempotencyKey.in, idempotencyKey.required], ['Idempotency-Key', 'header', undefined]);
  const key = new RegExp(idempotencyKey.schema.pattern, 'u');
  for (const good of ['a', '~'.repeat(255), `"${'k'.repeat(255)}"`, 'abc-123_!$']) assert.ok(key.test(good), good);
  for (const bad of ['', '""', 'a b', 'x'.repeat(256), 'é', '"a b"', `"${'k'.repeat(256)}"`]) assert.ok(!key.test(bad), bad);
  assert.equal(operation(document, 'createPet').requestBody.content['application/json'].schema.$ref, '#/components/schemas/NewPet');
  assert.equal(operation(document, 'createPet').requestBody.required, true);
  for (const operationId of ['updatePet', 'deletePet']) {
    const [path, ifMatch] = operation(document, operationId).parameters;
    assert.deepEqual(path, operation(document, 'getPet').parameters[0], `${operationId}: petId as for getPet`);
    assert.deepEqual([ifMatch.name, ifMatch.in, ifMatch.required, ifMatch.schema.type], ['If-Match', 'header', undefined, 'string']);
    assert.match(ifMatch.description, /412 precondition_failed/);
  }
  const patch = operation(document, 'updatePet').requestBody;
  assert.equal(patch.required, true);
  assert.deepEqual(Object.keys(patch.content), ['application/merge-patch+json', 'application/json']);
  for (const media of Object.values(patch.content) as { schema: { $ref: string } }[]) assert.equal(media.schema.$ref, '#/components/schemas/PetPatch');
  assert.equal(operation(document, 'deletePet').requestBody, undefined);
});

test('components: the pets\', the orders\' and the inventory\'s schemas and Error, with int64 ids and Error.code the contract codes', () => {
  const { schemas } = served().components;
  assert.deepEqual(Object.keys(schemas).sort(), [
    'CreatedWebhook', 'DeletedPet', 'Error', 'Event', 'Inventory', 'NewOrder', 'NewPet', 'NewWebhook', 'Order', 'OrderApprovedEvent', 'OrderCancelledEvent',
    'OrderCompletedEvent', 'OrderPatch', 'OrderPlacedEvent', 'OrderStatus', 'Orders', 'Pet', 'PetCreatedEvent', 'PetDeletedEvent', 'PetPatch', 'PetStatus',
    'PetUpdatedEvent', 'Pets', 'Webhook', 'WebhookDelivery', 'WebhookPatch', 'Webhooks',
  ]);
  assert.deepEqual(Object.keys(schemas.Order.properties), ['id', 'petId', 'account', 'status', 'placedAt', 'updatedAt', 'expiresAt']);
  assert.deepEqual(schemas.Order.required, ['id', 'petId', 'account', 'status', 'placedAt', 'updatedAt', 'expiresAt']);
  assert.deepEqual(schemas.Order.properties.expiresAt.type, ['string', 'null'], 'null once the order is no longer placed');
  assert.equal(schemas.Order.properties.status.$ref, '#/components/schemas/OrderStatus');
  assert.deepEqual(schemas.OrderStatus.enum, ['placed', 'approved', 'completed', 'cancelled']);
  assert.deepEqual(schemas.NewOrder.required, ['petId']);
  assert.deepEqual(schemas.Inventory.required, ['available', 'pending', 'sold']);
  assert.deepEqual(Object.keys(schemas.Pet.properties), ['id', 'name', 'categoryId', 'status']);
  assert.deepEqual(schemas.Pet.required, ['id', 'name', 'categoryId', 'status']);
  for (const field of ['id', 'categoryId']) assert.deepEqual([schemas.Pet.properties[field].type, schemas.Pet.properties[field].format], ['integer', 'int64']);
  assert.deepEqual(schemas.NewPet.required, ['name', 'categoryId']);
  assert.equal(schemas.NewPet.additionalProperties, false);
  assert.equal(schemas.NewPet.properties.id, undefined);
  assert.match(schemas.NewPet.properties.status.description, /Omitted means `available`/);
  assert.deepEqual(schemas.Pets, { type: 'array', description: schemas.Pets.description, items: { $ref: '#/components/schemas/Pet' }, maxItems: 100 });
  assert.equal(MAX_PAGE_SIZE, 100, 'a page holds at most the largest limit');
  assert.deepEqual(schemas.Error.required, ['code', 'message', 'status']);
  assert.equal(schemas.Error.additionalProperties, false);
  assert.deepEqual(schemas.Error.properties.code.enum, Object.keys(ERROR_STATUS));
  assert.equal(schemas.Error.properties.code.enum.length, 34, 'the 34 codes of docs/api.md, "Errors" (412 since 1.1; 403 and the orders\' four since 1.2; the cap\'s, cursor_expired and too_many_streams since 1.3; the webhooks\' two since)');
});

test('PetPatch is NewPet as a merge patch: the same field rules, nothing required, no default, nothing else allowed', () => {
  const { schemas } = served().components;
  assert.deepEqual(Object.keys(schemas.PetPatch.properties), ['name', 'categoryId', 'status']);
  assert.deepEqual(schemas.PetPatch.required, []);
  assert.equal(schemas.PetPatch.additionalProperties, false);
  assert.deepEqual(schemas.PetPatch.properties.name, schemas.NewPet.properties.name);
  assert.deepEqual(schemas.PetPatch.properties.categoryId, schemas.NewPet.properties.categoryId);
  assert.equal(schemas.PetPatch.properties.status.$ref, '#/components/schemas/PetStatus');
  assert.equal(schemas.PetPatch.properties.status.default, undefined, 'no default: an absent status keeps its value');
  assert.doesNotMatch(schemas.PetPatch.properties.status.description, /Omitted means/);
  assert.match(schemas.PetPatch.description, /RFC 7396/);
});

test('each operation describes every response it can really give, with the Error schema and the codes of that status', () => {
  const document = served();
  // `default`: the 408 and 431 that the HTTP server writes before the request reaches the API.
  const expected = {
    listPets: [200, 400, 401, 403, 429, 500, 503, 'default'],
    createPet: [201, 400, 401, 403, 409, 413, 415, 422, 429, 500, 503, 'default'],
    getPet: [200, 400, 401, 403, 404, 410, 429, 500, 503, 'default'],
    updatePet: [200, 400, 401, 403, 404, 409, 412, 413, 415, 429, 500, 503, 'default'],
    deletePet: [204, 400, 401, 403, 404, 409, 412, 429, 500, 503, 'default'],
    placeOrder: [201, 400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503, 'default'],
    listOrders: [200, 400, 401, 403, 429, 500, 503, 'default'],
    getOrder: [200, 400, 401, 403, 404, 429, 500, 503, 'default'],
    updateOrder: [200, 400, 401, 403, 404, 409, 412, 413, 415, 429, 500, 503, 'default'],
    getInventory: [200, 400, 401, 403, 429, 500, 503, 'default'],
    listWebhooks: [200, 400, 401, 403, 429, 500, 503, 'default'],
    createWebhook: [201, 400, 401, 403, 409, 413, 415, 422, 429, 500, 503, 'default'],
    getWebhook: [200, 400, 401, 403, 404, 429, 500, 503, 'default'],
    updateWebhook: [200, 400, 401, 403, 404, 413, 415, 429, 500, 503, 'default'],
    deleteWebhook: [204, 400, 401, 403, 404, 429, 500, 503, 'default'],
    listWebhookDeliveries: [200, 400, 401, 403, 404, 429, 500, 503, 'default'],
    getOpenApiDocument: [200, 429, 500, 503, 'default'],
  };
  for (const [operationId, statuses] of Object.entries(expected)) {
    assert.deepEqual(Object.keys(operation(document, operationId).responses), statuses.map(String), operationId);
    for (const status of statuses.filter((status): status is number => typeof status === 'number' && status >= 400)) {
      const schema = response(document, operationId, status).content['application/json'].schema;
      assert.equal(schema.allOf[0].$ref, '#/components/schemas/Error', `${operationId} ${status}`);
      assert.equal(schema.allOf[1].properties.status.const, status);
      for (const code of schema.allOf[1].properties.code.enum) assert.equal(ERROR_STATUS[code as keyof typeof ERROR_STATUS], status, code);
    }
  }
  // 404 and 405 belong to no operation: they answer paths and methods that have none.
  assert.deepEqual(document.components.responses.NotFound.content['application/json'].schema.allOf[1].properties.code.enum, ['not_found']);
  assert.deepEqual(document.components.responses.MethodNotAllowed.content['application/json'].schema.allOf[1].properties.code.enum, ['method_not_allowed']);
  assert.equal(document.components.responses.MethodNotAllowed.headers.Allow.$ref, '#/components/headers/Allow');
  // Every code of the contract is answered somewhere in the document.
  const text = JSON.stringify(document.paths) + JSON.stringify(document.components.responses);
  for (const code of Object.keys(ERROR_STATUS)) assert.ok(text.includes(`"${code}"`), code);
});

test('every response header is described where it is sent', () => {
  const document = served();
  const names = (operationId: string, status: number | 'default') => Object.keys(response(document, operationId, status).headers);
  const required = (operationId: string, status: number) =>
    Object.entries(response(document, operationId, status).headers)
      .filter(([, header]: [string, any]) => (header.$ref ? document.components.headers[header.$ref.split('/').pop()] : header).required)
      .map(([name]) => name);
  const RATE = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit'];
  for (const [operationId, status] of [['listPets', 200], ['createPet', 201], ['getPet', 404], ['listOrders', 200], ['getOpenApiDocument', 200], ['createPet', 415]] as const) {
    for (const name of ['X-Request-Id', ...RATE]) assert.ok(required(operationId, status).includes(name), `${operationId} ${status} ${name}`);
  }
  assert.ok(required('listPets', 429).includes('Retry-After'));
  assert.ok(required('createPet', 409).includes('Retry-After'), 'a 409 says when to retry');
  assert.ok(required('listPets', 401).includes('WWW-Authenticate'));
  assert.ok(names('listPets', 200).includes('Link') && !required('listPets', 200).includes('Link'), 'Link rel="next" only when more pets follow');
  assert.ok(required('createPet', 201).includes('Location'));
  // The pet's ETag: on the answers that carry the pet, and only there.
  for (const [operationId, status] of [['createPet', 201], ['getPet', 200], ['updatePet', 200]] as const) assert.ok(required(operationId, status).includes('ETag'), `${operationId} ${status}`);
  for (const [operationId, status] of [['listPets', 200], ['deletePet', 204], ['updatePet', 412], ['getPet', 404]] as const) assert.ok(!names(operationId, status).includes('ETag'), `${operationId} ${status}`);
  assert.equal(document.components.headers.ETag.required, true);
  assert.ok(new RegExp(document.components.headers.ETag.schema.pattern).test('"12.3"'));
  assert.ok(!new RegExp(document.components.headers.ETag.schema.pattern).test('W/"12.3"'), 'strong only');
  // Only GET of a pet is deprecated: PATCH and DELETE carry none of its headers.
  for (const [operationId, status] of [['updatePet', 200], ['updatePet', 404], ['deletePet', 204], ['deletePet', 412]] as const) {
    for (const name of ['Deprecation', 'Sunset', 'Link']) assert.ok(!names(operationId, status).includes(name), `${operationId} ${status} ${name}`);
  }
  assert.ok(names('createPet', 201).includes('Idempotent-Replayed') && !required('createPet', 201).includes('Idempotent-Replayed'));
  // A replay is the first response, whatever the operation answered; rejections before it are never stored.
  for (const status of [500, 503]) assert.ok(names('createPet', status).includes('Idempotent-Replayed'), `createPet ${status}`);
  for (const status of [400, 409, 413, 415, 422]) assert.ok(!names('createPet', status).includes('Idempotent-Replayed'), `createPet ${status}`);
  for (const status of [200, 400, 404, 410]) {
    for (const name of ['Deprecation', 'Sunset', 'Link']) assert.ok(required('getPet', status).includes(name), `getPet ${status} ${name}`);
  }
  for (const status of [401, 429]) assert.ok(!names('getPet', status).includes('Deprecation'), 'answered before routing, without the deprecation headers');
  // Described for the operation that sends them, with its own values.
  const { headers } = response(document, 'getPet', 200);
  assert.deepEqual(headers.Deprecation.schema.enum, ['@1764892800']);
  assert.deepEqual(headers.Sunset.schema.enum, ['Thu, 05 Dec 2030 00:00:00 GMT']);
  assert.deepEqual(headers.Link.schema.enum, ['</v1/pets>; rel="successor-version"']);
  // 408 and 431 are written by Node before the pipeline runs: no rate-limit headers there.
  const CORS = ['Access-Control-Allow-Origin', 'Access-Control-Expose-Headers', 'Vary'];
  assert.deepEqual(names('listPets', 'default'), ['X-Request-Id', 'Cache-Control', 'X-Content-Type-Options', ...CORS]);
  // CORS headers may be on any response (CORS_ALLOWED_ORIGINS set), and are never required.
  for (const [operationId, status] of [['listPets', 200], ['createPet', 201], ['getPet', 404], ['listOrders', 200], ['getOpenApiDocument', 200], ['listPets', 429]] as const) {
    assert.deepEqual(names(operationId, status).slice(-3), CORS, `${operationId} ${status}`);
    for (const name of CORS) assert.ok(!required(operationId, status).includes(name), `${operationId} ${status} ${name}`);
  }
  const transport = response(document, 'listPets', 'default').content['application/json'].schema.allOf[1].oneOf;
  assert.deepEqual(transport.map((part: any) => [part.properties.status.const, part.properties.code.enum]), [[408, ['request_timeout']], [431, ['headers_too_large']]]);
});

test('changing a schema object changes the validator and the document together', async (t) => {
  // The schema objects are `as const` for the handlers' types; at run time they are plain objects.
  const mutable = petNameSchema as { maxLength: number };
  const saved = mutable.maxLength;
  mutable.maxLength = 5;
  t.after(() => {
    mutable.maxLength = saved;
  });
  // The validator and the document builder read the same object ...
  assert.throws(() => validateBody({ name: 'Rexxxx', categoryId: 1n }, newPetSchema), ApiError);
  assert.deepEqual(validateBody({ name: 'Rexxx', categoryId: 1n }, newPetSchema), { name: 'Rexxx', categoryId: 1n, status: 'available' });
  assert.equal(served().components.schemas.NewPet.properties.name.maxLength, 5);
  // ... and a server started now serves a document built from it, and refuses what it says.
  const server = await startTestServer(t);
  const document = await json(await server.request('/v1/openapi.json', { key: null }));
  assert.equal(document.components.schemas.NewPet.properties.name.maxLength, 5);
  assert.equal(document.components.schemas.Pet.properties.name.maxLength, 5);
  assert.equal(document.components.schemas.PetPatch.properties.name.maxLength, 5);
  assert.equal((await server.post('/v1/pets', { name: 'Rexxx', categoryId: 1 })).status, 201);
  const patch = (name: string) => server.request('/v1/pets/1', { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify({ name }) });
  assert.equal((await patch('Rexx')).status, 200);
  assert.match((await errorBody(await patch('Rexxxx'))).message, /name must be a string of 1 to 5 characters/);
  const refused = await server.post('/v1/pets', { name: 'Rexxxx', categoryId: 1 });
  assert.equal(refused.status, 400);
  assert.match((await errorBody(refused)).message, /name must be a string of 1 to 5 characters/);
});

test('a parameter constraint comes from the same array for the validator and the document', () => {
  const limit = listPetsParameters.find((parameter) => parameter.name === 'limit')!;
  assert.equal(served().paths['/pets'].get.parameters[0].schema.maximum, limit.schema.type === 'integer' ? limit.schema.maximum : undefined);
  assert.equal((validateQuery(new URLSearchParams('limit=100'), listPetsParameters) as { limit: number }).limit, 100);
  assert.throws(() => validateQuery(new URLSearchParams('limit=101'), listPetsParameters), ApiError);
});

test('GET /v1/openapi.json serves the document built at start, without a key, rate limited', async (t) => {
  const server = await startTestServer(t, { config: BOTH });
  const anonymous = await server.request('/v1/openapi.json', { key: null });
  assert.equal(anonymous.status, 200);
  assert.equal(anonymous.headers.get('content-type'), 'application/json; charset=utf-8');
  const document = (await json(anonymous)) as OpenApiDocument;
  assert.deepEqual(document, served(BOTH));
  assert.equal(anonymous.headers.get('x-ratelimit-limit'), '60', 'limited by address with the free numbers');
  const unknownKey = await server.request('/v1/openapi.json', { key: 'pk_test_unknown' });
  assert.equal(unknownKey.status, 200, 'an unknown key still gets 200');
  assert.equal(Number(unknownKey.headers.get('x-ratelimit-remaining')), Number(anonymous.headers.get('x-ratelimit-remaining')) - 1, 'counted against the same address');
  const withKey = await server.request('/v1/openapi.json', { key: server.freeKey });
  assert.equal(withKey.status, 200);
  assert.equal(withKey.headers.get('x-ratelimit-remaining'), '59', 'limited by the valid key, not the address');
  assert.equal((await server.request('/v1/openapi.json', { method: 'HEAD', key: null })).status, 200);
  const post = await server.request('/v1/openapi.json', { method: 'POST', key: null });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get('allow'), 'GET, HEAD');
});

for (const [appEnv, listed] of [['production', 'https://api.example.com/v1'], ['staging', 'https://staging.example.com/v1'], ['development', '/v1']] as const) {
  test(`a ${appEnv} server configured with both base addresses serves a document that lists only ${listed}`, async (t) => {
    const server = await startTestServer(t, { config: { ...BOTH, appEnv } });
    const response = await server.request('/v1/openapi.json', { key: null });
    assert.equal(response.status, 200);
    const document = (await json(response)) as OpenApiDocument;
    assert.deepEqual(document.servers.map((entry) => entry.url), [listed]);
  });
}

test('Event is a oneOf discriminated by type, one schema per type, each with its own data: the pet, the deleted pet\'s id or the order', () => {
  const { schemas } = served().components;
  const types = ['pet.created', 'pet.updated', 'pet.deleted', 'order.placed', 'order.approved', 'order.completed', 'order.cancelled'];
  const names = ['PetCreatedEvent', 'PetUpdatedEvent', 'PetDeletedEvent', 'OrderPlacedEvent', 'OrderApprovedEvent', 'OrderCompletedEvent', 'OrderCancelledEvent'];
  assert.deepEqual(schemas.Event.oneOf, names.map((name) => ({ $ref: `#/components/schemas/${name}` })));
  assert.deepEqual(schemas.Event.discriminator, { propertyName: 'type', mapping: Object.fromEntries(types.map((type, i) => [type, `#/components/schemas/${names[i]}`])) });
  const data = ['Pet', 'Pet', 'DeletedPet', 'Order', 'Order', 'Order', 'Order'];
  names.forEach((name, i) => {
    const schema = schemas[name];
    assert.deepEqual(Object.keys(schema.properties), ['id', 'type', 'occurredAt', 'actor', 'data'], 'the interface\'s field order');
    assert.deepEqual(schema.required, ['id', 'type', 'occurredAt', 'actor', 'data']);
    assert.deepEqual(schema.properties.type.enum, [types[i]]);
    assert.equal(schema.properties.data.$ref, `#/components/schemas/${data[i]}`);
    assert.deepEqual(schema.properties.actor.type, ['object', 'null']);
  });
  const feed = operation(served(), 'listEvents');
  assert.deepEqual(feed.responses['200'].content['application/json'].schema.items, { $ref: '#/components/schemas/Event' });
  assert.deepEqual(feed.parameters.map((parameter: { name: string; in: string }) => `${parameter.in} ${parameter.name}`), ['query after', 'query limit', 'query types', 'query wait', 'header Last-Event-ID']);
  assert.deepEqual(Object.keys(feed.responses['200'].content), ['application/json', 'text/event-stream'], 'the stream, a second media type of the 200');
  assert.match(feed.responses['200'].content['text/event-stream'].schema.description, /`id: <id>`, `event: <type>`, `data: /);
  const tooMany = feed.responses['429'];
  assert.deepEqual(tooMany.content['application/json'].schema.allOf[1].properties.code.enum, ['rate_limited', 'temporarily_banned', 'too_many_streams']);
  assert.ok('Retry-After' in tooMany.headers);
  const listPets = operation(served(), 'listPets');
  assert.equal(listPets.responses['429'].$ref, '#/components/responses/TooManyRequests', 'the other operations keep the shared 429, without the streams\' code');
});

test('the webhook schemas: the fields in the interface\'s order, the secret only in the creation\'s answer, types an array of distinct event types', () => {
  const { schemas } = served().components;
  const fields = ['id', 'url', 'types', 'orders', 'status', 'createdAt'];
  assert.deepEqual(Object.keys(schemas.Webhook.properties), fields);
  assert.deepEqual(schemas.Webhook.required, fields);
  assert.deepEqual(Object.keys(schemas.CreatedWebhook.properties), [...fields, 'secret'], 'the secret last');
  assert.deepEqual(schemas.CreatedWebhook.required, [...fields, 'secret']);
  assert.ok(new RegExp(schemas.CreatedWebhook.properties.secret.pattern).test(`whsec_${Buffer.alloc(32, 7).toString('base64')}`));
  assert.equal(schemas.Webhook.properties.secret, undefined);
  assert.deepEqual([schemas.Webhook.properties.id.type, schemas.Webhook.properties.id.format], ['integer', 'int64']);
  const types = schemas.Webhook.properties.types;
  assert.deepEqual([types.type, types.minItems, types.maxItems, types.uniqueItems], ['array', 1, 7, true]);
  assert.deepEqual(types.items.enum, ['pet.created', 'pet.updated', 'pet.deleted', 'order.placed', 'order.approved', 'order.completed', 'order.cancelled']);
  assert.deepEqual(schemas.Webhook.properties.orders.enum, ['own', 'all']);
  assert.deepEqual(schemas.Webhook.properties.status.enum, ['enabled', 'disabled']);
  assert.equal(schemas.Webhook.properties.url.maxLength, 2048);
  assert.deepEqual(schemas.NewWebhook.required, ['url']);
  assert.match(schemas.NewWebhook.properties.types.description, /Omitted means all 7/);
  assert.match(schemas.NewWebhook.properties.orders.description, /Omitted means `own`/);
  assert.deepEqual(Object.keys(schemas.WebhookPatch.properties), ['url', 'types', 'orders', 'status']);
  assert.deepEqual(schemas.WebhookPatch.required, []);
  assert.equal(schemas.WebhookPatch.properties.orders.default, undefined);
  assert.deepEqual(schemas.Webhooks.items, { $ref: '#/components/schemas/Webhook' });
  const delivery = schemas.WebhookDelivery;
  assert.deepEqual(Object.keys(delivery.properties), ['eventId', 'attempt', 'attemptedAt', 'status', 'error', 'durationMs']);
  assert.deepEqual(delivery.properties.status.type, ['integer', 'null']);
  assert.deepEqual(delivery.properties.error.enum, ['timeout', 'connection_failed', 'address_refused', 'redirect', 'http_status', null]);
  const document = served();
  assert.deepEqual(operation(document, 'listWebhookDeliveries').responses['200'].content['application/json'].schema.items, { $ref: '#/components/schemas/WebhookDelivery' });
  assert.equal(operation(document, 'createWebhook').responses['201'].content['application/json'].schema.$ref, '#/components/schemas/CreatedWebhook');
  for (const operationId of ['listWebhooks', 'createWebhook', 'getWebhook', 'updateWebhook', 'deleteWebhook', 'listWebhookDeliveries']) {
    assert.deepEqual(operation(document, operationId).security, [{ bearerAuth: ['webhooks:manage'] }], operationId);
  }
});

test('the top-level webhooks describe the delivery: a POST of the Event with the Standard Webhooks headers, no key, 2XX delivered', () => {
  const document = served();
  const post = document.webhooks.event.post;
  assert.deepEqual(Object.keys(document.webhooks), ['event']);
  assert.deepEqual(post.requestBody.content, { 'application/json': { schema: { $ref: '#/components/schemas/Event' } } });
  assert.deepEqual(post.parameters.map((parameter: any) => [parameter.name, parameter.in, parameter.required]), [
    ['webhook-id', 'header', true], ['webhook-timestamp', 'header', true], ['webhook-signature', 'header', true],
  ]);
  const [id, timestamp, signature] = post.parameters.map((parameter: any) => new RegExp(parameter.schema.pattern));
  assert.ok(id.test('42') && !id.test('0') && !id.test('-1'));
  assert.ok(timestamp.test('1795861200'));
  assert.ok(signature.test('v1,zQL1lXwmoepESxbnLekohQpbzeUnpffH2AckhntIbL8=') && !signature.test('v1a,zQL1lXwmoepESxbnLekohQpbzeUnpffH2AckhntIbL8='));
  assert.deepEqual(post.security, [], 'the receiver checks the signature; the service sends no key');
  assert.deepEqual(Object.keys(post.responses), ['2XX', 'default']);
  assert.match(post.responses.default.description, /redirects are not followed/);
});
