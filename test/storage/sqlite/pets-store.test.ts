import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { migrate, openDatabase } from '../../../src/storage/sqlite/database.ts';
import { MIGRATIONS } from '../../../src/storage/sqlite/migrations.ts';
import { createPetsStore } from '../../../src/storage/sqlite/pets-store.ts';
import { JOURNAL_LENGTH } from '../../../src/storage/sqlite/writer.ts';
import { isConflict, type Pet, type PetChange, type PetPatch } from '../../../src/storage/pets.ts';
import { allSucceeded, isItemFailure } from '../../../src/lib/item-outcome.ts';
import type { IdempotencyWrite } from '../../../src/storage/idempotency.ts';
import { petETag } from '../../../src/api/pets/json.ts';
import { FULL_DISK, LARGE } from '../../support/full-disk.ts';

function store() {
  const db = openDatabase(':memory:');
  return { db, pets: createPetsStore(db) };
}

test('insertMany returns the pets with increasing ids and stores int64 exactly', () => {
  const { pets } = store();
  const created = allSucceeded(pets.insertMany([
    { name: 'a', categoryId: 9223372036854775807n, status: 'available' },
    { name: 'b', categoryId: 2n, status: 'sold' },
  ]));
  assert.deepEqual(created.map((pet) => pet.id), [1, 2]);
  assert.deepEqual(pets.get(1n), { id: 1, name: 'a', categoryId: 9223372036854775807n, status: 'available', version: 1 });
  assert.deepEqual(created.map((pet) => pet.version), [1, 1]);
  assert.equal(pets.get(3n), null);
  assert.equal(pets.get(9223372036854775807n), null);
});

test('a creation whose statement fails fails alone (the batch runs again, each creation in a savepoint); the others are committed', () => {
  const { db, pets } = store();
  const [a, b, c] = pets.insertMany([
    { name: 'a', categoryId: 1n, status: 'available' },
    { name: 'b', categoryId: 0n, status: 'available' }, // violates the CHECK
    { name: 'c', categoryId: 1n, status: 'available' },
  ]);
  assert.ok(isItemFailure(b!) && (b.error as { errcode?: number }).errcode === 275, 'SQLITE_CONSTRAINT_CHECK (275), as thrown');
  assert.deepEqual([a, c].map((pet) => (pet as Pet).name), ['a', 'c']);
  assert.deepEqual(pets.list({ afterId: 0n, status: undefined, limit: 10 }).map((pet) => pet.name), ['a', 'c']);
  assert.equal(db.isTransaction, false);
});

test('list pages by id after a position, with an optional status filter', () => {
  const { pets } = store();
  pets.insertMany(Array.from({ length: 10 }, (_, i) => ({ name: `p${i}`, categoryId: 1n, status: i % 2 ? 'sold' as const : 'available' as const })));
  assert.deepEqual(pets.list({ afterId: 0n, status: undefined, limit: 3 }).map((pet) => pet.id), [1, 2, 3]);
  assert.deepEqual(pets.list({ afterId: 3n, status: undefined, limit: 3 }).map((pet) => pet.id), [4, 5, 6]);
  assert.deepEqual(pets.list({ afterId: 3n, status: 'sold', limit: 10 }).map((pet) => pet.id), [4, 6, 8, 10]);
  assert.deepEqual(pets.list({ afterId: 10n, status: undefined, limit: 3 }), []);
});

test('ids are never reused, even after the newest row is deleted', () => {
  const { db, pets } = store();
  pets.insertMany([{ name: 'a', categoryId: 1n, status: 'available' }]);
  db.exec('DELETE FROM pets');
  assert.equal(allSucceeded(pets.insertMany([{ name: 'b', categoryId: 1n, status: 'available' }]))[0]!.id, 2);
});

test('a status-filtered page is served by the (status, id) index, not a scan', () => {
  const { db } = store();
  const plan = db.prepare("EXPLAIN QUERY PLAN SELECT id FROM pets WHERE status = 'sold' AND id > 5 ORDER BY id LIMIT 3").all();
  assert.match(JSON.stringify(plan), /pets_status_id/);
  assert.doesNotMatch(JSON.stringify(plan), /TEMP B-TREE/);
});

const DAY = 24 * 60 * 60 * 1000;

function remembered(key: string, createdAt: number, fingerprint = 'fp', apiKeyId = 'key_a'): IdempotencyWrite {
  return { apiKeyId, key, fingerprint, createdAt };
}

test('insertMany writes the idempotency record with its pet, holding the pet as made, in its stored form under the marker status', () => {
  const { db, pets } = store();
  const [pet] = pets.insertMany([{ name: 'a "b"', categoryId: 9_223_372_036_854_775_807n, status: 'available', idempotency: remembered('k1', 1000) }]) as Pet[];
  assert.deepEqual(pets.findIdempotencyRecord('key_a', 'k1', 1000), { fingerprint: 'fp', createdAt: 1000, made: pet });
  assert.deepEqual({ ...db.prepare('SELECT response_status, response_headers, response_body FROM idempotency_keys').get() }, {
    response_status: 0, response_headers: '{}',
    response_body: `{"id":${pet!.id},"name":"a \\"b\\"","categoryId":"9223372036854775807","status":"available","version":1}`,
  });
  assert.equal(pets.findIdempotencyRecord('key_b', 'k1', 1000), null, 'keys are scoped by API key');
  assert.equal(pets.findIdempotencyRecord('key_a', 'k2', 1000), null);
});

test('a record is found for 24 h and not from the instant it expires', () => {
  const { pets } = store();
  pets.insertMany([{ name: 'a', categoryId: 1n, status: 'available', idempotency: remembered('k', 1000) }]);
  assert.notEqual(pets.findIdempotencyRecord('key_a', 'k', 1000 + DAY - 1), null);
  assert.equal(pets.findIdempotencyRecord('key_a', 'k', 1000 + DAY), null);
});

test('a creation that fails leaves neither its pet nor its record; the others of the batch keep theirs', () => {
  const { db, pets } = store();
  const outcomes = pets.insertMany([
    { name: 'a', categoryId: 1n, status: 'available', idempotency: remembered('k1', 1000) },
    { name: 'b', categoryId: 0n, status: 'available', idempotency: remembered('k2', 1000) }, // violates the CHECK
  ]);
  assert.deepEqual(outcomes.map(isItemFailure), [false, true]);
  assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 1);
  assert.deepEqual((db.prepare('SELECT idempotency_key FROM idempotency_keys').all() as { idempotency_key: string }[]).map((row) => row.idempotency_key), ['k1']);
});

test('a failure that means the database cannot be written fails the whole batch: nothing is stored', () => {
  const { db, pets } = store();
  db.exec(FULL_DISK);
  const failing: IdempotencyWrite = { ...remembered('k2', 1000), fingerprint: 'f'.repeat(LARGE) };
  assert.throws(() => pets.insertMany([
    { name: 'a', categoryId: 1n, status: 'available', idempotency: remembered('k1', 1000) },
    { name: 'b', categoryId: 1n, status: 'available', idempotency: failing },
  ]), { errcode: 13 });
  assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 0);
  assert.equal((db.prepare('SELECT count(*) AS n FROM idempotency_keys').get() as { n: number }).n, 0);
  assert.equal(db.isTransaction, false);
});

test('an expired record not yet purged is replaced; a live one is reported as recorded, even within one batch', () => {
  const { db, pets } = store();
  pets.insertMany([{ name: 'a', categoryId: 1n, status: 'available', idempotency: remembered('k', 1000, 'old') }]);
  pets.insertMany([{ name: 'b', categoryId: 1n, status: 'available', idempotency: remembered('k', 1000 + DAY, 'new') }]);
  assert.equal(pets.findIdempotencyRecord('key_a', 'k', 1000 + DAY)!.fingerprint, 'new');
  const [plain, conflict] = allSucceeded(pets.insertMany([
    { name: 'c', categoryId: 1n, status: 'available' },
    { name: 'd', categoryId: 1n, status: 'available', idempotency: remembered('k', 2000 + DAY, 'newer') },
  ]));
  assert.equal((plain as Pet).name, 'c');
  assert.equal(isConflict(conflict!) && conflict.conflict === 'recorded' && conflict.record.fingerprint, 'new');
  assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 3);
  // The caller's in-flight set keeps one key out of two creations of a batch; were it to fail,
  // the second would still find the first's record, not store a second pet.
  const [one, two] = allSucceeded(pets.insertMany([
    { name: 'e', categoryId: 1n, status: 'available', idempotency: remembered('k2', 3000 + DAY, 'one') },
    { name: 'f', categoryId: 1n, status: 'available', idempotency: remembered('k2', 3000 + DAY, 'two') },
  ]));
  assert.equal((one as Pet).name, 'e');
  assert.equal(isConflict(two!) && two.conflict === 'recorded' && two.record.fingerprint, 'one');
  assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 4);
  assert.equal(pets.findIdempotencyRecord('key_a', 'k', 2000 + DAY)!.fingerprint, 'new');
});

test('purgeIdempotencyRecords deletes expired records only, oldest first, at most the limit', () => {
  const { db, pets } = store();
  pets.insertMany([1000, 3000, 2000, 5000].map((createdAt, i) => ({
    name: `p${i}`, categoryId: 1n, status: 'available' as const, idempotency: remembered(`k${createdAt}`, createdAt),
  })));
  const now = 4000 + DAY; // 1000, 2000 and 3000 have expired; 5000 has not
  assert.equal(pets.purgeIdempotencyRecords(now, 2), 2);
  const left = () => (db.prepare('SELECT created_at FROM idempotency_keys ORDER BY created_at').all() as { created_at: number }[]).map((row) => row.created_at);
  assert.deepEqual(left(), [3000, 5000]);
  assert.equal(pets.purgeIdempotencyRecords(now, 2), 1);
  assert.equal(pets.purgeIdempotencyRecords(now, 2), 0);
  assert.deepEqual(left(), [5000]);
  assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 4, 'purging records never deletes pets');
});

// --- changes and deletions (contract 1.1) -----------------------------------------------------

const update = (id: bigint, patch: PetPatch, expectedVersion: number | null = null): PetChange => ({ kind: 'update', id, patch, expectedVersion, now: 0 });
const remove = (id: bigint, expectedVersion: number | null = null): PetChange => ({ kind: 'delete', id, expectedVersion, now: 0 });

function withPets(count = 3) {
  const { db, pets } = store();
  pets.insertMany(Array.from({ length: count }, (_, i) => ({ name: `p${i + 1}`, categoryId: BigInt(i + 1), status: 'available' as const })));
  return { db, pets };
}

test('an update sets the fields given, keeps the others, bumps the version and returns the whole pet', () => {
  const { pets } = withPets();
  assert.deepEqual(pets.changeMany([update(2n, { status: 'sold' })]), [
    { kind: 'updated', pet: { id: 2, name: 'p2', categoryId: 2n, status: 'sold', version: 2 }, changed: true },
  ]);
  const [outcome] = pets.changeMany([update(2n, { name: 'Rex', categoryId: 9223372036854775807n })]);
  assert.deepEqual(outcome, { kind: 'updated', pet: { id: 2, name: 'Rex', categoryId: 9223372036854775807n, status: 'sold', version: 3 }, changed: true });
  assert.deepEqual(pets.get(2n), { id: 2, name: 'Rex', categoryId: 9223372036854775807n, status: 'sold', version: 3 });
  assert.equal(pets.get(1n)!.version, 1, 'other pets keep their version');
});

test('an update that sets the values the pet already has still bumps the version', () => {
  const { pets } = withPets();
  pets.changeMany([update(1n, { name: 'p1', status: 'available' })]);
  assert.equal(pets.get(1n)!.version, 2);
});

test('with an expected version, a change applies only to that version, and of two expecting it exactly one applies', () => {
  const { pets } = withPets();
  const outcomes = allSucceeded(pets.changeMany([update(1n, { status: 'pending' }, 1), update(1n, { status: 'sold' }, 1), remove(1n, 1)]));
  assert.deepEqual(outcomes.map((outcome) => outcome.kind), ['updated', 'version_mismatch', 'version_mismatch']);
  assert.deepEqual(pets.get(1n), { id: 1, name: 'p1', categoryId: 1n, status: 'pending', version: 2 });
  assert.deepEqual(pets.changeMany([remove(1n, 2)]), [{ kind: 'deleted' }]);
});

test('changes of a pet that does not exist, or no longer does, are not_found; nothing is written', () => {
  const { db, pets } = withPets();
  assert.deepEqual(allSucceeded(pets.changeMany([remove(2n), remove(2n), update(2n, { name: 'x' }), update(2n, { name: 'x' }, 1), update(99n, { name: 'x' }), remove(-1n)])).map((outcome) => outcome.kind), [
    'deleted', 'not_found', 'not_found', 'not_found', 'not_found', 'not_found',
  ]);
  assert.deepEqual((db.prepare('SELECT id, version FROM pets ORDER BY id').all() as { id: number; version: number }[]).map((row) => ({ ...row })), [
    { id: 1, version: 1 }, { id: 3, version: 1 },
  ]);
});

test('a deleted pet is gone from lookups and lists, and its id is never given again (AUTOINCREMENT)', () => {
  const { pets } = withPets(3);
  pets.changeMany([remove(3n), remove(2n)]);
  assert.equal(pets.get(3n), null);
  assert.deepEqual(pets.list({ afterId: 0n, status: undefined, limit: 10 }).map((pet) => pet.id), [1]);
  assert.equal(allSucceeded(pets.insertMany([{ name: 'new', categoryId: 1n, status: 'available' }]))[0]!.id, 4);
});

test('a change whose statement fails is rolled back alone; the changes around it are committed', () => {
  const { db, pets } = withPets();
  const outcomes = pets.changeMany([update(1n, { name: 'kept' }), update(2n, { name: 'not kept', categoryId: 0n }), remove(3n)]); // 0 violates the CHECK
  assert.deepEqual(outcomes.map((outcome) => (isItemFailure(outcome) ? 'failed' : outcome.kind)), ['updated', 'failed', 'deleted']);
  assert.deepEqual(pets.get(1n), { id: 1, name: 'kept', categoryId: 1n, status: 'available', version: 2 });
  assert.deepEqual(pets.get(2n), { id: 2, name: 'p2', categoryId: 2n, status: 'available', version: 1 });
  assert.equal(pets.get(3n), null);
  assert.equal(db.isTransaction, false);
});

test('the journal says which writes touched which ids, shared by every store on the connection', () => {
  const { db, pets } = withPets(5);
  const other = createPetsStore(db);
  const start = pets.revision().writes;
  assert.equal(pets.writtenSince(start, 0n, Infinity), false, 'no write since');
  other.changeMany([update(3n, { name: 'x' })]);
  assert.equal(pets.revision().writes, start + 1, "another store's write counts");
  assert.equal(pets.writtenSince(start, 2n, 3), true, 'id 3 is in (2, 3]');
  assert.equal(pets.writtenSince(start, 3n, 10), false, 'the lower end is exclusive');
  assert.equal(pets.writtenSince(start, 0n, 2), false);
  const afterUpdate = pets.revision().writes;
  pets.changeMany([update(1n, { name: 'y' }, 9), remove(42n)]);
  assert.equal(pets.revision().writes, afterUpdate, 'a change that did not happen is no write');
  pets.insertMany([{ name: 'a', categoryId: 1n, status: 'available' }, { name: 'b', categoryId: 1n, status: 'available' }]);
  assert.equal(pets.revision().writes, afterUpdate + 1, 'a batch of inserts is one write');
  assert.equal(pets.writtenSince(afterUpdate, 5n, Infinity), true, 'new ids fall into an open range');
  assert.equal(pets.writtenSince(afterUpdate, 0n, 5), false, 'and into no range that ends at an existing id');
  assert.equal(pets.writtenSince(afterUpdate, 6n, 7), true, 'the batch covers ids 6 to 7');
});

test('the journal remembers the last JOURNAL_LENGTH writes; older revisions are answered "maybe" (true)', () => {
  const { pets } = withPets(2);
  const start = pets.revision().writes;
  for (let i = 0; i < JOURNAL_LENGTH; i++) pets.changeMany([update(2n, { name: `n${i}` })]);
  assert.equal(pets.writtenSince(start, 0n, 1), false, 'exactly the journal length: still known');
  pets.changeMany([update(2n, { name: 'one more' })]);
  assert.equal(pets.writtenSince(start, 0n, 1), true);
});

test('the writes of a batch with a failed item are journaled; a failed write journaled all the same is harmless', () => {
  const { db, pets } = withPets();
  const start = pets.revision().writes;
  pets.insertMany([{ name: 'a', categoryId: 1n, status: 'available' }, { name: 'b', categoryId: 0n, status: 'available' }]);
  assert.equal(pets.writtenSince(start, 3n, Infinity), true, 'pet a, stored beside the failed b');
  const afterInsert = pets.revision().writes;
  pets.changeMany([update(1n, { name: 'x' }), update(2n, { categoryId: 0n })]);
  assert.equal(pets.writtenSince(afterInsert, 0n, 1), true, 'the change of pet 1, committed beside the failed one');
  assert.equal(pets.writtenSince(afterInsert, 1n, 2), false, 'the failed change of pet 2 is no write');
  const afterChange = pets.revision().writes;
  db.exec(FULL_DISK);
  const failing: IdempotencyWrite = { ...remembered('k', 1000), fingerprint: 'f'.repeat(LARGE) };
  assert.throws(() => pets.insertMany([{ name: 'c', categoryId: 1n, status: 'available', idempotency: failing }]), { errcode: 13 });
  assert.equal(pets.writtenSince(afterChange, 0n, Infinity), false, 'the batch failed before it was journaled');
});

test('migration 4 gives every existing pet version 1, and remembered creations the ETag they had', () => {
  const db = new DatabaseSync(':memory:');
  migrate(db, MIGRATIONS.slice(0, 3));
  db.exec("INSERT INTO pets (name, category_id, status) VALUES ('old', 5, 'sold')");
  db.prepare(`INSERT INTO idempotency_keys (api_key_id, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
    VALUES ('key_a', 'k', 'fp', 201, '{"Location":"/v1/pets/1"}', '{"id":1,"name":"old","categoryId":5,"status":"sold"}', 1000)`).run();
  migrate(db);
  const pets = createPetsStore(db);
  assert.deepEqual(pets.get(1n), { id: 1, name: 'old', categoryId: 5n, status: 'sold', version: 1 });
  const record = pets.findIdempotencyRecord('key_a', 'k', 1000)!;
  assert.ok('response' in record, 'a record of an earlier version is read as the response it kept');
  assert.deepEqual(record.response.headers, { Location: '/v1/pets/1', ETag: petETag({ id: 1, version: 1 }) });
  assert.throws(() => db.exec('UPDATE pets SET version = 0'), /CHECK/);
});
