/**
 * The writer thread (src/storage/sqlite/writer-thread.ts) as its clients see it: a real thread
 * over a real file, two clients on ports of their own (as two workers would have), and a reading
 * connection. What it promises: batches commit in the order each port sent them; the batches that
 * arrive together are one transaction; a group that fails answers every batch of it with the
 * error and leaves nothing; an item that fails alone is answered alone; an Idempotency-Key is
 * made once; and before any answer leaves, the write is in the journal and its commit published,
 * so that a reader tells it from any other connection's.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, openSync, readSync, closeSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { closeDatabase, openDatabase, readOnly } from '../../../src/storage/sqlite/database.ts';
import { loadWriterThreadHost, type WriterClient } from '../../../src/storage/sqlite/writer.ts';
import { openReaderStores } from '../../../src/storage/sqlite/stores.ts';
import { createKeysStore } from '../../../src/storage/sqlite/keys-store.ts';
import { sqliteErrorOf } from '../../../src/storage/sqlite/errors.ts';
import { DatabaseUnavailableError } from '../../../src/storage/errors.ts';
import { isItemFailure, type ItemOutcome } from '../../../src/lib/item-outcome.ts';
import { statusBit, type ChangeOutcome, type CreationResult, type NewPet, type Pet, type PetCreation } from '../../../src/storage/pets.ts';
import { fakeClock, TEST_WRITER_ENTRY, writerFaults, writerReady } from '../../support/test-server.ts';

const { createWriterClient, startWriterThread } = await loadWriterThreadHost();

const pet = (name: string, categoryId = 1n): NewPet => ({ name, categoryId, status: 'available' });
const T0 = Date.UTC(2026, 0, 1);

/** A writer thread on a fresh file, `clients` ports to it, and a reading connection with its stores. */
async function startWriter(t: TestContext, clients = 2) {
  const dir = mkdtempSync(join(tmpdir(), 'pets-writer-thread-'));
  const path = join(dir, 'pets.db');
  const db = openDatabase(path);
  // Orders belong to an account: one, made by a key, as the keys command makes them.
  const { account } = createKeysStore(db, { appEnv: 'development' }).create({ plan: 'free', now: T0 }).record;
  const writer = startWriterThread({ entry: TEST_WRITER_ENTRY, path });
  const ports: WriterClient[] = Array.from({ length: clients }, () => createWriterClient(writer.connect()));
  const reader = openReaderStores(readOnly(db), { submit: ports[0]!.submit, memory: writer.memory }, {
    appEnv: 'development', clock: fakeClock(), banThreshold: 30, banSeconds: 900,
  });
  t.after(async () => {
    closeDatabase(db);
    for (const client of ports) client.close();
    await writer.close();
    rmSync(dir, { recursive: true, force: true });
  });
  await writerReady(ports[0]!);
  const count = (table: string) => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
  return { path, db, account, writer, clients: ports, reader, count, exec: writerFaults(path) };
}

/** The WAL index's change counter: one more for every transaction committed to the file. */
function commitsOf(path: string): number {
  const fd = openSync(`${path}-shm`, 'r');
  const header = Buffer.alloc(48);
  readSync(fd, header, 0, 48, 0);
  closeSync(fd);
  return header.readUInt32LE(8);
}

const insert = (client: WriterClient, pets: readonly PetCreation[]) => client.submit('insertPets', pets) as Promise<ItemOutcome<CreationResult>[]>;
const rename = (client: WriterClient, id: number, name: string, expectedVersion: number | null) =>
  client.submit('changePets', [{ kind: 'update', id: BigInt(id), patch: { name }, expectedVersion, now: 0 }]) as Promise<ItemOutcome<ChangeOutcome>[]>;
const remembering = (key: string, createdAt = T0) => ({ apiKeyId: 'key_a', key, fingerprint: `fp-${key}`, createdAt });

test('the batches of one port commit in the order it sent them, each seeing the one before', async (t) => {
  const { clients: [client], reader } = await startWriter(t, 1);
  const [rex] = (await insert(client!, [pet('Rex')])) as Pet[];
  // Fifty changes sent at once, each expecting the version the one before it leaves.
  const outcomes = await Promise.all(Array.from({ length: 50 }, (_, i) => rename(client!, rex!.id, `Rex ${i}`, i + 1)));
  assert.deepEqual(outcomes.map(([outcome]) => (outcome as ChangeOutcome).kind), Array(50).fill('updated'));
  assert.deepEqual(await reader.pets.get(BigInt(rex!.id)), { ...rex, name: 'Rex 49', version: 51 });
});

test('a batch sent after another port\'s batch was answered commits after it', async (t) => {
  const { clients: [first, second], reader } = await startWriter(t);
  const [rex] = (await insert(first!, [pet('Rex')])) as Pet[];
  for (let round = 0; round < 10; round++) {
    const [changed] = await rename(round % 2 === 0 ? first! : second!, rex!.id, `Rex ${round}`, round + 1);
    assert.equal((changed as ChangeOutcome).kind, 'updated', `round ${round}`);
  }
  assert.equal((await reader.pets.get(BigInt(rex!.id)))?.version, 11);
});

test('batches that arrive while the writer commits, from every port and of every kind, share its next transaction', async (t) => {
  const { path, account, clients: [first, second], count } = await startWriter(t);
  const pets = (await insert(first!, Array.from({ length: 50 }, (_, i) => pet(`p${i}`)))) as Pet[];
  const before = commitsOf(path);
  // 200 batches sent at once: creates, renames and placements, half on each port.
  const answers = await Promise.all(pets.flatMap((each, i) => {
    const client = i % 2 === 0 ? first! : second!;
    return [
      insert(client, [pet(`new ${i}`)]),
      rename(client, each.id, `renamed ${i}`, 1),
      client.submit('placeOrders', [{ petId: BigInt(each.id), account, now: T0, expiresAt: T0 + 3_600_000, maxOpen: null }]),
      rename(client, each.id, `again ${i}`, 3), // the placement bumped the version too
    ];
  }));
  const commits = commitsOf(path) - before;
  assert.ok(commits >= 1 && commits <= 50, `${commits} transactions for 200 batches`);
  assert.deepEqual(answers.map(([outcome]) => (outcome as { kind?: string; name?: string }).kind ?? 'created'),
    Array(50).fill(['created', 'updated', 'placed', 'updated']).flat(), 'each batch its own outcome, each in turn');
  assert.deepEqual([count('pets'), count('orders')], [100, 50]);
});

test('a group the database refuses (its write lock held elsewhere) answers every batch with the error and writes nothing; the next group succeeds', async (t) => {
  const { path, account, clients: [first, second], count } = await startWriter(t);
  const [rex] = (await insert(first!, [pet('Rex')])) as Pet[];
  const other = new DatabaseSync(path);
  t.after(() => other.close());
  other.exec('BEGIN IMMEDIATE');
  const refused = await Promise.allSettled([
    insert(first!, [{ ...pet('Tom'), idempotency: remembering('k1') }, pet('Kit')]),
    rename(second!, rex!.id, 'Rex II', null),
    second!.submit('placeOrders', [{ petId: BigInt(rex!.id), account, now: T0, expiresAt: T0 + 3_600_000, maxOpen: null }]),
  ]);
  for (const answer of refused) {
    assert.equal(answer.status, 'rejected');
    assert.deepEqual(sqliteErrorOf((answer as PromiseRejectedResult).reason), { unavailable: true, fields: { sqliteCode: 5 } });
  }
  other.exec('ROLLBACK');
  assert.deepEqual([count('pets'), count('idempotency_keys'), count('orders')], [1, 0, 0]);
  const [tom] = await insert(first!, [{ ...pet('Tom'), idempotency: remembering('k1') }]);
  assert.equal((tom as Pet).name, 'Tom', 'the key was not taken by the refused group');
});

test('a full disk part-way through a group: every batch of it fails, no row and no record is left, nothing is journaled', async (t) => {
  const { clients: [first, second], count, exec, reader, db } = await startWriter(t);
  await insert(first!, [pet('Rex')]);
  const { page_count: pages } = db.prepare('PRAGMA page_count').get() as { page_count: number };
  await exec(`PRAGMA max_page_count = ${pages}`);
  const writes = reader.pets.revision()!.writes;
  const long = (i: number) => `${i} `.padEnd(100, 'x');
  const refused = await Promise.allSettled([
    insert(first!, Array.from({ length: 40 }, (_, i) => ({ ...pet(long(i)), idempotency: remembering(`a${i}`) }))),
    insert(second!, Array.from({ length: 40 }, (_, i) => ({ ...pet(long(i + 40)), idempotency: remembering(`b${i}`) }))),
  ]);
  for (const answer of refused) {
    assert.equal(answer.status, 'rejected');
    assert.deepEqual(sqliteErrorOf((answer as PromiseRejectedResult).reason), { unavailable: true, fields: { sqliteCode: 13 } });
  }
  assert.deepEqual([count('pets'), count('idempotency_keys')], [1, 0]);
  assert.equal(reader.pets.revision()!.writes, writes, 'nothing journaled');
  await exec('PRAGMA max_page_count = 1073741823');
  assert.equal((await insert(first!, [{ ...pet('after'), idempotency: remembering('a0') }])).length, 1);
  assert.equal(count('pets'), 2);
});

test('an item that fails alone is answered alone, with its own error, and every other batch of the group is stored', async (t) => {
  const { clients: [first, second], reader } = await startWriter(t);
  const answers = await Promise.all([insert(first!, [pet('Good'), pet('Bad', 0n)]), insert(second!, [pet('Other')])]);
  const [good, bad] = answers[0]!;
  assert.equal((good as Pet).name, 'Good');
  assert.ok(isItemFailure(bad!), 'the CHECK violation is its own failure');
  assert.deepEqual(sqliteErrorOf(bad.error), { unavailable: false, fields: { sqliteCode: 19 } }, 'a 500, with its SQLite code');
  assert.equal((answers[1]![0] as Pet).name, 'Other');
  assert.deepEqual((await reader.pets.list({ afterId: 0n, status: undefined, limit: 10 })).map((p) => p.name), ['Good', 'Other']);
});

test('one Idempotency-Key from two ports in one group makes one pet; the other is answered with the record the writer wrote', async (t) => {
  const { clients: [first, second], count } = await startWriter(t);
  const [a, b] = await Promise.all([
    insert(first!, [{ ...pet('Rex'), idempotency: remembering('same') }]),
    insert(second!, [{ ...pet('Rex'), idempotency: remembering('same') }]),
  ]);
  const made = a![0] as Pet;
  assert.deepEqual(b![0], { conflict: 'recorded', record: { fingerprint: 'fp-same', createdAt: T0, made } });
  assert.equal(count('pets'), 1);
});

test('before a write is answered, a reader finds it in the journal and its commit published: no cached answer outside it is dropped, and any other connection\'s commit drops them all', async (t) => {
  const { path, clients: [first], reader } = await startWriter(t, 1);
  const [rex] = (await insert(first!, [pet('Rex'), { ...pet('Tom'), status: 'sold' }])) as Pet[];
  await new Promise((resolve) => setImmediate(resolve));
  const before = reader.pets.revision()!;
  await rename(first!, rex!.id, 'Rex II', null);
  await new Promise((resolve) => setImmediate(resolve));
  const after = reader.pets.revision()!;
  assert.equal(after.external, before.external, 'the writer\'s commit is not another connection\'s');
  assert.equal(after.writes, before.writes + 1);
  assert.equal(reader.pets.writtenSince(before.writes, rex!.id - 1, rex!.id), true, 'the change of Rex');
  assert.equal(reader.pets.writtenSince(before.writes, rex!.id, Infinity), false, 'nothing after Rex');
  assert.equal(reader.pets.writtenSince(before.writes, 0, Infinity, statusBit('sold')), false, 'no sold pet: a page of sold pets keeps its answer');

  const other = new DatabaseSync(path);
  t.after(() => other.close());
  other.exec("INSERT INTO pets (name, category_id, status) VALUES ('Foreign', 1, 'sold')");
  await new Promise((resolve) => setImmediate(resolve));
  assert.notEqual(reader.pets.revision()!.external, after.external, 'another connection\'s commit');
  // The writer notices it at its next group (which may drop the caches once more), then
  // its own commits are its own again.
  await insert(first!, [pet('Kit')]);
  await new Promise((resolve) => setImmediate(resolve));
  const settled = reader.pets.revision()!.external;
  await insert(first!, [pet('Nemo')]);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(reader.pets.revision()!.external, settled, 'and then the writer\'s own again');
});

test('the limiter\'s save and the purge of expired records are writes of the writer too', async (t) => {
  const { clients: [first], count, reader } = await startWriter(t, 1);
  await insert(first!, [{ ...pet('old'), idempotency: remembering('old', T0) }, { ...pet('new'), idempotency: remembering('new', T0 + 86_400_000) }]);
  assert.equal(await reader.upkeep.purgeExpiredRecords(T0 + 86_400_000 + 1, 10), 1);
  assert.equal(count('idempotency_keys'), 1);
  const saved = { caller: 'key:x', perMinute: 60, perDay: 1000, minuteTokens: 59, dayTokens: 999, updatedAt: T0, bannedUntil: 0, banCount: 0, recentRejections: [] };
  assert.deepEqual(await first!.submit('saveLimiter', [{ saved: [saved], removed: [] }]), [1]);
  assert.equal(count('rate_limit_callers'), 1);
});

test('closing lets the writer finish what it was sent, checkpoint the WAL away as the last connection, and stop; later writes are 503', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pets-writer-close-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'pets.db');
  closeDatabase(openDatabase(path));
  const writer = startWriterThread({ entry: TEST_WRITER_ENTRY, path });
  const client = createWriterClient(writer.connect());
  const sent = insert(client, Array.from({ length: 100 }, (_, i) => pet(`p${i}`)));
  const closed = writer.close();
  assert.equal((await sent).length, 100);
  await closed;
  await assert.rejects(insert(client, [pet('late')]), (error) => error instanceof DatabaseUnavailableError);
  assert.equal(existsSync(`${path}-wal`), false);
  const check = new DatabaseSync(path);
  assert.equal((check.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 100);
  check.close();
});
