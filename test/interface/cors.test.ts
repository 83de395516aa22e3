/**
 * CORS through the real server (docs/api.md, "Cross-origin requests"). Answers to API
 * requests go through `server.request`, so they are also checked against the OpenAPI document;
 * preflights are the browser's protocol, not operations of the document, so they use fetch as is.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { errorBody, startTestServer, type TestServer } from '../support/test-server.ts';
import type { AllowedOrigins } from '../../src/config.ts';
import { rawRequest } from '../support/raw-http.ts';

const SHOP = 'https://shop.example';
const EXPOSED =
  'X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, RateLimit, RateLimit-Policy, Retry-After, Link, Location, ETag, Deprecation, Sunset, X-Request-Id, Idempotent-Replayed';

const withCors = (t: Parameters<typeof startTestServer>[0], corsAllowedOrigins: AllowedOrigins | null = [SHOP, 'http://127.0.0.1:5173']) =>
  startTestServer(t, { config: { corsAllowedOrigins } });

/** A browser's preflight: OPTIONS with Origin and Access-Control-Request-Method, and never a key. */
function preflight(server: TestServer, path: string, origin: string, method = 'GET', requestHeaders = 'authorization') {
  return fetch(server.url + path, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': requestHeaders },
  });
}

/** Header names of a response that belong to the CORS protocol. */
const corsNames = (response: Response) => [...response.headers.keys()].filter((name) => name.startsWith('access-control-'));

test('unset CORS_ALLOWED_ORIGINS: no CORS header on any answer, whatever the Origin', async (t) => {
  const server = await withCors(t, null);
  for (const [path, key] of [['/v1/pets', server.key], ['/v1/pets', null], ['/v1/nowhere', server.key], ['/healthz', null], ['/docs', null]] as const) {
    const response = await server.request(path, { key, headers: { origin: SHOP } });
    assert.deepEqual(corsNames(response), [], path);
    assert.equal(response.headers.get('vary'), null, path);
  }
});

test('unset CORS_ALLOWED_ORIGINS: a preflight is an ordinary OPTIONS request, answered as in 1.0', async (t) => {
  const server = await withCors(t, null);
  const anonymous = await server.request('/v1/pets', { method: 'OPTIONS', key: null, headers: { origin: SHOP, 'access-control-request-method': 'GET' } });
  assert.equal(anonymous.status, 401);
  assert.equal(anonymous.headers.get('x-ratelimit-remaining'), '59', 'it counts like any /v1 request');
  const keyed = await server.request('/v1/pets', { method: 'OPTIONS', headers: { origin: SHOP, 'access-control-request-method': 'GET' } });
  assert.equal(keyed.status, 405);
  assert.equal(keyed.headers.get('allow'), 'GET, HEAD, POST');
  assert.deepEqual([...corsNames(anonymous), ...corsNames(keyed)], []);
});

test('an allowed origin can read every answer: the origin, Vary: Origin and the exposed headers, errors included', async (t) => {
  const server = await withCors(t);
  await server.post('/v1/pets', { name: 'Rex', categoryId: 1 });
  const answers = [
    await server.request('/v1/pets', { headers: { origin: SHOP } }),
    await server.post('/v1/pets', { name: 'Nemo', categoryId: 3 }, { headers: { origin: SHOP } }),
    await server.request('/v1/pets/1', { headers: { origin: SHOP } }),
    await server.request('/v1/pets', { key: null, headers: { origin: SHOP } }),
    await server.request('/v1/pets?limit=0', { headers: { origin: SHOP } }),
    await server.request('/v1/nowhere', { headers: { origin: SHOP } }),
    await server.request('/v1/openapi.json', { key: null, headers: { origin: SHOP } }),
  ];
  assert.deepEqual(answers.map((response) => response.status), [200, 201, 200, 401, 400, 404, 200]);
  for (const response of answers) {
    assert.equal(response.headers.get('access-control-allow-origin'), SHOP);
    assert.equal(response.headers.get('vary'), 'Origin');
    assert.equal(response.headers.get('access-control-expose-headers'), EXPOSED);
    assert.equal(response.headers.get('access-control-allow-credentials'), null);
    await response.body?.cancel();
  }
  // Another allowed origin gets itself back, not the first one.
  const local = await server.request('/v1/pets', { headers: { origin: 'http://127.0.0.1:5173' } });
  assert.equal(local.headers.get('access-control-allow-origin'), 'http://127.0.0.1:5173');
});

test('a 429 is readable from an allowed origin, so a page can honour Retry-After', async (t) => {
  const server = await withCors(t);
  for (let i = 0; i < 60; i++) await (await server.request('/v1/pets', { key: server.freeKey })).body?.cancel();
  const refused = await server.request('/v1/pets', { key: server.freeKey, headers: { origin: SHOP } });
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get('access-control-allow-origin'), SHOP);
  assert.match(refused.headers.get('access-control-expose-headers')!, /\bRetry-After\b/);
});

test('another origin, or none, gets Vary: Origin and no Access-Control-* header', async (t) => {
  const server = await withCors(t);
  for (const origin of ['https://evil.example', 'https://shop.example.evil.example', 'http://shop.example', 'null', undefined]) {
    const response = await server.request('/v1/pets', { headers: origin === undefined ? {} : { origin } });
    assert.equal(response.status, 200, 'the server answers; the browser withholds the answer from the page');
    assert.deepEqual(corsNames(response), [], String(origin));
    assert.equal(response.headers.get('vary'), 'Origin');
    await response.body?.cancel();
  }
});

test('* lets any origin read, with Access-Control-Allow-Origin: * and still no credentials', async (t) => {
  const server = await withCors(t, '*');
  const response = await server.request('/v1/pets', { headers: { origin: 'https://anyone.example' } });
  assert.equal(response.headers.get('access-control-allow-origin'), '*');
  assert.equal(response.headers.get('access-control-expose-headers'), EXPOSED);
  assert.equal(response.headers.get('access-control-allow-credentials'), null);
  const asked = await preflight(server, '/v1/pets', 'https://anyone.example', 'POST', 'authorization, content-type');
  assert.equal(asked.status, 204);
  assert.equal(asked.headers.get('access-control-allow-origin'), '*');
});

test('a preflight from an allowed origin: 204 with the path methods, the allowed request headers and a max age', async (t) => {
  const server = await withCors(t);
  for (const [path, methods] of [
    ['/v1/pets', 'GET, HEAD, POST'], ['/v1/pets/1', 'GET, HEAD, PATCH, DELETE'], ['/v1/pets/abc', 'GET, HEAD, PATCH, DELETE'],
    ['/v1/store/orders', 'GET, HEAD, POST'], ['/v1/store/orders/1', 'GET, HEAD, PATCH'], ['/v1/store/inventory', 'GET, HEAD'], ['/v1/openapi.json', 'GET, HEAD'],
  ]) {
    const response = await preflight(server, path!, SHOP, 'GET');
    assert.equal(response.status, 204, path);
    assert.deepEqual(Object.fromEntries([...response.headers].filter(([name]) => name.startsWith('access-control-') || name === 'vary')), {
      'access-control-allow-origin': SHOP,
      'access-control-allow-methods': methods,
      'access-control-allow-headers': 'Authorization, Content-Type, Idempotency-Key, If-Match, Last-Event-ID, X-Request-Id',
      'access-control-max-age': '600',
      vary: 'Origin',
    }, path);
    assert.equal(await response.text(), '');
    // No content: neither a length nor a type (RFC 9110, 8.6); the common headers as everywhere.
    assert.equal(response.headers.get('content-length'), null);
    assert.equal(response.headers.get('content-type'), null);
    assert.equal(response.headers.get('cache-control'), 'no-store');
    assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
    assert.match(response.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
  }
});

test('a preflight for a method the path does not have still lists the path methods (the browser refuses)', async (t) => {
  const server = await withCors(t);
  const response = await preflight(server, '/v1/pets', SHOP, 'PUT');
  assert.equal(response.status, 204);
  assert.equal(response.headers.get('access-control-allow-methods'), 'GET, HEAD, POST');
});

test('preflights need no key and take no token: the address still has its whole minute after 70 of them', async (t) => {
  const server = await withCors(t);
  for (let i = 0; i < 70; i++) {
    const origin = i % 2 === 0 ? SHOP : 'https://evil.example';
    const response = await preflight(server, i % 3 === 0 ? '/v1/nowhere' : '/v1/pets', origin);
    assert.ok(response.status === 204 || response.status === 404, String(response.status));
    for (const name of response.headers.keys()) assert.ok(!name.startsWith('x-ratelimit-') && !name.startsWith('ratelimit'), name);
    await response.body?.cancel();
  }
  const first = await server.request('/v1/pets', { key: null });
  assert.equal(first.status, 401);
  assert.equal(first.headers.get('x-ratelimit-remaining'), '59');
});

test('a preflight from another origin: 204 and no Access-Control-* header, whether the path exists or not', async (t) => {
  const server = await withCors(t);
  for (const path of ['/v1/pets', '/v1/nowhere']) {
    const response = await preflight(server, path, 'https://evil.example', 'POST');
    assert.equal(response.status, 204, path);
    assert.deepEqual(corsNames(response), [], path);
    assert.equal(response.headers.get('vary'), 'Origin');
  }
});

test('a preflight from an allowed origin to an unknown /v1 path: 404 not_found, unlimited, readable', async (t) => {
  const server = await withCors(t);
  const response = await preflight(server, '/v1/nowhere', SHOP, 'GET');
  assert.equal(response.status, 404);
  assert.equal((await errorBody(response)).code, 'not_found');
  assert.equal(response.headers.get('access-control-allow-origin'), SHOP);
  assert.equal(response.headers.get('access-control-allow-methods'), null, 'nothing is allowed on a path that does not exist');
  assert.equal(response.headers.get('x-ratelimit-remaining'), null);
});

test('an OPTIONS that is not a preflight goes through the pipeline as before', async (t) => {
  const server = await withCors(t);
  const anonymous = await server.request('/v1/pets', { method: 'OPTIONS', key: null, headers: { origin: SHOP } });
  assert.equal(anonymous.status, 401);
  const keyed = await server.request('/v1/pets', { method: 'OPTIONS' });
  assert.equal(keyed.status, 405);
  assert.equal(keyed.headers.get('allow'), 'GET, HEAD, POST');
});

test('preflights are logged like every request, without a key id', async (t) => {
  const server = await withCors(t);
  await (await preflight(server, '/v1/pets', SHOP)).body?.cancel();
  await server.close();
  const line = server.logs.map((text) => JSON.parse(text)).find((entry) => entry.method === 'OPTIONS');
  assert.deepEqual([line.path, line.status, line.keyId], ['/v1/pets', 204, null]);
});

test('with *, even an answer the HTTP server writes itself (431) is readable; with a list of origins it is not', async (t) => {
  const tooLarge = `GET /v1/pets HTTP/1.1\r\nHost: x\r\nOrigin: ${SHOP}\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`;
  const any = await withCors(t, '*');
  const readable = await rawRequest(any.url, tooLarge);
  assert.equal(readable.status, 431);
  assert.equal(readable.headers['access-control-allow-origin'], '*');
  assert.equal(readable.headers['access-control-expose-headers'], EXPOSED);
  assert.equal(readable.headers.vary, 'Origin');
  // The Origin of a request Node could not read is unknown, so a list of origins cannot answer it.
  const listed = await withCors(t);
  const unreadable = await rawRequest(listed.url, tooLarge);
  assert.equal(unreadable.status, 431);
  assert.deepEqual(Object.keys(unreadable.headers).filter((name) => name.startsWith('access-control-') || name === 'vary'), []);
});
