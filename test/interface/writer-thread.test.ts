/**
 * The service on a file, as it runs: every write through the writer thread, every read on the
 * request thread's own connection. What that buys and what it must keep: reads are answered
 * while the writer is busy (a long commit, a lock held elsewhere), writes are answered only
 * once their group is on disk, and a writer that has stopped makes writes 503 and nothing else.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { errorBody, json, startWriterTestServer } from '../support/test-server.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';

const created = (response: Response) => response.status === 201;

test('while the writer is busy, reads are answered at once and writes wait; let go, each write is answered once stored', async (t) => {
  const server = await startWriterTestServer(t);
  for (const name of ['Rex', 'Tom']) assert.equal((await server.post('/v1/pets', { name, categoryId: 1 })).status, 201);
  assert.equal((await server.request('/v1/pets/1')).status, 200);
  const letGo = await server.pauseWriter();
  let answered = 0;
  const count = <T>(promise: Promise<T>) => promise.finally(() => answered++);
  const writes = [
    count(server.post('/v1/pets', { name: 'Kit', categoryId: 1 }, { headers: { 'idempotency-key': 'kit' } })),
    count(server.request('/v1/pets/1', { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"name":"Rex II"}' })),
    count(server.post('/v1/store/orders', { petId: 2 })),
  ];
  // The writer holds all three; the reads do not wait for it.
  assert.deepEqual((await json(await server.request('/v1/pets'))).map((pet: { name: string }) => pet.name), ['Rex', 'Tom']);
  assert.equal((await json(await server.request('/v1/pets/2'))).status, 'available');
  assert.deepEqual(await json(await server.request('/v1/store/inventory')), { available: 2, pending: 0, sold: 0 });
  assert.equal(answered, 0, 'no write was answered while the writer was held');
  assert.equal((server.db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 2, 'and none was stored');
  letGo();
  const [kit, rex, order] = await Promise.all(writes);
  assert.deepEqual([kit!.status, rex!.status, order!.status], [201, 200, 201]);
  // Answered, so stored, and seen by the next request.
  assert.deepEqual((await json(await server.request('/v1/pets'))).map((pet: { name: string; status: string }) => `${pet.name} ${pet.status}`), ['Rex II available', 'Tom pending', 'Kit available']);
  const replay = await server.post('/v1/pets', { name: 'Kit', categoryId: 1 }, { headers: { 'idempotency-key': 'kit' } });
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
});

test('while another connection holds the write lock, reads go on; the writes of the group are 503 with nothing stored', async (t) => {
  const server = await startWriterTestServer(t);
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 1 })).status, 201);
  const other = new DatabaseSync(server.path);
  t.after(() => other.close());
  other.exec('BEGIN IMMEDIATE');
  const writes = Promise.all(['a', 'b', 'c'].map((key) => server.post('/v1/pets', { name: key, categoryId: 1 }, { headers: { 'idempotency-key': key } })));
  for (let i = 0; i < 5; i++) assert.equal((await server.request('/v1/pets/1')).status, 200);
  const refused = await writes;
  other.exec('ROLLBACK');
  for (const response of refused) assert.equal((await errorBody(response)).code, 'unavailable');
  assert.equal((server.db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 1);
  assert.equal((server.db.prepare('SELECT count(*) AS n FROM idempotency_keys').get() as { n: number }).n, 0);
  const retried = await Promise.all(['a', 'b', 'c'].map((key) => server.post('/v1/pets', { name: key, categoryId: 1 }, { headers: { 'idempotency-key': key } })));
  assert.ok(retried.every(created), 'the keys were not taken');
});

test('once the writer has stopped, writes are 503 unavailable and reads go on', async (t) => {
  const server = await startWriterTestServer(t);
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 1 })).status, 201);
  await server.writer.close();
  const refused = await server.post('/v1/pets', { name: 'Tom', categoryId: 1 });
  assert.equal(refused.status, 503);
  assert.equal((await errorBody(refused)).code, 'unavailable');
  assert.equal(refused.headers.get('retry-after'), '1');
  assert.equal((await server.request('/v1/pets/1')).status, 200);
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(server.logs.some((line) => line.includes('"event":"database_unavailable"') && line.includes('"reason":"writer_stopped"')));
});

test('a key revoked by the keys command (another connection) is refused by the next request, though the writer committed meanwhile', async (t) => {
  const server = await startWriterTestServer(t);
  assert.equal((await server.request('/v1/pets')).status, 200, 'the key is cached');
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 1 })).status, 201);
  const other = openDatabase(server.path);
  t.after(() => other.close());
  assert.ok(createKeysStore(other, { appEnv: 'development' }).revoke(server.keyId, server.clock()));
  assert.equal((await server.post('/v1/pets', { name: 'Tom', categoryId: 1 }, { key: server.freeKey })).status, 201, 'a write of the writer after the revocation');
  const refused = await server.request('/v1/pets');
  assert.equal(refused.status, 401);
  assert.equal((await errorBody(refused)).code, 'invalid_api_key');
});
