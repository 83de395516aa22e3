/**
 * The live event stream over HTTP (`GET /v1/events` with `Accept: text/event-stream`), on both
 * engines: its frames, in id order, as the feed renders each event, to whom; where it starts
 * (`Last-Event-ID` over `after`) and `410`; `types`; the keep-alive; the end on revocation,
 * expiry and drain; the caps per key and per instance; one token of the rate limit; the server's
 * timeouts, which do not cut it; and the metric of open streams.
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { connect } from 'node:net';
import type { Scope } from '../../src/keys/scopes.ts';
import { createStreamSlots } from '../../src/limits/stream-slots.ts';
import { createMetrics } from '../../src/ops/metrics.ts';
import { startProcessProbe } from '../../src/ops/process-probe.ts';
import type { Service, ServiceDeps } from '../../src/service/service.ts';
import { eventsOf, openStream, type Frame } from '../support/event-stream.ts';
import { parseExposition, valueOf } from '../support/prometheus-text.ts';
import { describeWithPostgres, openTestDatabase } from '../support/postgres.ts';
import { errorBody, json, startPostgresTestServer, startTestServer, type FakeClock, type TestServer } from '../support/test-server.ts';

type StreamServer = Omit<TestServer, 'db' | 'service'> & { service: Service };

interface StartOptions {
  streams?: ServiceDeps['streams'];
  server?: ServiceDeps['server'];
  observer?: ServiceDeps['observer'];
}

interface Issued {
  key: string;
  id: string;
  account: string;
}

async function keyWith(server: StreamServer, scopes: Scope[], extra: { account?: string; expiresAt?: number } = {}): Promise<Issued> {
  const issued = await server.service.stores.keys.create({ plan: 'enterprise', perMinute: 1000, perDay: 100_000, scopes, now: server.clock(), ...extra });
  return { key: issued.key, id: issued.record.id, account: issued.record.account };
}

const ALL: Scope[] = ['pets:read', 'pets:write', 'orders:write', 'orders:manage', 'events:read'];
const stream = (server: StreamServer, key: string, query = '', lastEventId?: string) =>
  openStream(`${server.url}/v1/events${query}`, { key, ...(lastEventId === undefined ? {} : { lastEventId }) });
const untilId = (id: number) => (frame: Frame) => frame.id === String(id);
const patch = (server: StreamServer, path: string, body: unknown, key: string) =>
  server.request(path, { key, method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify(body) });

/** The cases every engine passes, over servers that `start` makes. */
function streamCases(start: (t: TestContext, options?: StartOptions) => Promise<StreamServer>): void {
  test('each event the key may see, in id order, as id, event and data (the feed\'s JSON), the past then the live ones', async (t) => {
    const server = await start(t);
    const staff = await keyWith(server, ALL);
    const adopter = await keyWith(server, ['pets:read', 'orders:write', 'events:read']);
    const other = await keyWith(server, ['events:read']);
    const pet = await json(await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }, { key: staff.key }));
    const order = await json(await server.post('/v1/store/orders', { petId: pet.id }, { key: adopter.key }));

    const byStaff = await stream(server, staff.key);
    t.after(() => byStaff.close());
    assert.equal(byStaff.response.status, 200);
    assert.equal(byStaff.response.headers.get('content-type'), 'text/event-stream; charset=utf-8');
    assert.equal(byStaff.response.headers.get('link'), null);
    const past = await byStaff.collect(untilId(3));
    const page = await (await server.request('/v1/events', { key: staff.key })).text();
    assert.deepEqual(past, JSON.parse(page).map((event: { id: number; type: string }, index: number) => ({ id: String(event.id), event: event.type, data: JSON.stringify(JSON.parse(page)[index]) })));
    assert.equal(past.map((frame) => frame.data).join(','), page.slice(1, -1), 'data is the page\'s JSON of each event, byte for byte');

    const byAdopter = await stream(server, adopter.key);
    const byOther = await stream(server, other.key);
    t.after(() => byAdopter.close());
    t.after(() => byOther.close());
    // Live: an order step writes order.approved (4); a pet change writes pet.updated (5).
    const started = Date.now();
    assert.equal((await patch(server, `/v1/store/orders/${order.id}`, { status: 'approved' }, staff.key)).status, 200);
    assert.equal((await patch(server, `/v1/pets/${pet.id}`, { name: 'Rex II' }, staff.key)).status, 200);
    assert.deepEqual((await byStaff.collect(untilId(5))).map((frame) => [frame.id, frame.event]), [['4', 'order.approved'], ['5', 'pet.updated']]);
    assert.ok(Date.now() - started < 2000, 'within a second of the commits');
    const adopterSaw = eventsOf(await byAdopter.collect(untilId(5)));
    assert.deepEqual(adopterSaw.map((event) => event.id), [1, 2, 3, 4, 5], 'its own order\'s events');
    assert.equal(adopterSaw[0]!.actor, null, 'staff is not of its account');
    assert.deepEqual(adopterSaw[1]!.actor, { account: adopter.account, keyId: adopter.id });
    const otherSaw = eventsOf(await byOther.collect(untilId(5)));
    assert.deepEqual(otherSaw.map((event) => [event.id, event.actor]), [[1, null], [3, null], [5, null]], 'pet events only, no one named');
    assert.deepEqual(otherSaw[2]!.data, { ...pet, name: 'Rex II', status: 'pending' });
  });

  test('it starts after Last-Event-ID, which wins over after; types filters it; limit and wait are ignored', async (t) => {
    const server = await start(t);
    for (const name of ['a', 'b', 'c']) await server.post('/v1/pets', { name, categoryId: 1 });
    await server.request('/v1/pets/2', { method: 'DELETE' });
    const resumed = await stream(server, server.key, '?after=1&limit=1&wait=30', '2');
    t.after(() => resumed.close());
    assert.deepEqual((await resumed.collect(untilId(4))).map((frame) => frame.id), ['3', '4']);
    const fromAfter = await stream(server, server.key, '?after=3');
    t.after(() => fromAfter.close());
    assert.deepEqual((await fromAfter.collect(untilId(4))).map((frame) => frame.id), ['4']);
    const emptyHeader = await stream(server, server.key, '?after=2', '');
    t.after(() => emptyHeader.close());
    assert.deepEqual((await emptyHeader.collect(untilId(4))).map((frame) => frame.id), ['3', '4'], 'an empty Last-Event-ID is none');
    const deletions = await stream(server, server.key, '?types=pet.deleted,order.placed');
    t.after(() => deletions.close());
    await server.request('/v1/pets/3', { method: 'DELETE' });
    assert.deepEqual((await deletions.collect(untilId(5))).map((frame) => [frame.id, frame.event]), [['4', 'pet.deleted'], ['5', 'pet.deleted']]);
  });

  test('before it starts, a bad query, Last-Event-ID or key, a missing scope and 410 are answered as JSON errors', async (t) => {
    const server = await start(t);
    for (const name of ['a', 'b', 'c']) await server.post('/v1/pets', { name, categoryId: 1 });
    assert.equal(await server.service.stores.upkeep.purgeEvents!(Date.now() + 60_000, 2), 2);
    const refusals: [string, string | undefined, string | null, number, string][] = [
      ['?after=1', undefined, server.key, 410, 'cursor_expired'],
      ['?after=5', '1', server.key, 410, 'cursor_expired'],
      ['?types=pet.eaten', undefined, server.key, 400, 'invalid_query'],
      ['?limit=0', undefined, server.key, 400, 'invalid_query'],
      ['', 'x1', server.key, 400, 'bad_request'],
      ['', '-1', server.key, 400, 'bad_request'],
      ['', '12345678901234567890', server.key, 400, 'bad_request'],
      ['', undefined, (await keyWith(server, ['pets:read'])).key, 403, 'insufficient_scope'],
      ['', undefined, 'pk_test_nope', 401, 'invalid_api_key'],
    ];
    for (const [query, lastEventId, key, status, code] of refusals) {
      const response = await server.request(`/v1/events${query}`, { key, headers: { accept: 'text/event-stream', ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }) } });
      assert.equal(response.status, status, `${query} ${lastEventId}`);
      assert.match(response.headers.get('content-type')!, /^application\/json/);
      assert.equal((await errorBody(response)).code, code, `${query} ${lastEventId}`);
    }
    const fromTwo = await stream(server, server.key, '', '2');
    t.after(() => fromTwo.close());
    assert.deepEqual((await fromTwo.collect(untilId(3))).map((frame) => frame.id), ['3'], 'at the highest id deleted: nothing missing');
    const page = await server.request('/v1/events?after=2', { headers: { accept: 'application/json, text/event-stream;q=0' } });
    assert.match(page.headers.get('content-type')!, /^application\/json/, 'a weight of 0 is a refusal of the stream');
  });

  test('a comment line keeps a silent stream alive', async (t) => {
    const server = await start(t, { streams: { keepAliveMs: 50 } });
    const silent = await stream(server, server.key);
    t.after(() => silent.close());
    assert.deepEqual(await silent.collect((_frame, all) => all.length === 2), [{ comment: 'keep-alive' }, { comment: 'keep-alive' }]);
    await server.post('/v1/pets', { name: 'a', categoryId: 1 });
    const frames = await silent.collect((frame) => frame.id === '1');
    assert.equal(frames.at(-1)!.event, 'pet.created');
  });

  test('revoking its key ends the stream within a second; so do expiry and another set of scopes', async (t) => {
    const server = await start(t);
    const revoked = await keyWith(server, ['events:read']);
    const expiring = await keyWith(server, ['events:read'], { expiresAt: server.clock() + 60_000 });
    const narrowed = await keyWith(server, ['events:read', 'orders:manage']);
    const kept = await keyWith(server, ['events:read']);
    const [a, b, c, d] = await Promise.all([revoked, expiring, narrowed, kept].map((issued) => stream(server, issued.key)));
    t.after(() => d!.close());
    const revokedAt = Date.now();
    assert.equal(await server.service.stores.keys.revoke(revoked.id, server.clock()), true);
    await a!.ended;
    assert.ok(Date.now() - revokedAt < 1500, `ended ${Date.now() - revokedAt} ms after the revocation`);
    (server.clock as FakeClock).advance(60_000);
    await b!.ended;
    await server.service.stores.keys.setScopes(narrowed.id, ['events:read']);
    await c!.ended;
    await server.post('/v1/pets', { name: 'a', categoryId: 1 });
    assert.equal((await d!.collect(untilId(1))).length, 1, 'the others go on');
    const again = await server.request('/v1/events', { key: revoked.key, headers: { accept: 'text/event-stream' } });
    assert.equal(again.status, 401, 'and reconnecting is answered as any request');
  });

  test('a server that drains ends its streams, and answers a new one 503', async (t) => {
    const server = await start(t);
    const open = await stream(server, server.key);
    await server.post('/v1/pets', { name: 'a', categoryId: 1 });
    await open.collect(untilId(1));
    const drained = Date.now();
    server.service.app.drain();
    await open.ended;
    assert.ok(Date.now() - drained < 1000);
    const refused = await server.request('/v1/events', { headers: { accept: 'text/event-stream' } });
    assert.equal(refused.status, 503);
    assert.equal((await errorBody(refused)).code, 'unavailable');
  });

  test('at most 5 streams per key and the instance\'s cap in all: 429 too_many_streams with Retry-After, and a closed stream frees its slot', async (t) => {
    const server = await start(t, { streams: { slots: createStreamSlots({ perInstance: 6 }) } });
    const one = await keyWith(server, ['events:read']);
    const streams = await Promise.all(Array.from({ length: 5 }, () => stream(server, one.key)));
    t.after(() => streams.forEach((each) => each.close()));
    const sixth = await server.request('/v1/events', { key: one.key, headers: { accept: 'text/event-stream' } });
    assert.equal(sixth.status, 429);
    assert.equal(sixth.headers.get('retry-after'), '5');
    const body = await errorBody(sixth);
    assert.equal(body.code, 'too_many_streams');
    assert.match(body.message, /5 event streams/);
    assert.equal((await server.request('/v1/events', { key: one.key })).status, 200, 'pages are not capped');
    streams[0]!.close();
    await streams[0]!.ended;
    let reopened;
    // The server learns of the closed connection a moment after the client closed it.
    for (let attempt = 0; attempt < 50; attempt++) {
      reopened = await stream(server, one.key);
      if (reopened.response.status === 200) break;
      await reopened.response.arrayBuffer();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.equal(reopened!.response.status, 200);
    t.after(() => reopened!.close());
    const two = await keyWith(server, ['events:read']);
    const [x, y] = [await stream(server, two.key), await stream(server, two.key)];
    t.after(() => [x, y].forEach((each) => each.close()));
    assert.equal(x.response.status, 200);
    assert.equal(y.response.status, 429, 'the instance holds 6');
    assert.match((await errorBody(y.response)).message, /6 event streams/);
  });

  test('a stream counts as one request for the rate limit, when it opens, however many events it carries', async (t) => {
    const server = await start(t);
    const before = Number((await server.request('/v1/events', { key: server.freeKey })).headers.get('x-ratelimit-remaining'));
    const open = await stream(server, server.freeKey);
    t.after(() => open.close());
    assert.equal(Number(open.response.headers.get('x-ratelimit-remaining')), before - 1);
    for (const name of ['a', 'b', 'c', 'd']) await server.post('/v1/pets', { name, categoryId: 1 });
    await open.collect(untilId(4));
    assert.equal(Number((await server.request('/v1/events', { key: server.freeKey })).headers.get('x-ratelimit-remaining')), before - 2);
  });

  test('the idle and request timeouts do not cut a stream', async (t) => {
    const server = await start(t, {
      server: { headersTimeoutMs: 100, requestTimeoutMs: 200, keepAliveTimeoutMs: 100, connectionsCheckingIntervalMs: 50 },
      streams: { keepAliveMs: 10_000 },
    });
    const open = await stream(server, server.key);
    t.after(() => open.close());
    await new Promise((resolve) => setTimeout(resolve, 800));
    await server.post('/v1/pets', { name: 'a', categoryId: 1 });
    assert.deepEqual((await open.collect(untilId(1))).map((frame) => frame.id), ['1'], 'open after four request timeouts, and still delivering');
  });

  test('event_streams_open counts the streams open now', async (t) => {
    const probe = startProcessProbe();
    t.after(() => probe.stop());
    const metrics = createMetrics(probe);
    const server = await start(t, { observer: metrics });
    const open = () => valueOf(parseExposition(metrics.render()), 'event_streams_open');
    const [a, b] = [await stream(server, server.key), await stream(server, server.key)];
    t.after(() => b.close());
    assert.equal(open(), 2);
    a.close();
    for (let attempt = 0; attempt < 50 && open() !== 1; attempt++) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(open(), 1);
  });
}

describe('the event stream on SQLite', () => streamCases((t, options = {}) => startTestServer(t, options)));

describeWithPostgres('the event stream on PostgreSQL', (cluster) =>
  streamCases(async (t, options = {}) => startPostgresTestServer(t, (await openTestDatabase(t, cluster(), { poolSize: 4 })).sql, options)));

test('a client that reads nothing makes the server hold about a page at most: the stream stops reading the log until the socket drains', async (t) => {
  const server = await startTestServer(t);
  let held: ServerResponse | undefined;
  server.service.server.on('request', (req, res) => {
    if (req.headers.accept === 'text/event-stream') held = res;
  });
  // 40,000 events of about 350 bytes: some 14 MB, far more than the connection's kernel buffers hold.
  const EVENTS = 40_000;
  for (let batch = 0; batch < EVENTS / 1000; batch++) {
    await server.service.stores.pets.insertMany(Array.from({ length: 1000 }, (_, i) => ({ name: `${'a slow reader '.repeat(7)}${batch}.${i}`, categoryId: 1n, status: 'available' as const })));
  }
  const socket = connect(Number(new URL(server.url).port), '127.0.0.1');
  t.after(() => socket.destroy());
  socket.write(`GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${server.key}\r\nAccept: text/event-stream\r\n\r\n`);
  socket.pause();
  // Until the server has stopped writing: what the socket took stays the same for half a second.
  let written = -1;
  for (let steady = 0; steady < 10; await new Promise((resolve) => setTimeout(resolve, 50))) {
    const now = held?.socket?.bytesWritten ?? 0;
    steady = now === written && now > 0 ? steady + 1 : 0;
    written = now;
  }
  assert.ok(held!.writableLength < 128 * 1024, `the server holds ${held!.writableLength} bytes for the client`);
  assert.ok(written < EVENTS * 300, `${written} bytes written while the client read nothing`);
  // Once the client reads, the rest comes, in order, every event once.
  let text = '';
  let last = 0;
  let count = 0;
  socket.setEncoding('utf8');
  await new Promise<void>((resolve) => {
    socket.on('data', (chunk: string) => {
      text += chunk;
      for (let match; (match = /id: (\d+)\n/.exec(text)) !== null; text = text.slice(match.index + match[0].length)) {
        assert.equal(Number(match[1]), last + 1);
        last++;
        count++;
      }
      if (last === EVENTS) resolve();
    });
    socket.resume();
  });
  assert.equal(count, EVENTS);
});
