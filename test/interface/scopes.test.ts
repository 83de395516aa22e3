/**
 * Scopes of API keys over HTTP: a key without the scope an operation needs gets
 * `403 insufficient_scope` with the RFC 6750 challenge naming the least scope that would allow
 * the request, decided after routing (404, 405 first) and before any validation, counted by the
 * rate limiter, and nothing is stored or remembered.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Scope } from '../../src/keys/scopes.ts';
import { createMetrics } from '../../src/ops/metrics.ts';
import { parseExposition, valueOf } from '../support/prometheus-text.ts';
import { errorBody, json, startTestServer, type TestServer } from '../support/test-server.ts';

async function keyWith(server: TestServer, scopes: Scope[]): Promise<string> {
  const issued = await server.service.stores.keys.create({ plan: 'enterprise', perMinute: 1000, perDay: 100_000, scopes, now: server.clock() });
  return issued.key;
}

const count = (server: TestServer, table: string) => (server.db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;

async function refused(response: Response, scope: Scope): Promise<void> {
  assert.equal(response.status, 403);
  assert.equal((await errorBody(response)).code, 'insufficient_scope');
  assert.equal(response.headers.get('www-authenticate'), `Bearer realm="pets", error="insufficient_scope", scope="${scope}"`);
  assert.ok(response.headers.get('x-ratelimit-remaining') !== null, 'a 403 carries the rate-limit headers');
}

test('a pets:read key reads pets but may not create, change or delete them: 403 naming pets:write, nothing stored', async (t) => {
  const server = await startTestServer(t);
  const created = await json(await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }));
  const reader = await keyWith(server, ['pets:read']);
  assert.equal((await server.request('/v1/pets', { key: reader })).status, 200);
  assert.equal((await server.request(`/v1/pets/${created.id}`, { key: reader })).status, 200);
  assert.equal((await server.request(`/v1/pets/${created.id}`, { key: reader, method: 'HEAD' })).status, 200);
  await refused(await server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, { key: reader, headers: { 'idempotency-key': 'k1' } }), 'pets:write');
  await refused(await server.request(`/v1/pets/${created.id}`, {
    key: reader, method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"name":"Defaced"}',
  }), 'pets:write');
  await refused(await server.request(`/v1/pets/${created.id}`, { key: reader, method: 'DELETE' }), 'pets:write');
  assert.equal(count(server, 'pets'), 1);
  assert.equal(count(server, 'idempotency_keys'), 0, 'the Idempotency-Key of a 403 is not remembered');
  assert.deepEqual(await json(await server.request(`/v1/pets/${created.id}`)), created, 'unchanged');
});

test('a pets:write key without pets:read may not read: 403 naming pets:read', async (t) => {
  const server = await startTestServer(t);
  const writer = await keyWith(server, ['pets:write']);
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, { key: writer })).status, 201);
  await refused(await server.request('/v1/pets', { key: writer }), 'pets:read');
  await refused(await server.request('/v1/pets/1', { key: writer }), 'pets:read');
});

test('the scope is checked after routing and before validation: 404 and 405 come first, a bad path or a missing pet after', async (t) => {
  const server = await startTestServer(t);
  const reader = await keyWith(server, ['pets:read']);
  const unknown = await server.request('/v1/kennels', { key: reader, method: 'POST' });
  assert.equal(unknown.status, 404);
  assert.equal((await errorBody(unknown)).code, 'not_found');
  const wrongMethod = await server.request('/v1/pets', { key: reader, method: 'PUT' });
  assert.equal(wrongMethod.status, 405);
  await refused(await server.request('/v1/pets/not-a-number', { key: reader, method: 'DELETE' }), 'pets:write');
  await refused(await server.request('/v1/pets/999', { key: reader, method: 'DELETE' }), 'pets:write');
  await refused(await server.post('/v1/pets', 'not json', { key: reader }), 'pets:write');
});

test('orders:manage allows what orders:write allows; a key with neither is told orders:write', async (t) => {
  const server = await startTestServer(t);
  const manager = await keyWith(server, ['orders:manage']);
  const reader = await keyWith(server, ['pets:read']);
  assert.notEqual((await server.request('/v1/store/orders', { key: manager })).status, 403);
  await refused(await server.request('/v1/store/orders', { key: reader }), 'orders:write');
});

test('the OpenAPI document needs no scope; a 403 is counted by the rate limiter and in the metrics', async (t) => {
  const probe = { residentMemoryBytes: () => 0, cpuSeconds: () => 0, startTimeSeconds: () => 0, eventLoopDelay: () => ({ count: 0, sumSeconds: 0, maxSeconds: 0, quantiles: [] }) };
  const metrics = createMetrics(probe);
  const server = await startTestServer(t, { observer: metrics });
  const limited = (await server.service.stores.keys.create({ plan: 'free', scopes: ['orders:write'], now: server.clock() })).key;
  assert.equal((await server.request('/v1/openapi.json', { key: limited })).status, 200);
  const first = await server.request('/v1/pets', { key: limited });
  await refused(first, 'pets:read');
  assert.equal(first.headers.get('x-ratelimit-remaining'), '58', 'the document and the 403 each took a token');
  assert.equal(valueOf(parseExposition(metrics.render()), 'api_key_rejections_total', { code: 'insufficient_scope' }), 1);
});
