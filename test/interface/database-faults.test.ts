/**
 * Database faults: a locked database and a full disk answer 503 unavailable with
 * nothing half-written, keep no idempotency key, and the server recovers by itself once the
 * cause goes away; whether the server writes in place (`:memory:`, one connection) or through its
 * writer thread (a file), where a failed group answers every write of it.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';
import type { PetsStore } from '../../src/storage/pets.ts';
import { errorBody, startTestServer, startWriterTestServer, type TestServer } from '../support/test-server.ts';
import { FULL_DISK, LARGE } from '../support/full-disk.ts';

function count(server: Pick<TestServer, 'db'>, table: string): number {
  return (server.db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
}

function create(server: Pick<TestServer, 'post'>, key: string, name = `pet ${key}`) {
  return server.post('/v1/pets', { name, categoryId: 1 }, { headers: { 'idempotency-key': key } });
}

function temporaryFile(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'pets-faults-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'pets.db');
}

/**
 * A server on a file: its one connection writing in place (waiting 50 ms for a lock), or, as
 * the server runs, its writer thread (waiting 250 ms).
 */
async function onFile(t: TestContext, writerThread: boolean): Promise<{ server: Pick<TestServer, 'db' | 'post' | 'request' | 'logs'>; path: string }> {
  if (writerThread) {
    const server = await startWriterTestServer(t);
    return { server, path: server.path };
  }
  const path = temporaryFile(t);
  const db = openDatabase(path, { busyTimeoutMs: 50 });
  const server = await startTestServer(t, { db });
  t.after(() => db.close());
  return { server, path };
}

for (const writerThread of [false, true]) test(`a write lock held by another connection past busy_timeout is 503 unavailable; the server recovers when it is released (${writerThread ? 'through the writer thread' : 'in place'})`, async (t) => {
  const { server, path } = await onFile(t, writerThread);
  const other = new DatabaseSync(path);
  t.after(() => other.close());
  other.exec('BEGIN IMMEDIATE'); // holds the write lock, as another process would

  const keys = ['a', 'b', 'c', 'd', 'e'];
  const locked = await Promise.all(keys.map((key) => create(server, key)));
  for (const response of locked) {
    assert.equal(response.status, 503);
    assert.equal((await errorBody(response)).code, 'unavailable');
    assert.equal(response.headers.get('retry-after'), '1');
  }
  assert.equal((await server.request('/v1/pets')).status, 200, 'reads still work while the lock is held');
  assert.equal(count(server, 'pets'), 0);
  assert.equal(count(server, 'idempotency_keys'), 0);
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(server.logs.some((line) => line.includes('"event":"database_unavailable"') && line.includes('"sqliteCode":5')));

  other.exec('ROLLBACK');
  const recovered = await Promise.all(keys.map((key) => create(server, key)));
  assert.deepEqual(recovered.map((response) => response.status), Array(5).fill(201));
  assert.deepEqual(recovered.map((response) => response.headers.get('idempotent-replayed')), Array(5).fill(null), 'a 503 was not remembered');
  assert.equal(count(server, 'pets'), 5);
});

/** A server, and a way to run a statement on the connection that writes (max_page_count is per connection). */
const WRITERS = [
  { name: 'in place', async start(t: TestContext) {
    const server = await startTestServer(t);
    return { server, onWriter: async (sql: string) => void server.db.exec(sql) };
  } },
  { name: 'through the writer thread', async start(t: TestContext) {
    const server = await startWriterTestServer(t);
    return { server, onWriter: server.writerExec };
  } },
];

for (const { name, start } of WRITERS) test(`a full disk is 503 unavailable with no partial batch; freeing space lets the same keys succeed (${name})`, async (t) => {
  const { server, onWriter } = await start(t);
  // max_page_count makes SQLite fail with SQLITE_FULL exactly as a full disk does, mid-transaction.
  const { page_count: pages } = server.db.prepare('PRAGMA page_count').get() as { page_count: number };
  await onWriter(`PRAGMA max_page_count = ${pages}`);

  const keys = Array.from({ length: 40 }, (_, i) => `key-${String(i).padStart(3, '0')}`);
  const names = keys.map((key) => `${key} `.padEnd(100, 'x'));
  const responses = await Promise.all(keys.map((key, i) => create(server, key, names[i])));
  const statuses = responses.map((response) => response.status);
  assert.ok(statuses.every((status) => status === 201 || status === 503), statuses.join());
  assert.ok(statuses.includes(503), 'the database filled up');
  const stored = new Set((server.db.prepare('SELECT name FROM pets').all() as { name: string }[]).map((row) => row.name));
  const remembered = new Set((server.db.prepare('SELECT idempotency_key FROM idempotency_keys').all() as { idempotency_key: string }[]).map((row) => row.idempotency_key));
  const acknowledged = new Map<string, string>();
  for (const [i, response] of responses.entries()) {
    const body = await response.text();
    if (response.status === 201) acknowledged.set(keys[i]!, body);
    else assert.equal(JSON.parse(body).code, 'unavailable');
    assert.equal(stored.has(names[i]!), response.status === 201, `pet of ${keys[i]}`);
    assert.equal(remembered.has(keys[i]!), response.status === 201, `record of ${keys[i]}`);
  }

  await onWriter('PRAGMA max_page_count = 1073741823');
  const retries = await Promise.all(keys.map((key, i) => create(server, key, names[i])));
  for (const [i, response] of retries.entries()) {
    assert.equal(response.status, 201, keys[i]);
    const first = acknowledged.get(keys[i]!);
    assert.equal(response.headers.get('idempotent-replayed'), first === undefined ? null : 'true', keys[i]);
    if (first !== undefined) assert.equal(await response.text(), first);
  }
  assert.equal(count(server, 'pets'), 40, 'each request created exactly once');
});

test('disk full through the store seam, part-way through a batch: every request of the batch is 503 and no row is left', async (t) => {
  const db = openDatabase(':memory:');
  t.after(() => db.close());
  const real = createPetsStore(db);
  db.exec(FULL_DISK);
  let fail = true;
  // The last creation of each batch needs more room than the disk has, after the others were
  // written inside the transaction: its record is made too large to fit.
  const pets: PetsStore = {
    ...real,
    insertMany: (creations) => real.insertMany(creations.map((creation, i) => (!fail || i < creations.length - 1 || !creation.idempotency
      ? creation
      : { ...creation, idempotency: { ...creation.idempotency, fingerprint: 'f'.repeat(LARGE) } }))),
  };
  const server = await startTestServer(t, { db, overrides: { pets } });
  const failed = await Promise.all(['a', 'b', 'c'].map((key) => create(server, key)));
  assert.deepEqual(failed.map((response) => response.status), [503, 503, 503]);
  for (const response of failed) assert.equal((await errorBody(response)).code, 'unavailable');
  assert.equal(count(server, 'pets'), 0);
  assert.equal(count(server, 'idempotency_keys'), 0);
  fail = false;
  db.exec('PRAGMA max_page_count = 1073741823');
  assert.equal((await create(server, 'a')).status, 201);
  assert.equal(count(server, 'pets'), 1);
});

for (const writerThread of [false, true]) test(`a locked database makes PATCH and DELETE 503 unavailable with nothing changed; they succeed once it is released (${writerThread ? 'through the writer thread' : 'in place'})`, async (t) => {
  const { server, path } = await onFile(t, writerThread);
  for (let i = 0; i < 2; i++) assert.equal((await server.post('/v1/pets', { name: `pet ${i}`, categoryId: 1 })).status, 201);
  const etag = (await server.request('/v1/pets/1')).headers.get('etag')!;
  const rows = () => JSON.stringify(server.db.prepare('SELECT * FROM pets ORDER BY id').all());
  const before = rows();
  const other = new DatabaseSync(path);
  t.after(() => other.close());
  other.exec('BEGIN IMMEDIATE');

  const patch = () => server.request('/v1/pets/1', { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag }, body: '{"status":"sold"}' });
  const remove = () => server.request('/v1/pets/2', { method: 'DELETE' });
  for (const response of await Promise.all([patch(), remove()])) {
    assert.equal(response.status, 503);
    assert.equal((await errorBody(response)).code, 'unavailable');
    assert.equal(response.headers.get('retry-after'), '1');
  }
  assert.equal((await server.request('/v1/pets/1')).status, 200, 'reads still work while the lock is held');
  other.exec('ROLLBACK');
  assert.equal(rows(), before, 'nothing was half-written');
  assert.deepEqual((await Promise.all([patch(), remove()])).map((response) => response.status), [200, 204], 'the same ETag still matches: nothing had changed');
});
