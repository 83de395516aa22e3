import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildOpenApiDocument, serializeOpenApiDocument } from '../../../src/api/openapi/document.ts';
import { createConformanceChecker } from '../../support/openapi-conformance.ts';
import { startTestServer } from '../../support/test-server.ts';

const checker = createConformanceChecker(serializeOpenApiDocument(buildOpenApiDocument({ appEnv: 'development', publicBaseUrl: null, stagingBaseUrl: null })));
const ORIGIN = 'http://127.0.0.1:1';

interface Sample {
  method?: string;
  path: string;
  status: number;
  headers: Record<string, string>;
  body: string;
}

const EVERY = { 'x-request-id': 'req-1', 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };
const RATE = {
  'x-ratelimit-limit': '60',
  'x-ratelimit-remaining': '59',
  'x-ratelimit-reset': '1767225601',
  'ratelimit-policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
  ratelimit: '"minute";r=59;t=1, "day";r=999;t=87',
};
const JSON_TYPE = { 'content-type': 'application/json; charset=utf-8' };

/** A 201 of createPet exactly as the service sends it. */
const CREATED: Sample = {
  method: 'POST',
  path: '/v1/pets',
  status: 201,
  headers: { ...EVERY, ...RATE, ...JSON_TYPE, location: '/v1/pets/1', etag: '"1.1"' },
  body: '{"id":1,"name":"Rex","categoryId":7,"status":"pending"}',
};

function check(sample: Sample, change: Partial<Sample> = {}, headerChanges: Record<string, string | null> = {}): Promise<void> {
  const merged = { ...sample, ...change };
  const headers = new Headers();
  for (const [name, value] of Object.entries({ ...merged.headers, ...headerChanges })) if (value !== null) headers.set(name, value);
  // HEAD has no body, nor has a 204 (fetch cannot even build one with a body).
  const body = (merged.method === 'HEAD' && change.body === undefined) || merged.status === 204 ? null : merged.body;
  return checker.check({ method: merged.method ?? 'GET', url: ORIGIN + merged.path }, new Response(body, { status: merged.status, headers }));
}

test('a response as the service sends it conforms', async () => {
  await check(CREATED);
  await check(CREATED, {}, { 'idempotent-replayed': 'true' });
  await check(CREATED, { method: 'GET', status: 200, body: `[${CREATED.body}]` }, { location: null, etag: null, link: '</v1/pets?limit=1&cursor=YWZ0ZXI6MQ>; rel="next"' });
  await check(CREATED, { method: 'PATCH', path: '/v1/pets/1', status: 200 }, { location: null, etag: '"1.2"' });
  await check({ method: 'DELETE', path: '/v1/pets/1', status: 204, headers: { ...EVERY, ...RATE }, body: '' });
});

test('the ETag of a pet is required where the contract sends it, and must be a strong entity tag', async () => {
  await assert.rejects(check(CREATED, {}, { etag: null }), /header ETag is required \(#\/components\/headers\/ETag\) but missing/);
  const patched: Sample = { ...CREATED, method: 'PATCH', path: '/v1/pets/1', status: 200, headers: { ...EVERY, ...RATE, ...JSON_TYPE, etag: '"1.2"' } };
  await assert.rejects(check(patched, {}, { etag: null }), /header ETag is required/);
  await assert.rejects(check(patched, {}, { etag: 'W/"1.2"' }), /header ETag: "W\/\\"1.2\\"" does not match/);
  await assert.rejects(check(CREATED, { method: 'GET', status: 200, body: `[${CREATED.body}]` }, { location: null }), /header etag: "\\"1.1\\"" is not described/);
});

test('a status the operation does not describe is refused', async () => {
  await assert.rejects(check(CREATED, { status: 418, body: '{"code":"gone","message":"x","status":418}' }), /POST \/v1\/pets -> 418.*\n.*418 is not a response of POST \/pets/);
  await assert.rejects(check(CREATED, { status: 404, body: '{"code":"not_found","message":"x","status":404}' }), /404 is not a response of POST \/pets/);
});

test('a missing required header is refused', async () => {
  await assert.rejects(check(CREATED, {}, { location: null }), /header Location is required \(#\/paths\/~1pets\/post\/responses\/201\/headers\/Location\) but missing/);
  await assert.rejects(check(CREATED, {}, { 'x-ratelimit-remaining': null }), /header X-RateLimit-Remaining is required/);
});

test('a header the document does not describe, or with a value its schema refuses, is refused', async () => {
  await assert.rejects(check(CREATED, {}, { 'x-powered-by': 'node' }), /header x-powered-by: "node" is not described/);
  await assert.rejects(check(CREATED, {}, { 'x-ratelimit-remaining': 'many' }), /header X-RateLimit-Remaining: "many" does not match/);
  await assert.rejects(check(CREATED, {}, { location: '/v1/pets/abc' }), /header Location: "\/v1\/pets\/abc" does not match/);
  await assert.rejects(check(CREATED, {}, { 'idempotent-replayed': 'yes' }), /header Idempotent-Replayed: "yes" does not match/);
  await assert.rejects(check(CREATED, {}, { deprecation: '@1' }), /header deprecation: "@1" is not described/);
});

test('a body that does not match the response schema is refused', async () => {
  await assert.rejects(check(CREATED, { body: '{"id":"1","name":"Rex","categoryId":7,"status":"pending"}' }), /body .* does not match the schema of POST \/pets 201: value\/id must be integer/);
  await assert.rejects(check(CREATED, { body: '{"id":1,"name":"Rex","categoryId":7,"status":"pending","owner":"x"}' }), /must NOT have additional properties/);
  await assert.rejects(check(CREATED, { body: '{"id":1,"name":"Rex","categoryId":7,"status":"lost"}' }), /must be equal to one of the allowed values/);
  await assert.rejects(check(CREATED, { body: 'not json' }), /is not JSON/);
  await assert.rejects(check(CREATED, {}, { 'content-type': 'text/plain' }), /Content-Type "text\/plain" is not one of application\/json/);
});

test('an error body must carry a code of its status and the status itself', async () => {
  const invalid = { ...CREATED, status: 400, headers: { ...EVERY, ...RATE, ...JSON_TYPE } };
  await check(invalid, { body: '{"code":"invalid_body","message":"x","status":400}' });
  await assert.rejects(check(invalid, { body: '{"code":"invalid_query","message":"x","status":400}' }), /value\/code must be equal to one of the allowed values/);
  await assert.rejects(check(invalid, { body: '{"code":"invalid_body","message":"x","status":401}' }), /value\/status must be equal to constant/);
  await assert.rejects(check(invalid, { body: '{"code":"invalid_body","message":"x","status":400,"stack":"at"}' }), /must NOT have additional properties/);
});

test('HEAD is checked as GET, without a body', async () => {
  const head: Sample = { method: 'HEAD', path: '/v1/store/inventory', status: 400, headers: { ...EVERY, ...RATE, ...JSON_TYPE }, body: '' };
  await check(head);
  await assert.rejects(check(head, { body: '{"code":"invalid_query","message":"x","status":400}' }), /a HEAD response has a body/);
  await assert.rejects(check(head, { status: 201 }), /201 is not a response of GET \/store\/inventory/);
});

test('paths and methods without an operation are held to the NotFound and MethodNotAllowed responses', async () => {
  const error = (status: number, code: string) => `{"code":"${code}","message":"x","status":${status}}`;
  const unknown: Sample = { path: '/v1/nowhere', status: 404, headers: { ...EVERY, ...RATE, ...JSON_TYPE }, body: error(404, 'not_found') };
  await check(unknown);
  await check(unknown, { status: 401, body: error(401, 'missing_api_key') }, { 'www-authenticate': 'Bearer realm="pets"' });
  await assert.rejects(check(unknown, { status: 200, body: '[]' }), /200 for a path that no operation has/);
  await assert.rejects(check(unknown, { body: error(404, 'pet_not_found') }), /code must be equal to one of the allowed values/);
  const wrongMethod: Sample = { method: 'DELETE', path: '/v1/pets', status: 405, headers: { ...EVERY, ...RATE, ...JSON_TYPE, allow: 'GET, HEAD, POST' }, body: error(405, 'method_not_allowed') };
  await check(wrongMethod);
  await assert.rejects(check(wrongMethod, {}, { allow: 'GET, POST' }), /Allow is "GET, POST", the document's operations give "GET, HEAD, POST"/);
  await assert.rejects(check(wrongMethod, { status: 200, body: '[]' }), /200 for DELETE on \/pets, which has no such operation/);
  // A pet's path lists its operations in the contract's order, HEAD right after GET.
  const petMethod: Sample = { method: 'PUT', path: '/v1/pets/1', status: 405, headers: { ...EVERY, ...RATE, ...JSON_TYPE, allow: 'GET, HEAD, PATCH, DELETE' }, body: error(405, 'method_not_allowed') };
  await check(petMethod);
  await assert.rejects(check(petMethod, {}, { allow: 'DELETE, GET, HEAD, PATCH' }), /the document's operations give "GET, HEAD, PATCH, DELETE"/);
  // Outside /v1 everything but GET /healthz and GET /docs is limited per address.
  await check({ path: '/nowhere', status: 404, headers: { ...EVERY, ...RATE, ...JSON_TYPE }, body: error(404, 'not_found') });
  await assert.rejects(check({ path: '/nowhere', status: 404, headers: { ...EVERY, ...JSON_TYPE }, body: error(404, 'not_found') }), /X-RateLimit-Limit is required/);
  await check({ path: '/nowhere', status: 429, headers: { ...EVERY, ...RATE, ...JSON_TYPE, 'retry-after': '1' }, body: error(429, 'rate_limited') });
  await check({ path: '/healthz', status: 200, headers: { ...EVERY, ...JSON_TYPE }, body: '{"status":"ok"}' });
  await assert.rejects(check({ path: '/healthz', status: 200, headers: { ...EVERY, ...JSON_TYPE }, body: '{"status":"down"}' }), /is not \{"status":"ok"\}/);
  await assert.rejects(check({ path: '/healthz', status: 200, headers: { ...JSON_TYPE }, body: '{"status":"ok"}' }), /header X-Request-Id is required/);
});

test('the test server checks every response: a response the document does not describe fails the request', async (t) => {
  // A document that forgot the 400 of getInventory: the real 400 no longer conforms.
  const document = buildOpenApiDocument({ appEnv: 'development', publicBaseUrl: null, stagingBaseUrl: null });
  delete (document.paths['/store/inventory']!.get!.responses as Record<string, unknown>)['400'];
  const server = await startTestServer(t, { overrides: { openapi: serializeOpenApiDocument(document) } });
  await assert.rejects(server.request('/v1/store/inventory?x=1'), /GET \/v1\/store\/inventory\?x=1 -> 400 .*\n.*400 is not a response of GET \/store\/inventory/);
  assert.equal((await server.request('/v1/pets')).status, 200);
});
