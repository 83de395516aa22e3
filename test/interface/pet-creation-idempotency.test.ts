import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../../src/http/api-error.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { fingerprintBody } from '../../src/api/idempotency.ts';
import { createPetCreations } from '../../src/api/pets/creations.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';
import type { NewPet, PetsStore } from '../../src/storage/pets.ts';
import { purgeInChunks } from '../../src/service/chores.ts';
import { errorBody, fakeClock, startTestServer, type TestServer } from '../support/test-server.ts';

const DAY = 24 * 60 * 60 * 1000;
const rex: NewPet = { name: 'Rex', categoryId: 1n, status: 'available' };
const caller = { account: 'default', keyId: 'key_a' };

function count(server: { db: TestServer['db'] }, table = 'pets'): number {
  return (server.db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
}

function idempotent(key: string, init: RequestInit & { key?: string | null } = {}) {
  return { ...init, headers: { ...(init.headers as Record<string, string>), 'idempotency-key': key } };
}

/** The create path over a real in-memory store, with batches flushed when the test says. */
function creations(pets?: PetsStore) {
  const db = openDatabase(':memory:');
  const store = pets ?? createPetsStore(db);
  const flushes: (() => void)[] = [];
  const clock = fakeClock();
  const created = createPetCreations({ pets: store, clock, schedule: (flush) => void flushes.push(flush) });
  return { db, store, clock, created, flush: () => flushes.shift()!() };
}

// --- the create path, batch by batch --------------------------------------------------------

test('while the first request with a key is being stored, another with that key is 409 idempotency_key_in_flight', async () => {
  const { created, flush } = creations();
  const idempotency = { key: 'k', fingerprint: 'same' };
  const first = created.create(rex, caller, idempotency);
  for (const fingerprint of ['same', 'other']) {
    await assert.rejects(created.create(rex, caller, { key: 'k', fingerprint }), (error: unknown) => error instanceof ApiError && error.code === 'idempotency_key_in_flight');
  }
  const otherApiKey = created.create(rex, { account: 'default', keyId: 'key_b' }, idempotency);
  flush();
  assert.equal((await first).status, 201);
  assert.equal((await otherApiKey).status, 201, 'the same key of another API key is not in flight');
  const replay = await created.create(rex, caller, idempotency);
  assert.equal(replay.headers?.['Idempotent-Replayed'], 'true');
});

test('a failed batch answers each of its requests with the error and remembers none of their keys', async () => {
  const db = openDatabase(':memory:');
  const real = createPetsStore(db);
  const full = Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });
  let fail = true;
  const { created, flush } = creations({ ...real, insertMany: (pets) => (fail ? (() => { throw full; })() : real.insertMany(pets)) });
  const batch = ['a', 'b', 'c'].map((key) => created.create(rex, caller, { key, fingerprint: 'f' }).catch((error: unknown) => error));
  flush();
  assert.deepEqual(await Promise.all(batch), [full, full, full]);
  fail = false;
  const retry = created.create(rex, caller, { key: 'a', fingerprint: 'f' });
  flush();
  assert.equal((await retry).status, 201, 'the key is free again: no 409, no replay of the failure');
});

// --- over HTTP --------------------------------------------------------------------------------

test('a retry with the same key and body replays the first 201 with Idempotent-Replayed: true and creates nothing', async (t) => {
  const server = await startTestServer(t);
  const first = await server.post('/v1/pets', { name: 'Rex', categoryId: 7 }, idempotent('order-1'));
  assert.equal(first.status, 201);
  assert.equal(first.headers.get('idempotent-replayed'), null, 'the first response is not a replay');
  const firstBody = await first.text();
  for (const [header, body] of [['order-1', '{"name":"Rex","categoryId":7}'], ['"order-1"', '{"categoryId":7, "name":"R\\u0065x"}']] as const) {
    const again = await server.post('/v1/pets', body, idempotent(header));
    assert.equal(again.status, 201, header);
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.equal(again.headers.get('location'), first.headers.get('location'));
    assert.equal(await again.text(), firstBody);
    assert.match(again.headers.get('x-ratelimit-remaining') ?? '', /^\d+$/, 'a replay still carries the rate-limit headers');
  }
  assert.equal(count(server), 1);
});

test('the same key with a different body is 422 idempotency_key_reused, and nothing is created', async (t) => {
  const server = await startTestServer(t);
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 7 }, idempotent('k'))).status, 201);
  for (const body of [{ name: 'Rex', categoryId: 8 }, { name: 'Rex', categoryId: 7, status: 'available' }]) {
    const response = await server.post('/v1/pets', body, idempotent('k'));
    assert.equal(response.status, 422, JSON.stringify(body));
    assert.equal((await errorBody(response)).code, 'idempotency_key_reused');
  }
  assert.equal(count(server), 1);
});

test('keys are scoped by API key: the same key from two API keys creates two pets, each replaying its own', async (t) => {
  const server = await startTestServer(t);
  const mine = await (await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, idempotent('shared'))).text();
  const theirs = await (await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, idempotent('shared', { key: server.freeKey }))).text();
  assert.notEqual(mine, theirs);
  assert.equal(await (await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, idempotent('shared'))).text(), mine);
  assert.equal(await (await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, idempotent('shared', { key: server.freeKey }))).text(), theirs);
  const other = await server.post('/v1/pets', { name: 'Tom', categoryId: 1 }, idempotent('shared', { key: server.freeKey }));
  assert.equal(other.status, 422, "the other key's body does not count as this key's");
  assert.equal(count(server), 2);
});

test('a key is remembered for 24 h: a replay just before, a new create from then on (injected clock)', async (t) => {
  const server = await startTestServer(t);
  const first = await (await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, idempotent('k'))).text();
  server.clock.advance(DAY - 1);
  const late = await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, idempotent('k'));
  assert.equal(late.headers.get('idempotent-replayed'), 'true');
  assert.equal(await late.text(), first);
  server.clock.advance(1);
  const expired = await server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, idempotent('k'));
  assert.equal(expired.status, 201, 'an expired key is free for any body');
  assert.equal(expired.headers.get('idempotent-replayed'), null);
  const second = await expired.text();
  assert.equal(await (await server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, idempotent('k'))).text(), second, 'and is remembered afresh');
  assert.equal(count(server), 2);
  server.clock.advance(DAY);
  assert.equal(await purgeInChunks((limit) => server.service.stores.upkeep.purgeExpiredRecords(server.clock(), limit)), 1);
  assert.equal(count(server, 'idempotency_keys'), 0);
});

test('a bad Idempotency-Key is 400 invalid_idempotency_key, checked before the body: empty, media type, size, JSON, fields', async (t) => {
  const server = await startTestServer(t);
  const cases: [string, RequestInit][] = [
    ['empty body', { body: '' }],
    ['wrong media type', { body: '{}', headers: { 'content-type': 'text/plain' } }],
    ['too large', { body: 'x'.repeat(20_000) }],
    ['invalid JSON', { body: '{' }],
    ['invalid fields', { body: '{"id":1}' }],
  ];
  for (const header of ['', '""', 'a b', 'x'.repeat(256)]) {
    for (const [name, init] of cases) {
      const headers = { 'content-type': 'application/json', ...(init.headers as Record<string, string>), 'idempotency-key': header };
      const response = await server.request('/v1/pets', { ...init, method: 'POST', headers });
      assert.equal(response.status, 400, `${name} with ${JSON.stringify(header)}`);
      assert.equal((await errorBody(response)).code, 'invalid_idempotency_key');
    }
  }
  assert.equal(count(server), 0);
});

test('rate limiting, authentication and routing come before the Idempotency-Key check', async (t) => {
  const server = await startTestServer(t);
  const bad = { 'idempotency-key': '' };
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, { key: null, headers: bad })).status, 401);
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, { key: 'pk_test_nope', headers: bad })).status, 401);
  assert.equal((await server.request('/v1/pets', { method: 'DELETE', headers: bad })).status, 405);
  assert.equal((await server.post('/v1/nowhere', { name: 'Rex', categoryId: 1 }, { headers: bad })).status, 404);
  for (let i = 0; i < 60; i++) await server.request('/v1/pets', { key: server.freeKey });
  const limited = await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, { key: server.freeKey, headers: bad });
  assert.equal(limited.status, 429);
});

test('requests refused before the operation ran are not remembered: the key stays free for a valid body', async (t) => {
  const server = await startTestServer(t);
  const refusals: [number, RequestInit][] = [
    [400, { body: '{"name":""}' }],
    [400, { body: '{' }],
    [415, { body: '{"name":"Rex","categoryId":1}', headers: { 'content-type': 'text/plain' } }],
    [413, { body: 'x'.repeat(20_000) }],
  ];
  for (const [status, init] of refusals) {
    const headers = { 'content-type': 'application/json', ...(init.headers as Record<string, string>), 'idempotency-key': 'k' };
    assert.equal((await server.request('/v1/pets', { ...init, method: 'POST', headers })).status, status);
  }
  assert.equal(count(server, 'idempotency_keys'), 0);
  const response = await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, idempotent('k'));
  assert.equal(response.status, 201);
  assert.equal(response.headers.get('idempotent-replayed'), null);
});

test('concurrent creates are all stored once, each with its own id, in fewer transactions than creates at most', async (t) => {
  const db = openDatabase(':memory:');
  const real = createPetsStore(db);
  const batches: number[] = [];
  const pets: PetsStore = { ...real, insertMany: (creations) => (batches.push(creations.length), real.insertMany(creations)) };
  const server = await startTestServer(t, { db, overrides: { pets } });
  t.after(() => db.close());
  const responses = await Promise.all(Array.from({ length: 50 }, (_, i) =>
    server.post('/v1/pets', { name: `pet ${i}`, categoryId: i + 1 }, i % 2 ? idempotent(`k${i}`) : {})));
  const bodies = await Promise.all(responses.map((response) => response.json() as Promise<{ id: number; name: string }>));
  assert.deepEqual(responses.map((response) => response.status), Array(50).fill(201));
  assert.equal(new Set(bodies.map((body) => body.id)).size, 50);
  assert.deepEqual(bodies.map((body) => body.name), Array.from({ length: 50 }, (_, i) => `pet ${i}`));
  assert.equal(count(server), 50);
  assert.equal(count(server, 'idempotency_keys'), 25);
  assert.equal(batches.reduce((sum, size) => sum + size, 0), 50);
  assert.ok(batches.length <= 50);
});

test('the fingerprint of a stored record is that of the body as sent', async (t) => {
  const server = await startTestServer(t);
  await server.post('/v1/pets', '{"categoryId":1,"name":"Rex"}', idempotent('k'));
  const row = server.db.prepare('SELECT fingerprint FROM idempotency_keys').get() as { fingerprint: string };
  assert.equal(row.fingerprint, fingerprintBody({ name: 'Rex', categoryId: 1n }));
});
