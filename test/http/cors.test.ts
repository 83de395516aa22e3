import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { ALLOWED_REQUEST_HEADERS, createCors, EXPOSED_HEADERS, isPreflight } from '../../src/http/cors.ts';

const SHOP = 'https://shop.example';
/** docs/api.md, "Cross-origin requests": exactly these, so that a page can read every header a client needs. */
const CONTRACT_EXPOSED =
  'X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, RateLimit, RateLimit-Policy, Retry-After, Link, Location, ETag, Deprecation, Sunset, X-Request-Id, Idempotent-Replayed';

test('unset: there is no CORS policy, so no header is ever added', () => {
  assert.equal(createCors(null), null);
});

test('an allowed origin gets itself back, Vary: Origin and the exposed headers of the contract', () => {
  const cors = createCors([SHOP, 'http://localhost:3000'])!;
  assert.deepEqual(cors.responseHeaders(SHOP), {
    'Access-Control-Allow-Origin': SHOP,
    Vary: 'Origin',
    'Access-Control-Expose-Headers': CONTRACT_EXPOSED,
  });
  assert.equal(cors.responseHeaders('http://localhost:3000')['Access-Control-Allow-Origin'], 'http://localhost:3000');
  assert.equal(EXPOSED_HEADERS.join(', '), CONTRACT_EXPOSED);
});

test('an origin that is not listed, or no Origin, gets only Vary: Origin', () => {
  const cors = createCors([SHOP])!;
  // Near misses are other origins: comparison is exact, as browsers serialise origins.
  for (const origin of [undefined, 'https://evil.example', 'https://shop.example.evil.example', 'http://shop.example', 'https://shop.example:8443', 'null', `${SHOP}, ${SHOP}`, '']) {
    assert.deepEqual(cors.responseHeaders(origin), { Vary: 'Origin' }, String(origin));
  }
});

test('* lets every origin read, with Access-Control-Allow-Origin: *', () => {
  const cors = createCors('*')!;
  for (const origin of [SHOP, 'http://127.0.0.1:5173', 'null']) {
    assert.equal(cors.responseHeaders(origin)['Access-Control-Allow-Origin'], '*');
    assert.equal(cors.responseHeaders(origin).Vary, 'Origin');
  }
  assert.deepEqual(cors.responseHeaders(undefined), { Vary: 'Origin' });
});

test('credentials are never allowed', () => {
  for (const cors of [createCors('*')!, createCors([SHOP])!]) {
    const all = { ...cors.responseHeaders(SHOP), ...cors.preflight(SHOP, 'GET, HEAD, POST') };
    assert.ok(!Object.keys(all).some((name) => name.toLowerCase() === 'access-control-allow-credentials'));
  }
});

test('a preflight from an allowed origin gets the path methods, the request headers and a max age', () => {
  assert.deepEqual(createCors([SHOP])!.preflight(SHOP, 'GET, HEAD, POST'), {
    'Access-Control-Allow-Origin': SHOP,
    'Access-Control-Allow-Methods': 'GET, HEAD, POST',
    'Access-Control-Allow-Headers': 'Authorization, Content-Type, Idempotency-Key, If-Match, Last-Event-ID, X-Request-Id',
    'Access-Control-Max-Age': '600',
    Vary: 'Origin',
  });
  assert.equal(createCors('*')!.preflight(SHOP, 'GET, HEAD')!['Access-Control-Allow-Origin'], '*');
  assert.deepEqual([...ALLOWED_REQUEST_HEADERS], ['Authorization', 'Content-Type', 'Idempotency-Key', 'If-Match', 'Last-Event-ID', 'X-Request-Id']);
});

test('a preflight from another origin learns nothing, not even whether the path exists', () => {
  const cors = createCors([SHOP])!;
  assert.deepEqual(cors.preflight('https://evil.example', 'GET, HEAD, POST'), { Vary: 'Origin' });
  assert.deepEqual(cors.preflight('https://evil.example', null), { Vary: 'Origin' });
});

test('a preflight from an allowed origin to a path with no route is null (answered 404)', () => {
  assert.equal(createCors([SHOP])!.preflight(SHOP, null), null);
  assert.equal(createCors('*')!.preflight(SHOP, null), null);
});

test('a preflight is OPTIONS with Origin and Access-Control-Request-Method, nothing less', () => {
  const request = (method: string, headers: Record<string, string>) => ({ method, headers }) as unknown as IncomingMessage;
  assert.equal(isPreflight(request('OPTIONS', { origin: SHOP, 'access-control-request-method': 'POST' })), true);
  assert.equal(isPreflight(request('OPTIONS', { origin: SHOP })), false);
  assert.equal(isPreflight(request('OPTIONS', { 'access-control-request-method': 'POST' })), false);
  assert.equal(isPreflight(request('GET', { origin: SHOP, 'access-control-request-method': 'POST' })), false);
});
