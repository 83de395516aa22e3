/**
 * The orders part of the storage contract: what every engine behind src/storage/orders.ts must
 * do, run by each engine's test file beside the keys and pets cases. Placing an order and each
 * step of one move its pet in the same transaction; these cases read both back after every write.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allSucceeded, isItemFailure, type ItemOutcome } from '../../src/lib/item-outcome.ts';
import type { IdempotencyWrite } from '../../src/storage/idempotency.ts';
import { IDEMPOTENCY_TTL_MS } from '../../src/storage/idempotency.ts';
import type { Inventory, Order, OrderChange, OrderChangeOutcome, OrderPlacement, OrdersStore, PlacementResult } from '../../src/storage/orders.ts';
import type { KeysStore } from '../../src/storage/keys.ts';
import type { NewPet, Pet, PetsStore } from '../../src/storage/pets.ts';

export interface OpenedOrderStores {
  keys: KeysStore;
  pets: PetsStore;
  orders: OrdersStore;
  /** Brings the inventory's stored counts up to date, where the engine defers that (a chore); the answer must not change. */
  settle(): Promise<void>;
}

export interface OrdersContractOptions {
  /** Fresh, empty stores for one test; closed by the engine when the test ends. */
  open(t: { after(fn: () => unknown): void }): Promise<OpenedOrderStores>;
}

const T0 = Date.UTC(2026, 0, 1);

const newPet = (name: string, status: NewPet['status'] = 'available'): NewPet => ({ name, categoryId: 1n, status });

async function insert(pets: PetsStore, ...statuses: NewPet['status'][]): Promise<Pet[]> {
  return allSucceeded(await pets.insertMany(statuses.map((status, i) => newPet(`pet${i}`, status)))) as Pet[];
}

function remembering(apiKeyId: string, key: string, createdAt = T0): IdempotencyWrite<Order> {
  return {
    apiKeyId, key, fingerprint: `fp-${key}`, createdAt,
    respond: (order: Order) => ({ status: 201, headers: { Location: `/v1/store/orders/${order.id}` }, body: `{"id":${order.id}}` }),
  };
}

/** `count` accounts, each made by creating a key (an order belongs to an account that exists). */
async function accounts(keys: KeysStore, count: number): Promise<string[]> {
  const made: string[] = [];
  for (let i = 0; i < count; i++) made.push((await keys.create({ plan: 'free', now: T0 })).record.account);
  return made;
}

const placement = (petId: number | bigint, account: string, extra: Partial<OrderPlacement> = {}): OrderPlacement =>
  ({ petId: BigInt(petId), account, now: T0, ...extra });

const change = (id: number, to: Order['status'], extra: Partial<OrderChange> = {}): OrderChange =>
  ({ id: BigInt(id), to, expectedVersion: null, manage: true, account: null, now: T0 + 1000, ...extra });

/** An outcome as the cases compare it: a result's kind, a conflict, or 'failed'. */
function summary(outcome: ItemOutcome<PlacementResult | OrderChangeOutcome>): string {
  if (isItemFailure(outcome)) return 'failed';
  if ('conflict' in outcome) return outcome.conflict;
  return outcome.kind;
}

async function placed(orders: OrdersStore, placements: OrderPlacement[]): Promise<Order[]> {
  return (allSucceeded(await orders.placeMany(placements)) as PlacementResult[]).map((result) => {
    assert.ok('kind' in result && result.kind === 'placed', summary(result));
    return result.order;
  });
}

/** Registers every orders case as a test. */
export function runOrdersContract({ open }: OrdersContractOptions): void {
  test('placing an order stores it as placed and takes its pet from available to pending, a new version, in one write', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [rex] = await insert(pets, 'available');
    const [result] = allSucceeded(await orders.placeMany([placement(rex!.id, A!)])) as PlacementResult[];
    const order = { id: 1, petId: BigInt(rex!.id), account: A!, status: 'placed', placedAt: T0, updatedAt: T0, version: 1 };
    assert.deepEqual(result, { kind: 'placed', order, pet: { ...rex!, status: 'pending', version: 2 } });
    assert.deepEqual(await orders.get(1n), order);
    assert.deepEqual(await pets.get(BigInt(rex!.id)), { ...rex!, status: 'pending', version: 2 });
    assert.equal(await orders.get(2n), null);
  });

  test('an order for no pet or a pet that is not available is refused and writes nothing; within one batch, one pet goes to the first', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [free, pending, sold, other] = await insert(pets, 'available', 'pending', 'sold', 'available');
    const outcomes = await orders.placeMany([
      placement(999_999, A!), placement(pending!.id, A!), placement(sold!.id, A!), placement(free!.id, A!), placement(free!.id, B!), placement(other!.id, B!),
    ]);
    assert.deepEqual(outcomes.map(summary), ['pet_not_found', 'pet_not_available', 'pet_not_available', 'placed', 'pet_not_available', 'placed']);
    assert.deepEqual(outcomes.slice(1, 3), [{ kind: 'pet_not_available', status: 'pending' }, { kind: 'pet_not_available', status: 'sold' }]);
    assert.deepEqual((await orders.list({ afterId: 0n, status: undefined, account: null, limit: 10 })).map((o) => [o.petId, o.account]), [
      [BigInt(free!.id), A!], [BigInt(other!.id), B!],
    ]);
    assert.deepEqual((await pets.get(BigInt(pending!.id)))?.version, 1, 'a refused placement leaves the pet as it was');
  });

  test('of concurrent batches placing orders for one pet exactly one places it', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [rex] = await insert(pets, 'available');
    const every = await accounts(keys, 8);
    const outcomes = await Promise.all(Array.from({ length: 8 }, (_, i) => orders.placeMany([placement(rex!.id, every[i]!)])));
    assert.deepEqual(outcomes.map(([outcome]) => summary(outcome!)).sort(), ['pet_not_available', 'pet_not_available', 'pet_not_available', 'pet_not_available', 'pet_not_available', 'pet_not_available', 'pet_not_available', 'placed']);
    assert.equal((await orders.list({ afterId: 0n, status: undefined, account: null, limit: 10 })).length, 1);
  });

  test('a placement remembers its response under its key for 24 h, per API key and apart from createPet\'s keys; a retry is a recorded conflict', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [rex, tom] = await insert(pets, 'available', 'available');
    const [order] = await placed(orders, [placement(rex!.id, A!, { idempotency: remembering('key_a', 'k1') })]);
    const record = { fingerprint: 'fp-k1', createdAt: T0, response: { status: 201, headers: { Location: `/v1/store/orders/${order!.id}` }, body: `{"id":${order!.id}}` } };
    assert.deepEqual(await orders.findIdempotencyRecord('key_a', 'k1', T0 + IDEMPOTENCY_TTL_MS - 1), record);
    assert.equal(await orders.findIdempotencyRecord('key_a', 'k1', T0 + IDEMPOTENCY_TTL_MS), null, 'expired at 24 h');
    assert.equal(await orders.findIdempotencyRecord('key_b', 'k1', T0), null);
    assert.equal(await pets.findIdempotencyRecord('key_a', 'k1', T0), null, 'createPet has keys of its own');
    const [again] = await orders.placeMany([placement(tom!.id, A!, { idempotency: remembering('key_a', 'k1', T0 + 5) })]);
    assert.deepEqual(again, { conflict: 'recorded', record });
    assert.equal((await pets.get(BigInt(tom!.id)))?.status, 'available', 'the retry took no pet');
    // The same key on createPet names another request.
    const created = await pets.insertMany([{ ...newPet('Kit'), idempotency: { ...remembering('key_a', 'k1'), respond: () => ({ status: 201, headers: {}, body: '{}' }) } }]);
    assert.equal((created[0] as Pet).name, 'Kit', 'stored, not a conflict');
    // Expired records go with the purge, whichever operation wrote them.
    assert.equal(await pets.purgeIdempotencyRecords(T0 + IDEMPOTENCY_TTL_MS + 1, 10), 2);
  });

  test('the steps of an order: the transitions of the table, each moving its pet in the same write; versions and times advance', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [kept, freed, sold] = await insert(pets, 'available', 'available', 'available');
    await placed(orders, [placement(kept!.id, A!), placement(freed!.id, A!), placement(sold!.id, A!)]);
    const outcomes = await orders.changeMany([change(1, 'approved'), change(2, 'cancelled', { manage: false, account: A! }), change(3, 'approved')]);
    assert.deepEqual(outcomes.map(summary), ['changed', 'changed', 'changed']);
    assert.deepEqual(outcomes[0], { kind: 'changed', order: { id: 1, petId: BigInt(kept!.id), account: A!, status: 'approved', placedAt: T0, updatedAt: T0 + 1000, version: 2 }, pet: null });
    assert.deepEqual((outcomes[1] as { pet: Pet }).pet, { ...freed!, status: 'available', version: 3 });
    const [completed] = await orders.changeMany([change(3, 'completed')]);
    assert.deepEqual((completed as { order: Order; pet: Pet }).pet, { ...sold!, status: 'sold', version: 3 });
    assert.equal((completed as { order: Order }).order.version, 3);
    assert.deepEqual(await Promise.all([kept, freed, sold].map(async (p) => (await pets.get(BigInt(p!.id)))?.status)), ['pending', 'available', 'sold']);
    assert.deepEqual((await orders.list({ afterId: 0n, status: undefined, account: null, limit: 10 })).map((o) => [o.status, o.version]), [
      ['approved', 2], ['cancelled', 2], ['completed', 3],
    ]);
  });

  test('a step not allowed is refused and changes nothing: unknown, another account\'s, a stale version, no such transition, reserved to orders:manage', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [rex] = await insert(pets, 'available');
    await placed(orders, [placement(rex!.id, A!)]);
    const outcomes = await orders.changeMany([
      change(99, 'cancelled'),
      change(1, 'cancelled', { manage: false, account: B! }),
      change(1, 'cancelled', { expectedVersion: 2 }),
      change(1, 'completed'),
      change(1, 'approved', { manage: false, account: A! }),
      change(1, 'placed', { expectedVersion: 1 }),
    ]);
    assert.deepEqual(outcomes.map(summary), ['not_found', 'not_found', 'version_mismatch', 'invalid_transition', 'forbidden', 'unchanged']);
    assert.deepEqual(outcomes[3], { kind: 'invalid_transition', from: 'placed' });
    assert.deepEqual([(await orders.get(1n))?.version, (await pets.get(BigInt(rex!.id)))?.status], [1, 'pending']);
    await orders.changeMany([change(1, 'cancelled')]);
    assert.deepEqual((await orders.changeMany([change(1, 'approved'), change(1, 'placed')])).map(summary), ['invalid_transition', 'invalid_transition']);
  });

  test('steps of one order in one batch apply in turn: the second sees the first; concurrent steps without a version: exactly one wins', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [a, b] = await insert(pets, 'available', 'available');
    await placed(orders, [placement(a!.id, A!), placement(b!.id, A!)]);
    assert.deepEqual((await orders.changeMany([change(1, 'approved'), change(1, 'completed'), change(1, 'cancelled')])).map(summary), ['changed', 'changed', 'invalid_transition']);
    await orders.changeMany([change(2, 'approved')]);
    const raced = await Promise.all([orders.changeMany([change(2, 'completed')]), orders.changeMany([change(2, 'cancelled')])]);
    assert.deepEqual(raced.map(([outcome]) => summary(outcome!)).sort(), ['changed', 'invalid_transition']);
    const winner = (await orders.get(2n))!.status;
    assert.equal((await pets.get(BigInt(b!.id)))?.status, winner === 'completed' ? 'sold' : 'available');
  });

  test('a pet an open order holds keeps its status and its row; its name and category may change; once closed it is free', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [rex, tom] = await insert(pets, 'available', 'available');
    const rexId = BigInt(rex!.id);
    await placed(orders, [placement(rexId, A!)]);
    const outcomes = await pets.changeMany([
      { kind: 'update', id: rexId, patch: { status: 'available' }, expectedVersion: null },
      { kind: 'update', id: rexId, patch: { status: 'pending' }, expectedVersion: null },
      { kind: 'delete', id: rexId, expectedVersion: null },
      { kind: 'update', id: rexId, patch: { name: 'Rexie', categoryId: 3n }, expectedVersion: 2 },
      { kind: 'update', id: rexId, patch: { status: 'sold' }, expectedVersion: 1 },
      { kind: 'delete', id: BigInt(tom!.id), expectedVersion: null },
    ]);
    assert.deepEqual(outcomes.map((outcome) => (isItemFailure(outcome) ? 'failed' : outcome.kind)), [
      'has_open_order', 'has_open_order', 'has_open_order', 'updated', 'version_mismatch', 'deleted',
    ]);
    assert.deepEqual(await pets.get(rexId), { ...rex!, name: 'Rexie', categoryId: 3n, status: 'pending', version: 3 });
    await orders.changeMany([change(1, 'cancelled')]);
    assert.deepEqual((await pets.changeMany([{ kind: 'update', id: rexId, patch: { status: 'sold' }, expectedVersion: null }])).map((o) => (o as { kind: string }).kind), ['updated']);
    assert.deepEqual((await pets.changeMany([{ kind: 'delete', id: rexId, expectedVersion: null }])).map((o) => (o as { kind: string }).kind), ['deleted']);
    assert.deepEqual((await orders.get(1n))?.status, 'cancelled', 'orders outlive their pet');
  });

  test('listing orders: by id after the cursor, up to the limit, filtered by status and account, each combination', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const ids = await insert(pets, 'available', 'available', 'available', 'available', 'available');
    await placed(orders, ids.map((p, i) => placement(p.id, i % 2 === 0 ? A! : B!)));
    await orders.changeMany([change(2, 'cancelled'), change(3, 'cancelled')]);
    const list = async (options: { afterId?: bigint; status?: Order['status']; account?: string | null; limit?: number }) =>
      (await orders.list({ afterId: 0n, status: undefined, account: null, limit: 10, ...options })).map((order) => order.id);
    assert.deepEqual(await list({}), [1, 2, 3, 4, 5]);
    assert.deepEqual(await list({ afterId: 2n, limit: 2 }), [3, 4]);
    assert.deepEqual(await list({ status: 'cancelled' }), [2, 3]);
    assert.deepEqual(await list({ account: A! }), [1, 3, 5]);
    assert.deepEqual(await list({ account: A!, status: 'placed' }), [1, 5]);
    assert.deepEqual(await list({ account: B!, status: 'placed', afterId: 3n }), [4]);
    assert.deepEqual(await list({ account: 'acct_nobody' }), []);
  });

  test('the inventory counts pets by status exactly after inserts, changes, deletions, placements and steps, before and after it settles', async (t) => {
    const { keys, pets, orders, settle } = await open(t);
    const [A] = await accounts(keys, 1);
    const counted = async (expected: Inventory) => {
      assert.deepEqual(await orders.inventory(), expected);
      await settle();
      assert.deepEqual(await orders.inventory(), expected, 'the same once settled');
    };
    await counted({ available: 0, pending: 0, sold: 0 });
    const [a, b, c] = await insert(pets, 'available', 'available', 'sold', 'pending');
    await counted({ available: 2, pending: 1, sold: 1 });
    await placed(orders, [placement(a!.id, A!)]);
    await counted({ available: 1, pending: 2, sold: 1 });
    await orders.changeMany([change(1, 'approved'), change(1, 'completed')]);
    await pets.changeMany([
      { kind: 'update', id: BigInt(b!.id), patch: { status: 'pending' }, expectedVersion: null },
      { kind: 'update', id: BigInt(b!.id), patch: { name: 'renamed' }, expectedVersion: null },
      { kind: 'delete', id: BigInt(c!.id), expectedVersion: null },
    ]);
    await counted({ available: 0, pending: 2, sold: 1 });
    // A batch with a refused item counts only what was written.
    await pets.insertMany([newPet('ok'), { ...newPet('bad'), categoryId: 0n }]);
    await counted({ available: 1, pending: 2, sold: 1 });
  });
}
