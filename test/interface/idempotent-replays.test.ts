/**
 * A replay is the first answer again, byte for byte: status, Location, ETag and body, on every way
 * SQLite's writes are made (the connection itself, inline on a file, the writer thread), for each
 * operation with an Idempotency-Key. A record keeps what its creation made and the API builds the
 * replay from it; a record written by an earlier version kept the answer itself (its 201, headers
 * and body), and is replayed as it was kept.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { fingerprintBody } from '../../src/api/idempotency.ts';
import { startInlineTestServer, startTestServer, startWriterTestServer, type TestServer } from '../support/test-server.ts';

const SERVERS: { name: string; start(t: TestContext): Promise<{ server: Omit<TestServer, 'service'>; writable(): DatabaseSync }> }[] = [
  { name: 'in memory', async start(t) {
    const server = await startTestServer(t);
    return { server, writable: () => server.db };
  } },
  { name: 'on a file, inline', async start(t) {
    const server = await startInlineTestServer(t);
    return { server, writable: () => server.db };
  } },
  { name: 'on a file, through the writer thread', async start(t) {
    const server = await startWriterTestServer(t);
    // Another connection, as an earlier version's process wrote the file.
    return { server, writable: () => {
      const db = new DatabaseSync(server.path);
      t.after(() => db.close());
      return db;
    } };
  } },
];

/** What a client sees of an answer, but the headers every answer has (request id, rate limit). */
async function seen(response: Response) {
  return {
    status: response.status,
    location: response.headers.get('location'),
    etag: response.headers.get('etag'),
    contentType: response.headers.get('content-type'),
    body: await response.text(),
  };
}

const key = (value: string) => ({ headers: { 'idempotency-key': value } });

for (const { name, start } of SERVERS) {
  test(`a replay of createPet and of placeOrder is the first 201 again: status, Location, ETag and body (${name})`, async (t) => {
    const { server } = await start(t);
    const raw = '{"name":"Rex \\"the first\\"","categoryId":9223372036854775807}';
    const created = await server.post('/v1/pets', raw, key('pet-1'));
    const first = await seen(created);
    assert.equal(first.status, 201);
    const replayed = await server.post('/v1/pets', raw, key('pet-1'));
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(await seen(replayed), first);

    const petId = (JSON.parse(first.body) as { id: number }).id;
    const placement = `{"petId":${petId}}`;
    const placed = await seen(await server.post('/v1/store/orders', placement, key('order-1')));
    assert.equal(placed.status, 201);
    // The pet changed since (pending, a new version): the replay is still the first answer.
    const again = await server.post('/v1/store/orders', placement, key('order-1'));
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(await seen(again), placed);
    assert.deepEqual(await seen(await server.post('/v1/pets', raw, key('pet-1'))), first, 'and the pet\'s replay is unchanged by the order');
  });

  test(`a record written by an earlier version, which kept the 201 itself, is replayed as it was kept (${name})`, async (t) => {
    const { server, writable } = await start(t);
    const db = writable();
    const now = server.clock();
    const remember = (table: string, idempotencyKey: string, fingerprint: string, headers: object, body: string) => db.prepare(`
      INSERT INTO ${table} (api_key_id, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
      VALUES (?, ?, ?, 201, ?, ?, ?)`).run(server.keyId, idempotencyKey, fingerprint, JSON.stringify(headers), body, now);
    const petBody = '{"id":41,"name":"Old","categoryId":5,"status":"sold"}';
    remember('idempotency_keys', 'old-pet', fingerprintBody({ name: 'Old', categoryId: 5n, status: 'sold' }), { Location: '/v1/pets/41', ETag: '"41.1"' }, petBody);
    const orderBody = '{"id":7,"petId":41,"account":"acct_old1","status":"placed","placedAt":"2026-01-01T00:00:00.000Z","updatedAt":"2026-01-01T00:00:00.000Z","expiresAt":"2026-01-01T00:15:00.000Z"}';
    remember('order_idempotency_keys', 'old-order', fingerprintBody({ petId: 41n }), { Location: '/v1/store/orders/7', ETag: '"7.1"' }, orderBody);

    const pet = await server.post('/v1/pets', '{"name":"Old","categoryId":5,"status":"sold"}', key('old-pet'));
    assert.equal(pet.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(await seen(pet), { status: 201, location: '/v1/pets/41', etag: '"41.1"', contentType: 'application/json; charset=utf-8', body: petBody });
    const order = await server.post('/v1/store/orders', '{"petId":41}', key('old-order'));
    assert.equal(order.headers.get('idempotent-replayed'), 'true');
    assert.deepEqual(await seen(order), { status: 201, location: '/v1/store/orders/7', etag: '"7.1"', contentType: 'application/json; charset=utf-8', body: orderBody });
    assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 0, 'nothing was created');
  });
}
