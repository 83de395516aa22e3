import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../../../src/storage/sqlite/database.ts';
import { createPetsStore } from '../../../src/storage/sqlite/pets-store.ts';
import type { IdempotencyWrite } from '../../../src/storage/pets.ts';

function store() {
  const db = openDatabase(':memory:');
  return { db, pets: createPetsStore(db) };
}

test('insertMany returns the pets with increasing ids and stores int64 exactly', () => {
  const { pets } = store();
  const created = pets.insertMany([
    { name: 'a', categoryId: 9223372036854775807n, status: 'available' },
    { name: 'b', categoryId: 2n, status: 'sold' },
  ]);
  assert.deepEqual(created.map((pet) => pet.id), [1, 2]);
  assert.deepEqual(pets.get(1n), { id: 1, name: 'a', categoryId: 9223372036854775807n, status: 'available' });
  assert.equal(pets.get(3n), null);
  assert.equal(pets.get(9223372036854775807n), null);
});

test('insertMany is all or nothing', () => {
  const { db, pets } = store();
  assert.throws(() => pets.insertMany([
    { name: 'a', categoryId: 1n, status: 'available' },
    { name: 'b', categoryId: 0n, status: 'available' }, // violates the CHECK
  ]));
  assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 0);
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
  assert.equal(pets.insertMany([{ name: 'b', categoryId: 1n, status: 'available' }])[0]!.id, 2);
});

test('a status-filtered page is served by the (status, id) index, not a scan', () => {
  const { db } = store();
  const plan = db.prepare("EXPLAIN QUERY PLAN SELECT id FROM pets WHERE status = 'sold' AND id > 5 ORDER BY id LIMIT 3").all();
  assert.match(JSON.stringify(plan), /pets_status_id/);
  assert.doesNotMatch(JSON.stringify(plan), /TEMP B-TREE/);
});

const DAY = 24 * 60 * 60 * 1000;

function remembered(key: string, createdAt: number, fingerprint = 'fp', apiKeyId = 'key_a'): IdempotencyWrite {
  return {
    apiKeyId, key, fingerprint, createdAt,
    respond: (pet) => ({ status: 201, headers: { Location: `/v1/pets/${pet.id}` }, body: `{"id":${pet.id}}` }),
  };
}

test('insertMany writes the idempotency record with its pet, holding the response built from the id', () => {
  const { pets } = store();
  const [pet] = pets.insertMany([{ name: 'a', categoryId: 1n, status: 'available', idempotency: remembered('k1', 1000) }]);
  assert.deepEqual(pets.findIdempotencyRecord('key_a', 'k1', 1000), {
    fingerprint: 'fp',
    createdAt: 1000,
    response: { status: 201, headers: { Location: `/v1/pets/${pet!.id}` }, body: `{"id":${pet!.id}}` },
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

test('a failing insertMany leaves neither pets nor idempotency records', () => {
  const { db, pets } = store();
  assert.throws(() => pets.insertMany([
    { name: 'a', categoryId: 1n, status: 'available', idempotency: remembered('k1', 1000) },
    { name: 'b', categoryId: 0n, status: 'available', idempotency: remembered('k2', 1000) }, // violates the CHECK
  ]));
  assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 0);
  assert.equal((db.prepare('SELECT count(*) AS n FROM idempotency_keys').get() as { n: number }).n, 0);
});

test('an expired record not yet purged is replaced; a live one fails the whole batch', () => {
  const { db, pets } = store();
  pets.insertMany([{ name: 'a', categoryId: 1n, status: 'available', idempotency: remembered('k', 1000, 'old') }]);
  pets.insertMany([{ name: 'b', categoryId: 1n, status: 'available', idempotency: remembered('k', 1000 + DAY, 'new') }]);
  assert.equal(pets.findIdempotencyRecord('key_a', 'k', 1000 + DAY)!.fingerprint, 'new');
  assert.throws(() => pets.insertMany([
    { name: 'c', categoryId: 1n, status: 'available' },
    { name: 'd', categoryId: 1n, status: 'available', idempotency: remembered('k', 2000 + DAY, 'newer') },
  ]), /live idempotency record/);
  assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 2);
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
