import { test } from 'node:test';
import assert from 'node:assert/strict';
import { errorBody, startTestServer } from '../support/test-server.ts';
import { errorCode, rawRequest } from '../support/raw-http.ts';
import type { PetsStore } from '../../src/storage/pets.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';

test('GET /healthz answers ok without a key', async (t) => {
  const server = await startTestServer(t);
  const response = await server.request('/healthz', { key: null });
  assert.equal(response.status, 200);
  assert.deepEqual(await response.json(), { status: 'ok' });
  assert.equal(response.headers.get('content-type'), 'application/json; charset=utf-8');
  const wrong = await server.request('/healthz', { key: null, method: 'POST' });
  assert.equal(wrong.status, 405);
  assert.equal(wrong.headers.get('allow'), 'GET, HEAD');
});

test('every response carries X-Request-Id, Cache-Control: no-store and nosniff', async (t) => {
  const server = await startTestServer(t);
  for (const [path, key] of [['/healthz', null], ['/v1/pets', server.key], ['/v1/pets', null], ['/nowhere', null], ['/v1/store/orders', server.key]] as const) {
    const response = await server.request(path, { key });
    assert.equal(response.headers.get('cache-control'), 'no-store', path);
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff', path);
    assert.match(response.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/, path);
  }
});

test("a client's X-Request-Id is echoed only when it is 1 to 128 safe characters", async (t) => {
  const server = await startTestServer(t);
  const good = 'abc.DEF_123:-x';
  assert.equal((await server.request('/healthz', { headers: { 'x-request-id': good } })).headers.get('x-request-id'), good);
  const long = 'a'.repeat(128);
  assert.equal((await server.request('/healthz', { headers: { 'x-request-id': long } })).headers.get('x-request-id'), long);
  for (const bad of ['a'.repeat(129), 'a b', 'a/b', '<script>', '"x"']) {
    const echoed = (await server.request('/healthz', { headers: { 'x-request-id': bad } })).headers.get('x-request-id');
    assert.match(echoed ?? '', /^[0-9a-f-]{36}$/, bad);
  }
});

test('no Authorization header, another scheme or an empty token: 401 missing_api_key', async (t) => {
  const server = await startTestServer(t);
  for (const authorization of [undefined, 'Basic dXNlcjpwYXNz', 'Bearer', 'Bearer    ', 'Token abc', 'Bearerabc']) {
    const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
    const response = await server.request('/v1/pets', { key: null, headers });
    assert.equal(response.status, 401, String(authorization));
    assert.equal((await errorBody(response)).code, 'missing_api_key');
    assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="pets"');
  }
});

test('an unknown key: 401 invalid_api_key with error="invalid_token"', async (t) => {
  const server = await startTestServer(t);
  const response = await server.request('/v1/pets', { key: 'pk_test_nope' });
  assert.equal(response.status, 401);
  assert.equal((await errorBody(response)).code, 'invalid_api_key');
  assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="pets", error="invalid_token"');
});

test('the Bearer scheme name is case-insensitive', async (t) => {
  const server = await startTestServer(t);
  for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
    const response = await server.request('/v1/pets', { headers: { authorization: `${scheme} ${server.key}` } });
    assert.equal(response.status, 200, scheme);
  }
});

test('two Authorization headers, in any order, spelling or number, are 400 bad_request before identification: nothing counted, nothing run', async (t) => {
  // Node keeps the first of two and drops the other: a request was answered as whichever key came first.
  const server = await startTestServer(t);
  const reader = (await server.service.stores.keys.create({ plan: 'free', scopes: ['pets:read'], now: server.clock() })).key;
  const twice = [
    [`Authorization: Bearer ${reader}`, `Authorization: Bearer ${server.freeKey}`],
    [`Authorization: Bearer ${server.freeKey}`, `Authorization: Bearer ${reader}`],
    [`authorization: Bearer ${server.freeKey}`, `AUTHORIZATION: Bearer ${server.freeKey}`],
    [`Authorization: Bearer ${server.freeKey}`, 'Authorization: ', 'Authorization: Basic eDp5'],
    ['Authorization: Bearer pk_test_nope', 'Authorization: Bearer pk_test_nope'],
  ];
  for (const lines of twice) {
    for (const target of ['POST /v1/pets', 'GET /v1/pets', 'GET /healthz']) {
      const body = target.startsWith('POST') ? '{"name":"Rex","categoryId":1}' : '';
      const head = [`${target} HTTP/1.1`, 'Host: x', ...lines, 'Content-Type: application/json', `Content-Length: ${body.length}`, 'Connection: close'];
      const response = await rawRequest(server.url, `${head.join('\r\n')}\r\n\r\n${body}`);
      const context = `${target} ${lines.join(' / ')}`;
      assert.equal(response.status, 400, context);
      assert.equal(errorCode(response), 'bad_request', context);
      assert.match(JSON.parse(response.body).message, /Authorization/, context);
      assert.equal(response.headers['x-ratelimit-remaining'], undefined, `${context}: not rate limited`);
    }
  }
  assert.equal((server.db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 0, 'nothing was created');
  // Neither key nor the client's address lost a token (60 a minute each on the free plan).
  for (const key of [server.freeKey, reader, null]) {
    assert.equal((await server.request('/v1/store/inventory', { key })).headers.get('x-ratelimit-remaining'), '59', String(key));
  }
  assert.ok(server.logs.every((line) => !line.includes(server.freeKey) && !line.includes(reader)), 'no key in the logs');
});

test('authentication comes before routing: an unknown /v1 path without a key is 401', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await server.request('/v1/nowhere', { key: null })).status, 401);
  const known = await server.request('/v1/nowhere');
  assert.equal(known.status, 404);
  assert.equal((await errorBody(known)).code, 'not_found');
});

test('a path outside /v1 is 404 not_found without asking for a key', async (t) => {
  const server = await startTestServer(t);
  for (const path of ['/', '/pets', '/v2/pets', '/v1pets']) {
    const response = await server.request(path, { key: null });
    assert.equal(response.status, 404, path);
    assert.equal((await errorBody(response)).code, 'not_found');
  }
});

test('a known path with another method: 405 with Allow listing HEAD beside GET', async (t) => {
  const server = await startTestServer(t);
  const cases = [
    ['DELETE', '/v1/pets', 'GET, HEAD, POST'], ['PUT', '/v1/pets/1', 'GET, HEAD, PATCH, DELETE'], ['POST', '/v1/pets/1', 'GET, HEAD, PATCH, DELETE'],
    ['DELETE', '/v1/store/orders', 'GET, HEAD, POST'], ['POST', '/v1/store/orders/1', 'GET, HEAD, PATCH'], ['PUT', '/v1/store/inventory', 'GET, HEAD'],
    ['PATCH', '/v1/pets', 'GET, HEAD, POST'],
  ] as const;
  for (const [method, path, allow] of cases) {
    const response = await server.request(path, { method });
    assert.equal(response.status, 405, `${method} ${path}`);
    assert.equal(response.headers.get('allow'), allow);
    assert.equal((await errorBody(response)).code, 'method_not_allowed');
  }
});

test('HEAD works wherever GET does, with the headers and no body', async (t) => {
  const server = await startTestServer(t);
  await server.post('/v1/pets', { name: 'Rex', categoryId: 1 });
  for (const path of ['/v1/pets', '/v1/pets/1', '/healthz']) {
    const get = await server.request(path);
    const getBody = await get.text();
    const head = await server.request(path, { method: 'HEAD' });
    assert.equal(head.status, get.status, path);
    assert.equal(await head.text(), '');
    assert.equal(head.headers.get('content-length'), String(Buffer.byteLength(getBody)));
  }
  assert.equal((await server.request('/v1/pets/1', { method: 'HEAD' })).headers.get('sunset'), 'Thu, 05 Dec 2030 00:00:00 GMT');
});

test('the store\'s paths need a key like every operation: 401 without one, before 404 and 405', async (t) => {
  const server = await startTestServer(t);
  for (const [path, method] of [['/v1/store/orders', 'GET'], ['/v1/store/orders', 'POST'], ['/v1/store/orders/1', 'PATCH'], ['/v1/store/inventory', 'GET'], ['/v1/store/nothing', 'GET']]) {
    const response = await server.request(path!, { key: null, method: method! });
    assert.equal(response.status, 401, `${method} ${path}`);
    assert.equal((await errorBody(response)).code, 'missing_api_key');
  }
});

test('one JSON access-log line per request, with the key id and never the key', async (t) => {
  const server = await startTestServer(t);
  await server.request('/v1/pets?limit=5', { headers: { 'x-request-id': 'req-1' } });
  await server.request('/v1/pets', { key: 'pk_test_secret-guess', headers: { 'x-request-id': 'req-2' } });
  await new Promise((resolve) => setImmediate(resolve));
  const lines = server.logs.map((line) => JSON.parse(line));
  const first = lines.find((line) => line.requestId === 'req-1');
  assert.deepEqual(Object.keys(first), ['time', 'level', 'requestId', 'method', 'path', 'status', 'durationMs', 'keyId']);
  assert.equal(first.method, 'GET');
  assert.equal(first.path, '/v1/pets');
  assert.equal(first.status, 200);
  assert.equal(first.keyId, server.keyId);
  assert.equal(typeof first.durationMs, 'number');
  const second = lines.find((line) => line.requestId === 'req-2');
  assert.equal(second.status, 401);
  assert.equal(second.keyId, null);
  const all = server.logs.join('\n');
  assert.ok(!all.includes(server.key) && !all.includes('secret-guess') && !/authorization/i.test(all));
});

function failingStore(error: unknown): PetsStore {
  const fail = () => {
    throw error;
  };
  return {
    insertMany: fail, get: fail, list: fail, changeMany: fail, findIdempotencyRecord: fail, purgeIdempotencyRecords: fail, revision: fail, writtenSince: fail,
  };
}

test('an unexpected error is 500 internal_error with no detail, logged by name and stack frames, never its message', async (t) => {
  const server = await startTestServer(t, { overrides: { pets: failingStore(new TypeError('SELECT secret FROM pets WHERE x')) } });
  const response = await server.request('/v1/pets', { headers: { 'x-request-id': 'boom' } });
  assert.equal(response.status, 500);
  const body = await errorBody(response);
  assert.equal(body.code, 'internal_error');
  assert.doesNotMatch(JSON.stringify(body), /SELECT|TypeError|at /);
  await new Promise((resolve) => setImmediate(resolve));
  const logged = server.logs.map((line) => JSON.parse(line)).find((line) => line.event === 'internal_error');
  assert.equal(logged.error, 'TypeError');
  assert.equal(logged.requestId, 'boom');
  // The frames say where the error was made: here, in this test.
  assert.match(logged.frames[0], /^at .*\(file:.*requests\.test\.ts:\d+:\d+\)$/);
  assert.ok(!server.logs.join('\n').includes('SELECT'));
});

test('a database that cannot be written is 503 unavailable, and the server keeps serving', async (t) => {
  const busy = Object.assign(new Error('database is locked'), { code: 'ERR_SQLITE_ERROR', errcode: 5 });
  const db = openDatabase(':memory:');
  const real = createPetsStore(db);
  let fail = true;
  const pets: PetsStore = { ...real, insertMany: (p) => (fail ? failingStore(busy).insertMany(p) : real.insertMany(p)) };
  const server = await startTestServer(t, { overrides: { pets }, db });
  const response = await server.post('/v1/pets', { name: 'Rex', categoryId: 1 });
  assert.equal(response.status, 503);
  assert.equal((await errorBody(response)).code, 'unavailable');
  assert.equal(response.headers.get('retry-after'), '1');
  fail = false;
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 1 })).status, 201);
  db.close();
});

test('once draining, requests are still served but with Connection: close; /healthz is 503 so that a load balancer stops sending traffic', async (t) => {
  // A 503 for every request on an open connection made clients retry what could have been
  // served; and a load balancer must learn to stop sending traffic here.
  const server = await startTestServer(t);
  server.service.app.drain();
  const api = await server.request('/v1/pets');
  assert.equal(api.status, 200);
  assert.equal(api.headers.get('connection'), 'close');
  assert.equal(api.headers.get('x-ratelimit-remaining'), '999999');
  const created = await server.post('/v1/pets', { name: 'Rex', categoryId: 1 });
  assert.equal(created.status, 201);
  assert.equal(created.headers.get('connection'), 'close');
  const health = await server.request('/healthz', { key: null });
  assert.equal(health.status, 503);
  assert.equal((await errorBody(health)).code, 'unavailable');
  assert.equal(health.headers.get('connection'), 'close');
});
