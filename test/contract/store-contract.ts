/**
 * The storage contract: what every engine behind src/storage/keys.ts and src/storage/pets.ts
 * must do, as one table-driven suite that each engine's test file runs with its own `open`
 * (the way Hono runs one router suite against every router). Results are awaited, so the same
 * cases serve the synchronous engine and the asynchronous one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UnknownAccountError, type KeysStore, type NewKey } from '../../src/storage/keys.ts';
import type { ChangeOutcome, CreationResult, NewPet, Pet, PetsStore } from '../../src/storage/pets.ts';
import type { IdempotencyRecord, IdempotencyWrite } from '../../src/storage/idempotency.ts';
import { allSucceeded, isItemFailure, type ItemOutcome } from '../../src/lib/item-outcome.ts';
import { hashApiKey, isWellFormedApiKey } from '../../src/keys/api-keys.ts';
import type { Scope } from '../../src/keys/scopes.ts';
import { IDEMPOTENCY_TTL_MS } from '../../src/storage/idempotency.ts';
import { LARGE } from '../support/full-disk.ts';

export interface OpenedStores {
  keys: KeysStore;
  pets: PetsStore;
}

export interface StoreContractOptions {
  /** Fresh, empty stores for one test (development keys); closed by the engine when the test ends. */
  open(t: { after(fn: () => unknown): void }): Promise<OpenedStores & FullDisk & ByHand>;
}

/** A row written past the service, as an operator could with the database's own client. */
export interface ByHand {
  /** Stores a pet with this id (available, category 1) on a connection of its own. */
  putPet(id: bigint): Promise<void>;
}

/** A way to make the database itself fail a write, as the engine's writes meet it. */
export interface FullDisk {
  /**
   * From now on the database has no room for a large row (test/support/full-disk.ts): a record
   * whose fingerprint is LARGE long fails as the engine's writes fail when the disk is full,
   * while small rows are still written.
   */
  fillDisk(): Promise<void>;
}


const T0 = Date.UTC(2026, 0, 1);
const INT64_MAX = 9_223_372_036_854_775_807n;

const pet = (name: string, categoryId = 1n, status: NewPet['status'] = 'available'): NewPet => ({ name, categoryId, status });

function remembering(apiKeyId: string, key: string, createdAt = T0): IdempotencyWrite {
  return { apiKeyId, key, fingerprint: `fp-${key}`, createdAt };
}

/** What a record keeps of the pet its creation made. */
function made(record: IdempotencyRecord<Pet> | null): Pet | null {
  if (record === null) return null;
  assert.ok('made' in record, 'a new record keeps what was made, not a response');
  return record.made;
}

async function insert(pets: PetsStore, creations: Parameters<PetsStore['insertMany']>[0]): Promise<Pet[]> {
  return allSucceeded(await pets.insertMany(creations)) as Pet[];
}

/** An outcome as the cases compare it: a pet's name, a conflict, a change's kind, or 'failed'. */
function summary(outcome: ItemOutcome<CreationResult | ChangeOutcome>): string {
  if (isItemFailure(outcome)) return 'failed';
  if ('conflict' in outcome) return outcome.conflict === 'recorded' ? `replays ${made(outcome.record)!.id}` : outcome.conflict;
  if ('kind' in outcome) return outcome.kind;
  return outcome.name;
}

/** Registers every case of the contract as a test. */
export function runStoreContract({ open }: StoreContractOptions): void {
  // Keys -------------------------------------------------------------------------------------

  test('a created key is found by its plain key, by id and in the list, with its plan numbers', async (t) => {
    const { keys } = await open(t);
    const free = await keys.create({ plan: 'free', label: 'shop', now: T0 });
    const enterprise = await keys.create({ plan: 'enterprise', perMinute: 5, perDay: 7, now: T0 });
    assert.ok(isWellFormedApiKey(free.key, 'development'));
    assert.deepEqual(await keys.findByKey(free.key, T0), free.record);
    assert.deepEqual(await keys.get(free.record.id), free.record);
    assert.deepEqual(free.record, {
      id: free.record.id, account: free.record.account, scopes: ['pets:read', 'pets:write', 'orders:write', 'orders:manage', 'events:read', 'webhooks:manage'],
      label: 'shop', plan: 'free', perMinute: 60, perDay: 1000, createdAt: T0, expiresAt: null, revokedAt: null,
    });
    assert.notEqual(free.record.account, enterprise.record.account, 'each key without --account has an account of its own');
    assert.deepEqual([(await keys.findByKey(enterprise.key, T0))?.perMinute, enterprise.record.perDay], [5, 7]);
    assert.deepEqual((await keys.list()).map((record) => record.id), [free.record.id, enterprise.record.id], 'oldest first, same millisecond in creation order');
  });

  test('a key may join an existing account, with the scopes it is given; an unknown account is refused and nothing is stored', async (t) => {
    const { keys } = await open(t);
    const staff = await keys.create({ plan: 'pro', now: T0 });
    const adopter = await keys.create({ plan: 'free', account: staff.record.account, scopes: ['orders:write', 'pets:read'], now: T0 });
    assert.equal(adopter.record.account, staff.record.account);
    assert.deepEqual(adopter.record.scopes, ['pets:read', 'orders:write'], 'in the order of the scopes table');
    assert.deepEqual((await keys.findByKey(adopter.key, T0))?.scopes, ['pets:read', 'orders:write']);
    await assert.rejects(Promise.resolve().then(() => keys.create({ plan: 'free', account: 'acct_nobody', now: T0 })), (error: unknown) =>
      error instanceof UnknownAccountError && error.account === 'acct_nobody');
    assert.equal((await keys.list()).length, 2, 'the refused key was not stored');
  });

  test('a rotation keeps the account and the scopes', async (t) => {
    const { keys } = await open(t);
    const { record } = await keys.create({ plan: 'business', scopes: ['pets:read'], now: T0 });
    const rotated = await keys.rotate(record.id, 60, T0 + 1);
    assert.equal(rotated.outcome, 'rotated');
    if (rotated.outcome !== 'rotated') return;
    assert.equal(rotated.record.account, record.account);
    assert.deepEqual(rotated.record.scopes, ['pets:read']);
    assert.deepEqual((await keys.findByKey(rotated.key, T0 + 1))?.scopes, ['pets:read']);
  });

  test('setScopes replaces a key\'s scopes, seen by the next lookup; an unknown id is null; no scope at all is refused', async (t) => {
    const { keys } = await open(t);
    const { key, record } = await keys.create({ plan: 'free', scopes: ['pets:read', 'orders:manage'], now: T0 });
    assert.deepEqual((await keys.findByKey(key, T0))?.scopes, ['pets:read', 'orders:manage'], 'looked up once before the change');
    const changed = await keys.setScopes(record.id, ['webhooks:manage', 'orders:write', 'pets:read']);
    assert.deepEqual(changed, { ...record, scopes: ['pets:read', 'orders:write', 'webhooks:manage'] }, 'in the order of the scopes table, nothing else changed');
    assert.deepEqual((await keys.findByKey(key, T0))?.scopes, ['pets:read', 'orders:write', 'webhooks:manage']);
    assert.deepEqual((await keys.get(record.id))?.scopes, ['pets:read', 'orders:write', 'webhooks:manage']);
    assert.equal(await keys.setScopes('key_0000000000000000', ['pets:read']), null);
    await assert.rejects(async () => keys.setScopes(record.id, []), RangeError);
    await assert.rejects(async () => keys.setScopes(record.id, ['pets:admin' as Scope]), RangeError);
    assert.deepEqual((await keys.get(record.id))?.scopes, ['pets:read', 'orders:write', 'webhooks:manage'], 'a refused change changes nothing');
  });

  const refusedKeys: [string, (keys: KeysStore, now: number) => Promise<string>][] = [
    ['a made-up key', async () => 'pk_test_' + 'A'.repeat(49)],
    ['a well-formed unknown key', async (keys) => {
      const { key } = await keys.create({ plan: 'free', now: T0 });
      return key.slice(0, 8) + (key[8] === 'A' ? 'B' : 'A') + key.slice(9);
    }],
    ['a revoked key', async (keys, now) => {
      const { key, record } = await keys.create({ plan: 'free', now: T0 });
      assert.equal(await keys.revoke(record.id, now), true);
      return key;
    }],
    ['a key at its expiry instant', async (keys, now) => (await keys.create({ plan: 'pro', now: T0, expiresAt: now })).key],
    ['a production key in development', async () => 'pk_live_' + 'A'.repeat(49)],
  ];
  for (const [name, make] of refusedKeys) {
    test(`findByKey and findByHash refuse ${name}`, async (t) => {
      const { keys } = await open(t);
      const now = T0 + 1000;
      const key = await make(keys, now);
      assert.equal(await keys.findByKey(key, now), null);
      assert.equal(await keys.findByHash(hashApiKey(key), now), null);
    });
  }

  test('findByHash finds a key from the hash of its plain key, as findByKey does', async (t) => {
    const { keys } = await open(t);
    const { key, record } = await keys.create({ plan: 'pro', now: T0 });
    assert.deepEqual(await keys.findByHash(hashApiKey(key), T0), record);
    assert.equal(await keys.findByHash(key, T0), null, 'the plain key is not its hash');
  });

  test('a second revocation keeps the first time; an unknown id is not revoked', async (t) => {
    const { keys } = await open(t);
    const { record } = await keys.create({ plan: 'free', now: T0 });
    assert.equal(await keys.revoke(record.id, T0 + 1), true);
    await keys.revoke(record.id, T0 + 2);
    assert.equal((await keys.get(record.id))?.revokedAt, T0 + 1);
    assert.equal(await keys.revoke('key_0000000000000000', T0), false);
    assert.equal(await keys.get('key_0000000000000000'), null);
  });

  test('rotation issues a key with the same grant and ends the old one after the grace period', async (t) => {
    const { keys } = await open(t);
    const old = await keys.create({ plan: 'enterprise', perMinute: 9, perDay: 99, label: 'billing', now: T0 });
    const result = await keys.rotate(old.record.id, 60, T0 + 1000);
    assert.equal(result.outcome, 'rotated');
    if (result.outcome !== 'rotated') return;
    assert.deepEqual([result.record.plan, result.record.perMinute, result.record.perDay, result.record.label], ['enterprise', 9, 99, 'billing']);
    assert.notEqual(result.record.id, old.record.id);
    assert.equal(result.previous.expiresAt, T0 + 61_000);
    assert.ok(await keys.findByKey(old.key, T0 + 60_999), 'the old key works during the grace period');
    assert.equal(await keys.findByKey(old.key, T0 + 61_000), null);
    assert.ok(await keys.findByKey(result.key, T0 + 61_000));
  });

  const unrotatable: [string, (keys: KeysStore) => Promise<string>, string][] = [
    ['an unknown id', async () => 'key_0000000000000000', 'not_found'],
    ['a revoked key', async (keys) => {
      const { record } = await keys.create({ plan: 'free', now: T0 });
      await keys.revoke(record.id, T0);
      return record.id;
    }, 'revoked'],
    ['an expired key', async (keys) => (await keys.create({ plan: 'free', now: T0, expiresAt: T0 + 10 })).record.id, 'expired'],
  ];
  for (const [name, make, outcome] of unrotatable) {
    test(`rotating ${name} is refused as ${outcome} and creates nothing`, async (t) => {
      const { keys } = await open(t);
      const id = await make(keys);
      const before = (await keys.list()).length;
      assert.equal((await keys.rotate(id, 60, T0 + 100)).outcome, outcome);
      assert.equal((await keys.list()).length, before);
    });
  }

  test('createFirst creates a key only in an empty store, even when asked at once', async (t) => {
    const { keys } = await open(t);
    const input: NewKey = { plan: 'free', label: 'development', now: T0 };
    const results = await Promise.all([keys.createFirst(input), keys.createFirst(input), keys.createFirst(input)]);
    assert.equal(results.filter((issued) => issued !== null).length, 1);
    assert.equal((await keys.list()).length, 1);
  });

  test('programmer errors in a new key throw', async (t) => {
    const { keys } = await open(t);
    await assert.rejects(async () => keys.create({ plan: 'enterprise', now: T0 }), TypeError);
    await assert.rejects(async () => keys.create({ plan: 'free', perMinute: 1, perDay: 1, now: T0 }), TypeError);
    await assert.rejects(async () => keys.create({ plan: 'free', now: T0, expiresAt: T0 }), RangeError);
  });

  // Pets -------------------------------------------------------------------------------------

  test('insertMany stores a batch with ascending ids in order, and get and list read it back', async (t) => {
    const { pets } = await open(t);
    const stored = await insert(pets, [pet('Rex'), pet('Tom', 2n, 'sold'), pet('Kit', INT64_MAX, 'pending')]);
    assert.deepEqual(stored.map((p) => p.name), ['Rex', 'Tom', 'Kit']);
    assert.ok(stored[0]!.id >= 1 && stored[0]!.id < stored[1]!.id && stored[1]!.id < stored[2]!.id);
    assert.deepEqual(await pets.get(BigInt(stored[2]!.id)), stored[2]);
    assert.equal((await pets.get(BigInt(stored[2]!.id)))!.categoryId, INT64_MAX, 'int64 exact');
    assert.equal(await pets.get(INT64_MAX), null);
    assert.equal(await pets.get(-1n), null);
    assert.deepEqual(await pets.list({ afterId: 0n, status: undefined, limit: 10 }), stored);
  });

  test('any name and the largest categoryId come back from list and get exactly as stored', async (t) => {
    // PostgreSQL returns a page as one JSON text that it quotes itself (pets-store.ts).
    const { pets } = await open(t);
    const names = ['"quoted"', 'back\\slash\\', 'tab\tnew\nline\r', '\u0001\u001f\u007f\u0080', '</script>', 'é中文🐶', '\u2028\u2029', '\ufffd\uffff', '{"id":1}', '[1,"a"]', ' ', 'x'.repeat(100)];
    const stored = await insert(pets, names.map((name, i) => pet(name, i % 2 === 0 ? INT64_MAX : BigInt(i + 1), i % 3 === 0 ? 'sold' : 'available')));
    assert.deepEqual(stored.map((p) => p.name), names);
    assert.deepEqual(await pets.list({ afterId: 0n, status: undefined, limit: 100 }), stored);
    assert.deepEqual(await pets.list({ afterId: 0n, status: 'sold', limit: 100 }), stored.filter((p) => p.status === 'sold'));
    for (const expected of stored) assert.deepEqual(await pets.get(BigInt(expected.id)), expected);
  });

  const listings: [string, { after: number; status?: NewPet['status']; limit: number }, string[]][] = [
    ['the first page', { after: 0, limit: 2 }, ['a', 'b']],
    ['a page after a cursor', { after: 2, limit: 2 }, ['c', 'd']],
    ['a short last page', { after: 4, limit: 10 }, ['e']],
    ['past the end', { after: 5, limit: 10 }, []],
    ['a status filter', { after: 0, status: 'sold', limit: 10 }, ['b', 'd']],
    ['a status filter after a cursor', { after: 2, status: 'sold', limit: 1 }, ['d']],
  ];
  for (const [name, { after, status, limit }, expected] of listings) {
    test(`list: ${name}`, async (t) => {
      const { pets } = await open(t);
      const stored = await insert(pets, ['a', 'b', 'c', 'd', 'e'].map((name, i) => pet(name, 1n, i % 2 === 1 ? 'sold' : 'available')));
      const afterId = after === 0 ? 0n : BigInt(stored[after - 1]!.id);
      assert.deepEqual((await pets.list({ afterId, status, limit })).map((p) => p.name), expected);
    });
  }

  test('reads asked at once (one batch on PostgreSQL) each get their own answer', async (t) => {
    const { pets } = await open(t);
    const stored = await insert(pets, ['a', 'b', 'c', 'd'].map((name, i) => pet(name, BigInt(i + 1), i % 2 === 0 ? 'available' : 'sold')));
    const ids = stored.map((p) => BigInt(p.id));
    const [pages, found] = await Promise.all([
      Promise.all([
        pets.list({ afterId: 0n, status: undefined, limit: 2 }),
        pets.list({ afterId: ids[0]!, status: 'sold', limit: 10 }),
        pets.list({ afterId: ids[3]!, status: undefined, limit: 10 }),
        pets.list({ afterId: 0n, status: 'pending', limit: 10 }),
      ]),
      Promise.all([...ids, 999_999n, ids[2]!].map((id) => pets.get(id))),
    ]);
    assert.deepEqual(pages.map((page) => page.map((p) => p.name)), [['a', 'b'], ['b', 'd'], [], []]);
    assert.deepEqual(found.map((p) => p?.name ?? null), ['a', 'b', 'c', 'd', null, 'c']);
  });

  test('changes update and delete, bump the version, and report a missing pet or another version', async (t) => {
    const { pets } = await open(t);
    const [rex, tom] = await insert(pets, [pet('Rex'), pet('Tom', 2n)]);
    assert.equal(rex!.version, 1);
    const rexId = BigInt(rex!.id);
    const tomId = BigInt(tom!.id);
    const outcomes = await pets.changeMany([
      { kind: 'update', id: rexId, patch: { status: 'sold', categoryId: INT64_MAX }, expectedVersion: 1 , now: 0},
      { kind: 'update', id: rexId, patch: { name: 'Rex II' }, expectedVersion: 1 , now: 0},
      { kind: 'update', id: rexId, patch: { name: 'Rex III' }, expectedVersion: null , now: 0},
      { kind: 'delete', id: tomId, expectedVersion: 2 , now: 0},
      { kind: 'delete', id: 999_999n, expectedVersion: null , now: 0},
      { kind: 'update', id: 999_999n, patch: { name: 'x' }, expectedVersion: 1 , now: 0},
    ]);
    assert.deepEqual(outcomes, [
      { kind: 'updated', pet: { id: rex!.id, name: 'Rex', categoryId: INT64_MAX, status: 'sold', version: 2 }, changed: true },
      { kind: 'version_mismatch' },
      { kind: 'updated', pet: { id: rex!.id, name: 'Rex III', categoryId: INT64_MAX, status: 'sold', version: 3 }, changed: true },
      { kind: 'version_mismatch' },
      { kind: 'not_found' },
      { kind: 'not_found' },
    ]);
    assert.deepEqual(await pets.changeMany([{ kind: 'delete', id: tomId, expectedVersion: 1 , now: 0}]), [{ kind: 'deleted' }]);
    assert.equal(await pets.get(tomId), null);
    assert.deepEqual((await pets.list({ afterId: 0n, status: undefined, limit: 10 })).map((p) => p.name), ['Rex III']);
    const [again] = await insert(pets, [pet('Kit')]);
    assert.ok(again!.id > tom!.id, 'a deleted id is never reused');
  });

  // Each creation and change of a batch succeeds or fails on its own (src/lib/item-outcome.ts).

  test('creations with one Idempotency-Key in one batch: the first is made, the others replay it, and the rest of the batch is stored', async (t) => {
    const { pets } = await open(t);
    const outcomes = await pets.insertMany([
      { ...pet('Rex'), idempotency: remembering('key_a', 'k1') },
      pet('Tom'),
      { ...pet('Rex'), idempotency: remembering('key_a', 'k1') },
      { ...pet('Kit'), idempotency: remembering('key_a', 'k2') },
      { ...pet('Rex'), idempotency: remembering('key_a', 'k1', T0 + 1) },
    ]);
    const stored = await pets.list({ afterId: 0n, status: undefined, limit: 10 });
    assert.deepEqual(stored.map((p) => p.name), ['Rex', 'Tom', 'Kit'], 'one Rex');
    const rex = stored[0]!;
    assert.deepEqual(outcomes.map(summary), ['Rex', 'Tom', `replays ${rex.id}`, 'Kit', `replays ${rex.id}`]);
    assert.deepEqual(outcomes[2], { conflict: 'recorded', record: { fingerprint: 'fp-k1', createdAt: T0, made: rex } });
    assert.deepEqual(made(await pets.findIdempotencyRecord('key_a', 'k1', T0)), rex);
  });

  test('a creation whose statement fails is refused alone; conflicts are answered, and the rest of its batch is stored with its records', async (t) => {
    const { pets } = await open(t);
    const [earlier] = await insert(pets, [{ ...pet('Earlier'), idempotency: remembering('key_a', 'k0') }]);
    const outcomes = await pets.insertMany([
      { ...pet('Earlier'), idempotency: remembering('key_a', 'k0', T0 + 1) },
      { ...pet('Good'), idempotency: remembering('key_a', 'k1') },
      { ...pet('Bad', 0n), idempotency: remembering('key_a', 'k2') }, // violates the CHECK
      pet('Plain'),
      { ...pet('Good'), idempotency: remembering('key_a', 'k1') },
      // Its pet is inserted, then its record fails the CHECK (a key of 256 characters): the pet goes with it.
      { ...pet('Unrecorded'), idempotency: remembering('key_a', 'k'.repeat(256)) },
    ]);
    const stored = await pets.list({ afterId: 0n, status: undefined, limit: 10 });
    assert.deepEqual(stored.map((p) => p.name), ['Earlier', 'Good', 'Plain']);
    const good = stored[1]!;
    assert.deepEqual(outcomes.map(summary), [`replays ${earlier!.id}`, 'Good', 'failed', 'Plain', `replays ${good.id}`, 'failed']);
    assert.deepEqual(made(await pets.findIdempotencyRecord('key_a', 'k1', T0)), good);
    assert.equal(await pets.findIdempotencyRecord('key_a', 'k2', T0), null, 'the failed creation left no record');
    const [retried] = await insert(pets, [{ ...pet('Bad, fixed'), idempotency: remembering('key_a', 'k2') }]);
    assert.equal(retried!.name, 'Bad, fixed', 'its key is free for a retry');

    const plain = await pets.insertMany([pet('One'), pet('Two', 0n), pet('Three')]);
    assert.deepEqual(plain.map(summary), ['One', 'failed', 'Three'], 'a batch without keys too');
    assert.deepEqual((await pets.list({ afterId: BigInt(retried!.id), status: undefined, limit: 10 })).map((p) => p.name), ['One', 'Three']);
  });

  test('a change whose statement fails is refused alone; the other changes of its batch, conflicts included, are applied', async (t) => {
    const { pets } = await open(t);
    const [rex, tom, kit] = await insert(pets, [pet('Rex'), pet('Tom'), pet('Kit')]);
    const [rexId, tomId, kitId] = [BigInt(rex!.id), BigInt(tom!.id), BigInt(kit!.id)];
    const outcomes = await pets.changeMany([
      { kind: 'update', id: rexId, patch: { name: 'Rex II' }, expectedVersion: 1 , now: 0},
      { kind: 'update', id: tomId, patch: { name: 'Tom II', categoryId: 0n }, expectedVersion: null , now: 0}, // violates the CHECK
      { kind: 'update', id: rexId, patch: { name: 'Rex III' }, expectedVersion: 1 , now: 0},
      { kind: 'delete', id: kitId, expectedVersion: null , now: 0},
      { kind: 'update', id: 999_999n, patch: { name: 'x' }, expectedVersion: null , now: 0},
      { kind: 'update', id: tomId, patch: { status: 'sold' }, expectedVersion: 1 , now: 0},
    ]);
    assert.deepEqual(outcomes.map(summary), ['updated', 'failed', 'version_mismatch', 'deleted', 'not_found', 'updated']);
    assert.deepEqual(await pets.list({ afterId: 0n, status: undefined, limit: 10 }), [
      { ...rex!, name: 'Rex II', version: 2 },
      { ...tom!, status: 'sold', version: 2 },
    ]);
  });

  test('a pet put beyond 2^53 by hand is refused when read, by id or in a page, never rounded onto another id', async (t) => {
    const { pets, putPet } = await open(t);
    const [below] = await insert(pets, [pet('Below')]);
    const beyond = 2n ** 53n + 1n;
    await putPet(beyond);
    await assert.rejects(async () => pets.get(beyond), RangeError);
    await assert.rejects(async () => pets.list({ afterId: 0n, status: undefined, limit: 10 }), RangeError);
    assert.deepEqual(await pets.list({ afterId: 0n, status: undefined, limit: 1 }), [below], 'a page that stops before it is served');
  });

  test('a failure of the database itself fails the whole batch: the store throws and nothing is written', async (t) => {
    const { pets, fillDisk } = await open(t);
    await fillDisk();
    // Its pet is inserted, then its record needs more room than the disk has.
    const doomed: IdempotencyWrite = { ...remembering('key_a', 'k2'), fingerprint: 'f'.repeat(LARGE) };
    await assert.rejects(async () => pets.insertMany([
      { ...pet('Good'), idempotency: remembering('key_a', 'k1') },
      pet('Plain'),
      { ...pet('Doomed'), idempotency: doomed },
    ]));
    assert.deepEqual(await pets.list({ afterId: 0n, status: undefined, limit: 10 }), []);
    assert.equal(await pets.findIdempotencyRecord('key_a', 'k1', T0), null);
  });

  test('a create remembers the pet it made under its key for 24 h, scoped by API key', async (t) => {
    const { pets } = await open(t);
    const [stored] = await insert(pets, [{ ...pet('Rex', INT64_MAX), idempotency: remembering('key_a', 'k1') }]);
    const record = await pets.findIdempotencyRecord('key_a', 'k1', T0 + IDEMPOTENCY_TTL_MS - 1);
    assert.deepEqual(record, { fingerprint: 'fp-k1', createdAt: T0, made: stored }, 'the pet as made, its int64 exact');
    assert.equal(await pets.findIdempotencyRecord('key_a', 'k1', T0 + IDEMPOTENCY_TTL_MS), null, 'expired at 24 h');
    assert.equal(await pets.findIdempotencyRecord('key_b', 'k1', T0), null, 'another API key has its own keys');
  });

  test('a create whose key another writer stored meanwhile is reported as recorded, creates nothing, and the rest of the batch is stored', async (t) => {
    // Another instance or worker thread committed the key between this caller's lookup and its
    // batch: the batch's own transaction must see it.
    const { pets } = await open(t);
    const [first] = await insert(pets, [{ ...pet('Rex'), idempotency: remembering('key_a', 'k1') }]);
    const results = await pets.insertMany([
      { ...pet('Rex again'), idempotency: remembering('key_a', 'k1', T0 + 1) },
      pet('Tom'),
    ]);
    assert.deepEqual(results[0], {
      conflict: 'recorded',
      record: { fingerprint: 'fp-k1', createdAt: T0, made: first },
    });
    assert.equal((results[1] as Pet).name, 'Tom');
    assert.deepEqual((await pets.list({ afterId: 0n, status: undefined, limit: 10 })).map((p) => p.name), ['Rex', 'Tom'], 'no second Rex');
  });

  test('an expired record not yet purged is replaced by a new create with its key', async (t) => {
    const { pets } = await open(t);
    await insert(pets, [{ ...pet('Rex'), idempotency: remembering('key_a', 'k1') }]);
    const later = T0 + IDEMPOTENCY_TTL_MS;
    const [again] = await insert(pets, [{ ...pet('Tom'), idempotency: remembering('key_a', 'k1', later) }]);
    assert.deepEqual(made(await pets.findIdempotencyRecord('key_a', 'k1', later)), again);
  });

  test('the purge deletes expired records only, oldest first, at most the limit', async (t) => {
    const { pets } = await open(t);
    await insert(pets, [0, 1, 2].map((i) => ({ ...pet(`p${i}`), idempotency: remembering('key_a', `k${i}`, T0 + i) })));
    await insert(pets, [{ ...pet('fresh'), idempotency: remembering('key_a', 'fresh', T0 + IDEMPOTENCY_TTL_MS) }]);
    const now = T0 + IDEMPOTENCY_TTL_MS + 10;
    assert.equal(await pets.purgeIdempotencyRecords(now, 2), 2);
    assert.equal(await pets.purgeIdempotencyRecords(now, 2), 1);
    assert.equal(await pets.purgeIdempotencyRecords(now, 2), 0);
    assert.ok(await pets.findIdempotencyRecord('key_a', 'fresh', now));
  });
}
