import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../src/database.ts';
import { createPetsStore } from '../src/pets-store.ts';

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
