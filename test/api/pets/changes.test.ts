import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../../../src/storage/sqlite/database.ts';
import { createPetChanges } from '../../../src/api/pets/changes.ts';
import { createPetsStore, type SqlitePetsStore as PetsStore } from '../../../src/storage/sqlite/pets-store.ts';
import type { PetChange } from '../../../src/storage/pets.ts';

/** The change path over a real in-memory store with three pets, batches flushed when the test says. */
function changes(wrap: (real: PetsStore) => Pick<PetsStore, 'changeMany'> = (real) => real, groupCommit = true) {
  const db = openDatabase(':memory:');
  const real = createPetsStore(db);
  real.insertMany(['a', 'b', 'c'].map((name) => ({ name, categoryId: 1n, status: 'available' as const })));
  const flushes: (() => void)[] = [];
  const change = createPetChanges({ pets: wrap(real), groupCommit, schedule: (flush) => void flushes.push(flush) });
  return { db, real, change, flush: () => flushes.shift()!() };
}

const rename = (id: bigint, name: string, expectedVersion: number | null = null): PetChange => ({ kind: 'update', id, patch: { name }, expectedVersion, now: 0 });

test('the changes submitted in one turn are written in one transaction, each answered with its own outcome', async () => {
  const batches: number[] = [];
  const { real, change, flush } = changes((store) => ({ changeMany: (list) => (batches.push(list.length), store.changeMany(list)) }));
  const pending = [change(rename(1n, 'x', 1)), change(rename(1n, 'y', 1)), change({ kind: 'delete', id: 2n, expectedVersion: null , now: 0}), change(rename(9n, 'z'))];
  flush();
  assert.deepEqual((await Promise.all(pending)).map((outcome) => outcome.kind), ['updated', 'version_mismatch', 'deleted', 'not_found']);
  assert.deepEqual(batches, [4]);
  assert.deepEqual(real.get(1n), { id: 1, name: 'x', categoryId: 1n, status: 'available', version: 2 });
  assert.equal(real.get(2n), null);
});

test('a failed batch answers each of its changes with the error and stores none of them', async () => {
  const full = Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 });
  let fail = true;
  const { real, change, flush } = changes((store) => ({ changeMany: (list) => (fail ? (() => { throw full; })() : store.changeMany(list)) }));
  const pending = [change(rename(1n, 'x')), change({ kind: 'delete', id: 2n, expectedVersion: null , now: 0})].map((promise) => promise.catch((error: unknown) => error));
  flush();
  assert.deepEqual(await Promise.all(pending), [full, full]);
  assert.equal(real.get(1n)!.name, 'a');
  assert.notEqual(real.get(2n), null);
  fail = false;
  const retry = change(rename(1n, 'x'));
  flush();
  assert.equal((await retry).kind, 'updated');
});

test('without group commit each change is its own transaction', async () => {
  const batches: number[] = [];
  const { change } = changes((store) => ({ changeMany: (list) => (batches.push(list.length), store.changeMany(list)) }), false);
  await Promise.all([change(rename(1n, 'x')), change(rename(2n, 'y'))]);
  assert.deepEqual(batches, [1, 1]);
});
