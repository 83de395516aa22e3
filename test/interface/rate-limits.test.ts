/** Rate limiting over HTTP (docs/keys-and-limits.md, "Rate limits"). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorBody, fakeClock, startTestServer, type TestServer } from '../support/test-server.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { needsLoopbackRange, requestFrom } from '../support/loopback.ts';

const LIMIT_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit-policy', 'ratelimit'];

async function exhaust(server: TestServer, key: string | null, count: number, init: RequestInit = {}): Promise<void> {
  for (let i = 0; i < count; i++) {
    const response = await server.request('/v1/pets', { key, ...init });
    assert.notEqual(response.status, 429, `request ${i + 1} of ${count}`);
    await response.body?.cancel();
  }
}

test('a free key gets exactly 60 requests in a minute, then 429 rate_limited with Retry-After: 1', async (t) => {
  const server = await startTestServer(t);
  await exhaust(server, server.freeKey, 60);
  const refused = await server.request('/v1/pets', { key: server.freeKey });
  assert.equal(refused.status, 429);
  const body = await errorBody(refused);
  assert.equal(body.code, 'rate_limited');
  assert.equal(refused.headers.get('retry-after'), '1');
  assert.equal(refused.headers.get('x-ratelimit-limit'), '60');
  assert.equal(refused.headers.get('x-ratelimit-remaining'), '0');
  assert.equal(refused.headers.get('x-ratelimit-reset'), String(server.clock() / 1000 + 60));
  assert.equal(refused.headers.get('ratelimit'), '"minute";r=0;t=60, "day";r=940;t=5184');
  // One token comes back per second.
  server.clock.advance(1000);
  assert.equal((await server.request('/v1/pets', { key: server.freeKey })).status, 200);
  assert.equal((await server.request('/v1/pets', { key: server.freeKey })).status, 429);
});

test('the first request of a free key shows the contract example headers', async (t) => {
  const server = await startTestServer(t);
  const response = await server.request('/v1/pets', { key: server.freeKey });
  assert.equal(response.headers.get('ratelimit-policy'), '"minute";q=60;w=60, "day";q=1000;w=86400');
  assert.equal(response.headers.get('ratelimit'), '"minute";r=59;t=1, "day";r=999;t=87');
  assert.equal(response.headers.get('x-ratelimit-limit'), '60');
  assert.equal(response.headers.get('x-ratelimit-remaining'), '59');
  assert.equal(response.headers.get('x-ratelimit-reset'), String(server.clock() / 1000 + 1));
});

test('every /v1 response carries the limit headers, whatever its status', async (t) => {
  const server = await startTestServer(t);
  server.clock.now = Date.UTC(2030, 11, 5) - 10_000;
  await server.post('/v1/pets', { name: 'Rex', categoryId: 1 });
  const cases: [string, RequestInit & { key?: string | null }, number][] = [
    ['/v1/pets', {}, 200],
    ['/v1/pets/1', {}, 200],
    ['/v1/pets?limit=0', {}, 400],
    ['/v1/pets/abc', {}, 400],
    ['/v1/pets', { key: null }, 401],
    ['/v1/pets', { key: 'pk_test_unknown' }, 401],
    ['/v1/nowhere', {}, 404],
    ['/v1/pets/999', {}, 404],
    ['/v1/pets', { method: 'DELETE' }, 405],
    ['/v1/pets', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'x' }, 415],
    ['/v1/store/orders', {}, 200],
    ['/v1/store/orders', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"petId":999}' }, 404],
  ];
  for (const [path, init, status] of cases) {
    const response = await server.request(path, init);
    assert.equal(response.status, status, `${init.method ?? 'GET'} ${path}`);
    for (const header of LIMIT_HEADERS) assert.ok(response.headers.has(header), `${header} on ${status} ${path}`);
  }
  const created = await server.post('/v1/pets', { name: 'Tom', categoryId: 2 });
  assert.equal(created.status, 201);
  for (const header of LIMIT_HEADERS) assert.ok(created.headers.has(header), `${header} on 201`);
  server.clock.now = Date.UTC(2030, 11, 5);
  const gone = await server.request('/v1/pets/1');
  assert.equal(gone.status, 410);
  for (const header of LIMIT_HEADERS) assert.ok(gone.headers.has(header), `${header} on 410`);
});

test('GET /healthz is never rate limited, even for an address that is refused everywhere else', async (t) => {
  const server = await startTestServer(t);
  for (const method of ['GET', 'HEAD']) {
    const response = await server.request('/healthz', { key: null, method });
    for (const header of LIMIT_HEADERS) assert.equal(response.headers.has(header), false, `${header} on ${method} /healthz`);
  }
  await exhaust(server, null, 60);
  assert.equal((await server.request('/v1/pets', { key: null })).status, 429);
  assert.equal((await server.request('/elsewhere', { key: null })).status, 429);
  assert.equal((await server.request('/healthz', { key: null })).status, 200);
  // GET /docs (another branch serves the page) is exempt by its path.
  const docs = await server.request('/docs', { key: null });
  assert.notEqual(docs.status, 429);
  for (const header of LIMIT_HEADERS) assert.equal(docs.headers.has(header), false, `${header} on GET /docs`);
});

test('paths outside /v1 are limited per address like keyless /v1 requests, and their 404 carries the limit headers', async (t) => {
  // They used to be free: 100 requests with a 15,000-character path cost nothing and added 1.5 MB to the log.
  const server = await startTestServer(t);
  const first = await server.request('/elsewhere', { key: null });
  assert.equal(first.status, 404);
  assert.equal((await errorBody(first)).code, 'not_found');
  for (const header of LIMIT_HEADERS) assert.ok(first.headers.has(header), `${header} on a 404 outside /v1`);
  assert.equal(first.headers.get('x-ratelimit-limit'), '60');
  assert.equal(first.headers.get('x-ratelimit-remaining'), '59');
  // The same bucket as the address's keyless /v1 requests, whatever key is sent.
  const api = await server.request('/v1/pets', { key: null });
  assert.equal(api.headers.get('x-ratelimit-remaining'), '58');
  const withKey = await server.request('/', { key: server.key });
  assert.equal(withKey.status, 404);
  assert.equal(withKey.headers.get('x-ratelimit-remaining'), '57', 'outside /v1 the address is the caller, not the key');
  const post = await server.request('/healthz', { key: null, method: 'POST' });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get('x-ratelimit-remaining'), '56', 'only GET and HEAD of /healthz are free');
  for (let i = 0; i < 56; i++) assert.equal((await server.request(`/junk/${i}`, { key: null })).status, 404);
  const refused = await server.request('/junk', { key: null });
  assert.equal(refused.status, 429);
  assert.equal((await errorBody(refused)).code, 'rate_limited');
  assert.equal(refused.headers.get('retry-after'), '1');
  assert.equal((await server.request('/v1/pets', { key: null })).status, 429);
});

test('a 15,000-character path outside /v1 is limited, and its log line holds at most 256 characters of it', async (t) => {
  const server = await startTestServer(t);
  const path = `/${'x'.repeat(14_999)}`;
  const before = server.logs.length;
  const statuses: number[] = [];
  for (let i = 0; i < 100; i++) {
    const response = await server.request(path, { key: null });
    statuses.push(response.status);
    await response.body?.cancel();
  }
  assert.deepEqual(statuses, [...new Array<number>(60).fill(404), ...new Array<number>(40).fill(429)]);
  await server.close();
  const lines = server.logs.slice(before).filter((line) => line.includes('"path"'));
  assert.equal(lines.length, 100);
  for (const line of lines) {
    const logged = JSON.parse(line).path as string;
    assert.equal(logged.length, 256);
    assert.ok(logged.endsWith('...[cut from 15000 characters]'), logged.slice(-40));
  }
  const bytes = lines.reduce((sum, line) => sum + line.length + 1, 0);
  assert.ok(bytes < 100 * 512, `100 lines took ${bytes} bytes of log`);
});

test('callers without a valid key are limited per address at the free numbers, before authentication', async (t) => {
  const server = await startTestServer(t);
  // Missing and invalid keys share the address's bucket: guessing keys is slow.
  for (let i = 0; i < 60; i++) {
    const response = await server.request('/v1/pets', { key: i % 2 ? null : `pk_test_guess${i}` });
    assert.equal(response.status, 401);
    assert.equal(response.headers.get('x-ratelimit-limit'), '60');
  }
  const refused = await server.request('/v1/pets', { key: 'pk_test_guess' });
  assert.equal(refused.status, 429);
  assert.equal((await errorBody(refused)).code, 'rate_limited');
  // A valid key has its own buckets.
  assert.equal((await server.request('/v1/pets', { key: server.freeKey })).status, 200);
});

test('requests refused later in the pipeline still take a token', async (t) => {
  const server = await startTestServer(t);
  await exhaust(server, server.freeKey, 10);
  for (let i = 0; i < 50; i++) await (await server.request('/v1/pets?limit=0', { key: server.freeKey })).body?.cancel();
  assert.equal((await server.request('/v1/pets', { key: server.freeKey })).status, 429);
});

test('with TRUST_PROXY the last X-Forwarded-For hop is the address; without it the header is ignored', async (t) => {
  const trusting = await startTestServer(t, { config: { trustProxy: true } });
  await exhaust(trusting, null, 60, { headers: { 'x-forwarded-for': '203.0.113.9, 198.51.100.1' } });
  assert.equal((await trusting.request('/v1/pets', { key: null, headers: { 'x-forwarded-for': '198.51.100.1' } })).status, 429);
  assert.equal((await trusting.request('/v1/pets', { key: null, headers: { 'x-forwarded-for': '198.51.100.1, 198.51.100.2' } })).status, 401);

  const ignoring = await startTestServer(t);
  await exhaust(ignoring, null, 60, { headers: { 'x-forwarded-for': '198.51.100.1' } });
  assert.equal((await ignoring.request('/v1/pets', { key: null, headers: { 'x-forwarded-for': '198.51.100.2' } })).status, 429);
});

test('with TRUST_PROXY as a list, a peer that is not listed is limited by its own address whatever X-Forwarded-For it forges, and cannot frame another', async (t) => {
  if (!(await needsLoopbackRange(t))) return;
  // The listed proxy is 127.0.0.2; an outsider reaching the instance directly is 127.0.0.3.
  const server = await startTestServer(t, { config: { trustProxy: ['127.0.0.2'], rateLimitBanThreshold: 5 } });
  const statuses: number[] = [];
  for (let i = 0; i < 70; i++) {
    // A fresh forged address each time used to be a fresh bucket: 300 requests, 300 x 401.
    const answer = await requestFrom(server.url, '127.0.0.3', { headers: { 'x-forwarded-for': `198.51.100.${i}, 203.0.113.7` } });
    statuses.push(answer.status);
  }
  assert.deepEqual(statuses.slice(0, 60), Array(60).fill(401), 'the outsider\'s own 60');
  assert.ok(statuses.slice(60).every((status) => status === 429), 'then its own address is limited, then banned');
  // The address it named (as a proxy would send the victim's request) was never touched.
  const victim = await requestFrom(server.url, '127.0.0.2', { headers: { 'x-forwarded-for': '203.0.113.7' } });
  assert.equal(victim.status, 401);
  assert.equal(victim.headers['x-ratelimit-remaining'], '59');
  // Through the listed proxy, the forwarded address is the caller.
  for (let i = 0; i < 2; i++) await requestFrom(server.url, '127.0.0.2', { headers: { 'x-forwarded-for': '203.0.113.7' } });
  const third = await requestFrom(server.url, '127.0.0.2', { headers: { 'x-forwarded-for': '198.51.100.1, 203.0.113.7' } });
  assert.equal(third.headers['x-ratelimit-remaining'], '56');
});

test('repeated 429s ban the caller: temporarily_banned with Retry-After until the ban ends', async (t) => {
  const server = await startTestServer(t, { config: { rateLimitBanThreshold: 3, rateLimitBanSeconds: 120 } });
  await exhaust(server, server.freeKey, 60);
  assert.equal((await errorBody(await server.request('/v1/pets', { key: server.freeKey }))).code, 'rate_limited');
  assert.equal((await errorBody(await server.request('/v1/pets', { key: server.freeKey }))).code, 'rate_limited');
  const banned = await server.request('/v1/pets', { key: server.freeKey });
  assert.equal(banned.status, 429);
  assert.equal((await errorBody(banned)).code, 'temporarily_banned');
  assert.equal(banned.headers.get('retry-after'), '120');
  // The bucket refills meanwhile, but the ban holds until it ends.
  server.clock.advance(119_000);
  const still = await server.request('/v1/pets', { key: server.freeKey });
  assert.equal((await errorBody(still)).code, 'temporarily_banned');
  assert.equal(still.headers.get('retry-after'), '1');
  server.clock.advance(1_000);
  assert.equal((await server.request('/v1/pets', { key: server.freeKey })).status, 200);
});

test('a restarted server on the same file still limits an exhausted key', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pets-limits-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const clock = fakeClock();
  const db = openDatabase(join(dir, 'limits.db'));
  const first = await startTestServer(t, { db, clock });
  await exhaust(first, first.freeKey, 60);
  first.service.stores.upkeep.saveLimiterState!();
  await first.close();
  db.close();

  const reopened = openDatabase(join(dir, 'limits.db'));
  t.after(() => reopened.close());
  const second = await startTestServer(t, { db: reopened, clock });
  const response = await second.request('/v1/pets', { key: first.freeKey });
  assert.equal(response.status, 429);
  assert.equal((await errorBody(response)).code, 'rate_limited');
});

test('a revoked key is refused on the very next request', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await server.request('/v1/pets', { key: server.freeKey })).status, 200);
  assert.ok(server.service.stores.keys.revoke(server.freeKeyId, server.clock()));
  const response = await server.request('/v1/pets', { key: server.freeKey });
  assert.equal(response.status, 401);
  assert.equal((await errorBody(response)).code, 'invalid_api_key');
});

test('an expired key is refused from its expiry on', async (t) => {
  const server = await startTestServer(t);
  const { key } = server.service.stores.keys.create({ plan: 'pro', now: server.clock(), expiresAt: server.clock() + 60_000 });
  const first = await server.request('/v1/pets', { key });
  assert.equal(first.status, 200);
  assert.equal(first.headers.get('x-ratelimit-limit'), '300');
  server.clock.advance(60_000);
  assert.equal((await errorBody(await server.request('/v1/pets', { key }))).code, 'invalid_api_key');
});

test('an enterprise key is limited by its own numbers', async (t) => {
  const server = await startTestServer(t);
  const { key } = server.service.stores.keys.create({ plan: 'enterprise', perMinute: 5, perDay: 7, now: server.clock() });
  await exhaust(server, key, 5);
  const refused = await server.request('/v1/pets', { key });
  assert.equal(refused.status, 429);
  assert.equal(refused.headers.get('ratelimit-policy'), '"minute";q=5;w=60, "day";q=7;w=86400');
});
