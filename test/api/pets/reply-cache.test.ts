import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createReplyCache } from '../../../src/api/pets/reply-cache.ts';
import { openDatabase } from '../../../src/storage/sqlite/database.ts';
import { createPetsStore } from '../../../src/storage/sqlite/pets-store.ts';
import { statusBit } from '../../../src/storage/pets.ts';

const reply = (body: string) => ({ status: 200, body });
const pet = (name: string) => ({ name, categoryId: 1n, status: 'available' as const });

/** A cache over a real store's journal, with pets 1..count. */
function setup(count = 10) {
  const pets = createPetsStore(openDatabase(':memory:'));
  pets.insertMany(Array.from({ length: count }, (_, i) => pet(`p${i + 1}`)));
  return { pets, cache: createReplyCache(10, pets) };
}

const update = (id: number) => ({ kind: 'update' as const, id: BigInt(id), patch: { name: 'changed' }, expectedVersion: null , now: 0});

test('an answer survives writes outside its range and is dropped by a write inside it', () => {
  const { pets, cache } = setup();
  cache.set('page', reply('pets 3 to 5'), { after: 2n, through: 6 }, pets.revision());
  pets.changeMany([update(1), update(7)]);
  assert.equal(cache.get('page', pets.revision())?.body, 'pets 3 to 5', 'ids 1 and 7 are outside (2, 6]');
  pets.changeMany([update(6)]);
  assert.equal(cache.get('page', pets.revision()), undefined, 'id 6 is inside: the extra row decides the next link');
  assert.equal(cache.get('page', pets.revision()), undefined, 'a dropped entry stays dropped');
});

test('the lower end is exclusive: the cursor position itself is not part of the answer', () => {
  const { pets, cache } = setup();
  cache.set('page', reply('after 2'), { after: 2n, through: 4 }, pets.revision());
  pets.changeMany([update(2)]);
  assert.equal(cache.get('page', pets.revision())?.body, 'after 2');
  pets.changeMany([update(3)]);
  assert.equal(cache.get('page', pets.revision()), undefined);
});

test('a deletion inside the range drops the answer', () => {
  const { pets, cache } = setup();
  cache.set('pet 4', reply('pet 4'), { after: 3, through: 4 }, pets.revision());
  pets.changeMany([{ kind: 'delete', id: 5n, expectedVersion: null , now: 0}]);
  assert.equal(cache.get('pet 4', pets.revision())?.body, 'pet 4');
  pets.changeMany([{ kind: 'delete', id: 4n, expectedVersion: null , now: 0}]);
  assert.equal(cache.get('pet 4', pets.revision()), undefined);
});

test('new pets drop only answers without an upper end (the last page)', () => {
  const { pets, cache } = setup();
  cache.set('full page', reply('full'), { after: 0n, through: 3 }, pets.revision());
  cache.set('last page', reply('last'), { after: 8n, through: Infinity }, pets.revision());
  pets.insertMany([pet('new')]);
  assert.equal(cache.get('full page', pets.revision())?.body, 'full');
  assert.equal(cache.get('last page', pets.revision()), undefined);
});

test('an answer about one status survives the writes to pets that neither had nor have it', () => {
  const { pets, cache } = setup();
  const sold = { after: 0n, through: Infinity, statuses: statusBit('sold') };
  cache.set('sold', reply('the sold pets'), sold, pets.revision());
  pets.insertMany([pet('new')]);
  pets.changeMany([update(3), { kind: 'update', id: 4n, patch: { status: 'pending' }, expectedVersion: null , now: 0}, { kind: 'delete', id: 5n, expectedVersion: null , now: 0}]);
  assert.equal(cache.get('sold', pets.revision())?.body, 'the sold pets', 'available pets created, renamed, made pending, deleted');
  pets.changeMany([{ kind: 'update', id: 6n, patch: { status: 'sold' }, expectedVersion: null , now: 0}]);
  assert.equal(cache.get('sold', pets.revision()), undefined, 'a pet that becomes sold');
  cache.set('sold', reply('the sold pets'), sold, pets.revision());
  pets.changeMany([{ kind: 'update', id: 6n, patch: { name: 'renamed' }, expectedVersion: null , now: 0}]);
  assert.equal(cache.get('sold', pets.revision()), undefined, 'a sold pet renamed');
  cache.set('sold', reply('the sold pets'), sold, pets.revision());
  pets.changeMany([{ kind: 'update', id: 6n, patch: { status: 'available' }, expectedVersion: null , now: 0}]);
  assert.equal(cache.get('sold', pets.revision()), undefined, 'a pet that stops being sold');
  cache.set('sold', reply('the sold pets'), sold, pets.revision());
  pets.insertMany([{ ...pet('sold one'), status: 'sold' }]);
  assert.equal(cache.get('sold', pets.revision()), undefined, 'a new sold pet');
});

test('a change or delete that did not happen (wrong version, no such pet) drops nothing', () => {
  const { pets, cache } = setup();
  cache.set('pet 4', reply('pet 4'), { after: 3, through: 4 }, pets.revision());
  pets.changeMany([{ ...update(4), expectedVersion: 9 }, { kind: 'delete', id: 4n, expectedVersion: 9 , now: 0}, update(99)]);
  assert.equal(cache.get('pet 4', pets.revision())?.body, 'pet 4');
});

test("another connection's commit drops every answer, whatever its range", () => {
  const { pets, cache } = setup();
  const revision = pets.revision();
  cache.set('pet 4', reply('pet 4'), { after: 3, through: 4 }, revision);
  assert.equal(cache.get('pet 4', { ...revision, external: revision.external + 1 }), undefined);
});

test('an answer older than the journal is dropped: the writes since are no longer known', () => {
  const { pets, cache } = setup(2);
  cache.set('pet 1', reply('pet 1'), { after: 0, through: 1 }, pets.revision());
  cache.set('pet 2', reply('pet 2'), { after: 1, through: 2 }, pets.revision());
  // Each write touches pet 2 only; after as many as the journal holds, pet 1's entry is still known right.
  for (let i = 0; i < 1024; i++) pets.changeMany([update(2)]);
  assert.equal(cache.get('pet 1', pets.revision())?.body, 'pet 1');
  for (let i = 0; i < 1025; i++) pets.changeMany([update(2)]);
  assert.equal(cache.get('pet 1', pets.revision()), undefined);
});

test('a checked entry moves to the current revision, so old writes are not counted against it twice', () => {
  const { pets, cache } = setup();
  cache.set('pet 1', reply('pet 1'), { after: 0, through: 1 }, pets.revision());
  for (let i = 0; i < 1000; i++) pets.changeMany([update(2)]);
  assert.equal(cache.get('pet 1', pets.revision())?.body, 'pet 1');
  for (let i = 0; i < 1000; i++) pets.changeMany([update(2)]);
  assert.equal(cache.get('pet 1', pets.revision())?.body, 'pet 1', '2000 writes in all, but never more than the journal holds between two checks');
});

test('the cache holds at most its capacity, dropping the oldest entry', () => {
  const pets = createPetsStore(openDatabase(':memory:'));
  const cache = createReplyCache(2, pets);
  const now = pets.revision();
  const all = { after: 0n, through: Infinity };
  cache.set('a', reply('a'), all, now);
  cache.set('b', reply('b'), all, now);
  cache.set('a', reply('a2'), all, now);
  cache.set('c', reply('c'), all, now);
  assert.equal(cache.get('a', now), undefined);
  assert.equal(cache.get('b', now)?.body, 'b');
  assert.equal(cache.get('c', now)?.body, 'c');
});
