/**
 * The event feed over HTTP (`GET /v1/events`), on both engines: what each change writes as the
 * API renders it, who sees which events and which actors, the query's rules and the `Link` to
 * follow, the long poll (woken by a commit, timed out, answered at once by the drain) and `410`
 * after retention; and the metrics' count of events.
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { Scope } from '../../src/keys/scopes.ts';
import { createMetrics } from '../../src/ops/metrics.ts';
import { startProcessProbe } from '../../src/ops/process-probe.ts';
import { parseExposition, valueOf } from '../support/prometheus-text.ts';
import type { Service } from '../../src/service/service.ts';
import { describeWithPostgres, openTestDatabase } from '../support/postgres.ts';
import { errorBody, json, startPostgresTestServer, startTestServer, type TestServer } from '../support/test-server.ts';

/** A test server of either engine. */
type FeedServer = Omit<TestServer, 'db' | 'service'> & { service: Service };

interface Issued {
  key: string;
  keyId: string;
  account: string;
}

async function keyWith(server: FeedServer, scopes: Scope[], account?: string): Promise<Issued> {
  const issued = await server.service.stores.keys.create({ plan: 'enterprise', perMinute: 1000, perDay: 100_000, scopes, now: server.clock(), ...(account ? { account } : {}) });
  return { key: issued.key, keyId: issued.record.id, account: issued.record.account };
}

const patch = (server: FeedServer, path: string, body: unknown, key: string) =>
  server.request(path, { key, method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify(body) });

/** The cases every engine passes, over servers that `start` makes. */
function feedCases(start: (t: TestContext) => Promise<FeedServer>): void {
  test('each change is an event with the resource as the API renders it; order events only to their account or orders:manage, actors hidden from others', async (t) => {
    const server = await start(t);
    const staff = await keyWith(server, ['pets:read', 'pets:write', 'orders:manage', 'events:read']);
    const adopter = await keyWith(server, ['pets:read', 'orders:write', 'events:read']);
    const other = await keyWith(server, ['events:read']);
    const pet = await json(await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, { key: staff.key }));
    const order = await json(await server.post('/v1/store/orders', { petId: pet.id }, { key: adopter.key }));
    assert.equal((await patch(server, `/v1/pets/${pet.id}`, {}, staff.key)).status, 200, 'changes nothing');
    assert.equal((await patch(server, `/v1/store/orders/${order.id}`, { status: 'approved' }, staff.key)).status, 200);

    const byStaff = await server.request('/v1/events', { key: staff.key });
    assert.equal(byStaff.status, 200);
    assert.equal(byStaff.headers.get('link'), '</v1/events?after=4&limit=20>; rel="next"');
    const text = await byStaff.text();
    const events = JSON.parse(text);
    assert.deepEqual(events.map((event: { type: string }) => event.type), ['pet.created', 'order.placed', 'pet.updated', 'order.approved']);
    assert.ok(text.startsWith(`[{"id":1,"type":"pet.created","occurredAt":"`), 'fields in the interface\'s order');
    assert.deepEqual(events[0].actor, { account: staff.account, keyId: staff.keyId });
    assert.deepEqual(events[0].data, pet);
    assert.deepEqual(events[1].data, order, 'the order exactly as its 201 rendered it');
    assert.deepEqual(events[1].actor, { account: adopter.account, keyId: adopter.keyId });
    assert.deepEqual(events[2].data, { ...pet, status: 'pending' });
    assert.equal(events[3].data.status, 'approved');
    assert.match(events[0].occurredAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const byAdopter = await json(await server.request('/v1/events', { key: adopter.key }));
    assert.deepEqual(byAdopter.map((event: { id: number }) => event.id), [1, 2, 3, 4], 'its own order\'s events');
    assert.equal(byAdopter[0].actor, null, 'staff\'s key is not of its account');
    assert.deepEqual(byAdopter[2].actor, { account: adopter.account, keyId: adopter.keyId });
    const byOther = await json(await server.request('/v1/events', { key: other.key }));
    assert.deepEqual(byOther.map((event: { id: number; actor: unknown }) => [event.id, event.actor]), [[1, null], [3, null]], 'pet events only, no one named');

    const wrongMethod = await server.request('/v1/events', { method: 'POST' });
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get('allow'), 'GET, HEAD');
    const refused = await server.request('/v1/events', { key: (await keyWith(server, ['pets:read', 'orders:manage'])).key });
    assert.equal(refused.status, 403);
    assert.equal((await errorBody(refused)).code, 'insufficient_scope');
  });

  test('a page follows after, limit and types; its Link carries them, and an empty page keeps after (0 when omitted)', async (t) => {
    const server = await start(t);
    for (const name of ['a', 'b', 'c']) await server.post('/v1/pets', { name, categoryId: 1 });
    await server.request('/v1/pets/2', { method: 'DELETE' });
    const first = await server.request('/v1/events?limit=2&types=pet.created,pet.deleted');
    assert.deepEqual((await json(first)).map((event: { id: number }) => event.id), [1, 2]);
    assert.equal(first.headers.get('link'), '</v1/events?after=2&limit=2&types=pet.created,pet.deleted>; rel="next"');
    const second = await server.request('/v1/events?after=2&limit=2&types=pet.created,pet.deleted&wait=0');
    const page = await json(second);
    assert.deepEqual(page.map((event: { id: number }) => event.id), [3, 4]);
    assert.deepEqual(page[1], { id: 4, type: 'pet.deleted', occurredAt: page[1].occurredAt, actor: page[1].actor, data: { id: 2 } });
    assert.equal(second.headers.get('link'), '</v1/events?after=4&limit=2&types=pet.created,pet.deleted&wait=0>; rel="next"');
    const empty = await server.request('/v1/events?after=4');
    assert.deepEqual(await json(empty), []);
    assert.equal(empty.headers.get('link'), '</v1/events?after=4&limit=20>; rel="next"');
    const none = await server.request('/v1/events?types=order.placed');
    assert.equal(none.headers.get('link'), '</v1/events?after=0&limit=20&types=order.placed>; rel="next"');
    for (const query of ['limit=0', 'limit=101', 'types=pet.eaten', 'types=', 'wait=31', 'wait=-1', 'after=-1', 'after=x', 'cursor=abc', 'after=1&after=2']) {
      const response = await server.request(`/v1/events?${query}`);
      assert.equal(response.status, 400, query);
      assert.equal((await errorBody(response)).code, 'invalid_query', query);
    }
  });

  test('with wait, an empty page answers when an event the key may see commits, and at the end of the wait with []', async (t) => {
    const server = await start(t);
    const other = await keyWith(server, ['events:read']);
    const started = Date.now();
    const waiting = server.request('/v1/events?after=0&wait=10', { key: other.key });
    // An order event of another account wakes the waiter but not this request, which waits on.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const pet = await json(await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }));
    const answered = await waiting;
    assert.equal(answered.status, 200);
    assert.deepEqual((await json(answered)).map((event: { data: { id: number } }) => event.data.id), [pet.id]);
    assert.ok(Date.now() - started < 3000, 'within a second of the commit');
    assert.equal(answered.headers.get('link'), '</v1/events?after=1&limit=20&wait=10>; rel="next"');
    const timedOut = Date.now();
    const empty = await server.request('/v1/events?after=1&wait=1', { key: other.key });
    assert.deepEqual(await json(empty), []);
    assert.ok(Date.now() - timedOut >= 900, 'waited its second');
  });

  test('a server that starts draining answers its waiting requests at once with []', async (t) => {
    const server = await start(t);
    const waiting = server.request('/v1/events?wait=30');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const drained = Date.now();
    server.service.app.drain();
    const response = await waiting;
    assert.equal(response.status, 200);
    assert.deepEqual(await json(response), []);
    assert.ok(Date.now() - drained < 1000);
    const later = await server.request('/v1/events?wait=30');
    assert.deepEqual(await json(later), [], 'and every later one');
  });

  test('after below the highest id retention deleted is 410 cursor_expired; without after, never', async (t) => {
    const server = await start(t);
    for (const name of ['a', 'b', 'c']) await server.post('/v1/pets', { name, categoryId: 1 });
    assert.equal(await server.service.stores.upkeep.purgeEvents!(Date.now() + 60_000, 2), 2);
    const expired = await server.request('/v1/events?after=1');
    assert.equal(expired.status, 410);
    const body = await errorBody(expired);
    assert.equal(body.code, 'cursor_expired');
    assert.match(body.message, /full read of the pets and orders/);
    assert.deepEqual((await json(await server.request('/v1/events?after=2'))).map((event: { id: number }) => event.id), [3]);
    assert.deepEqual((await json(await server.request('/v1/events'))).map((event: { id: number }) => event.id), [3]);
  });
}

describe('the event feed on SQLite', () => feedCases((t) => startTestServer(t)));

describeWithPostgres('the event feed on PostgreSQL', (cluster) =>
  feedCases(async (t) => startPostgresTestServer(t, (await openTestDatabase(t, cluster(), { poolSize: 4 })).sql)));

test('events_total counts the events each committed write recorded, by type, and none for a change that changes nothing', async (t) => {
  const probe = startProcessProbe();
  t.after(() => probe.stop());
  const metrics = createMetrics(probe);
  const server = await startTestServer(t, { observer: metrics });
  const pet = await json(await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }));
  await server.post('/v1/store/orders', { petId: pet.id });
  await server.post('/v1/store/orders', { petId: pet.id });
  await patch(server, '/v1/store/orders/1', { status: 'cancelled' }, server.key);
  await patch(server, '/v1/store/orders/1', { status: 'cancelled' }, server.key);
  await patch(server, `/v1/pets/${pet.id}`, { name: 'Rex' }, server.key);
  const exposition = parseExposition(metrics.render());
  const counted = Object.fromEntries(['pet.created', 'pet.updated', 'pet.deleted', 'order.placed', 'order.cancelled'].map((type) => [type, valueOf(exposition, 'events_total', { type })]));
  assert.deepEqual(counted, { 'pet.created': 1, 'pet.updated': 2, 'pet.deleted': 0, 'order.placed': 1, 'order.cancelled': 1 });
  assert.equal((await json(await server.request('/v1/events'))).length, 5, 'as many as the log holds');
});
