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
/** The hold of the cases' placements: an hour. */
const HOLD = 3_600_000;

const newPet = (name: string, status: NewPet['status'] = 'available'): NewPet => ({ name, categoryId: 1n, status });

async function insert(pets: PetsStore, ...statuses: NewPet['status'][]): Promise<Pet[]> {
  return allSucceeded(await pets.insertMany(statuses.map((status, i) => newPet(`pet${i}`, status)))) as Pet[];
}

function remembering(apiKeyId: string, key: string, createdAt = T0): IdempotencyWrite {
  return { apiKeyId, key, fingerprint: `fp-${key}`, createdAt };
}

/** `count` accounts, each made by creating a key (an order belongs to an account that exists). */
async function accounts(keys: KeysStore, count: number): Promise<string[]> {
  const made: string[] = [];
  for (let i = 0; i < count; i++) made.push((await keys.create({ plan: 'free', now: T0 })).record.account);
  return made;
}

const placement = (petId: number | bigint, account: string, extra: Partial<OrderPlacement> = {}): OrderPlacement =>
  ({ petId: BigInt(petId), account, now: T0, expiresAt: T0 + HOLD, maxOpen: null, ...extra });

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
/** An outcome with the number of orders it expired in place of the expiries themselves. */
function counted(outcome: object): object {
  const { expired } = outcome as { expired?: readonly unknown[] };
  return expired === undefined ? outcome : { ...outcome, expired: expired.length };
}

export function runOrdersContract({ open }: OrdersContractOptions): void {
  test('placing an order stores it as placed and takes its pet from available to pending, a new version, in one write', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [rex] = await insert(pets, 'available');
    const [result] = allSucceeded(await orders.placeMany([placement(rex!.id, A!)])) as PlacementResult[];
    const order = { id: 1, petId: BigInt(rex!.id), account: A!, status: 'placed', placedAt: T0, updatedAt: T0, expiresAt: T0 + HOLD, version: 1 };
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

  test('a placement remembers the order it made under its key for 24 h, per API key and apart from createPet\'s keys; a retry is a recorded conflict', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [rex, tom] = await insert(pets, 'available', 'available');
    const [order] = await placed(orders, [placement(rex!.id, A!, { idempotency: remembering('key_a', 'k1') })]);
    const record = { fingerprint: 'fp-k1', createdAt: T0, made: order };
    assert.deepEqual(await orders.findIdempotencyRecord('key_a', 'k1', T0 + IDEMPOTENCY_TTL_MS - 1), record);
    assert.equal(await orders.findIdempotencyRecord('key_a', 'k1', T0 + IDEMPOTENCY_TTL_MS), null, 'expired at 24 h');
    assert.equal(await orders.findIdempotencyRecord('key_b', 'k1', T0), null);
    assert.equal(await pets.findIdempotencyRecord('key_a', 'k1', T0), null, 'createPet has keys of its own');
    const [again] = await orders.placeMany([placement(tom!.id, A!, { idempotency: remembering('key_a', 'k1', T0 + 5) })]);
    assert.deepEqual(again, { conflict: 'recorded', record });
    assert.equal((await pets.get(BigInt(tom!.id)))?.status, 'available', 'the retry took no pet');
    // The same key on createPet names another request.
    const created = await pets.insertMany([{ ...newPet('Kit'), idempotency: remembering('key_a', 'k1') }]);
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
    assert.deepEqual(outcomes[0], { kind: 'changed', order: { id: 1, petId: BigInt(kept!.id), account: A!, status: 'approved', placedAt: T0, updatedAt: T0 + 1000, expiresAt: null, version: 2 }, pet: null });
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
      { kind: 'update', id: rexId, patch: { status: 'available' }, expectedVersion: null , now: 0},
      { kind: 'update', id: rexId, patch: { status: 'pending' }, expectedVersion: null , now: 0},
      { kind: 'delete', id: rexId, expectedVersion: null , now: 0},
      { kind: 'update', id: rexId, patch: { name: 'Rexie', categoryId: 3n }, expectedVersion: 2 , now: 0},
      { kind: 'update', id: rexId, patch: { status: 'sold' }, expectedVersion: 1 , now: 0},
      { kind: 'delete', id: BigInt(tom!.id), expectedVersion: null , now: 0},
    ]);
    assert.deepEqual(outcomes.map((outcome) => (isItemFailure(outcome) ? 'failed' : outcome.kind)), [
      'has_open_order', 'has_open_order', 'has_open_order', 'updated', 'version_mismatch', 'deleted',
    ]);
    assert.deepEqual(await pets.get(rexId), { ...rex!, name: 'Rexie', categoryId: 3n, status: 'pending', version: 3 });
    await orders.changeMany([change(1, 'cancelled')]);
    assert.deepEqual((await pets.changeMany([{ kind: 'update', id: rexId, patch: { status: 'sold' }, expectedVersion: null , now: 0}])).map((o) => (o as { kind: string }).kind), ['updated']);
    assert.deepEqual((await pets.changeMany([{ kind: 'delete', id: rexId, expectedVersion: null , now: 0}])).map((o) => (o as { kind: string }).kind), ['deleted']);
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
      { kind: 'update', id: BigInt(b!.id), patch: { status: 'pending' }, expectedVersion: null , now: 0},
      { kind: 'update', id: BigInt(b!.id), patch: { name: 'renamed' }, expectedVersion: null , now: 0},
      { kind: 'delete', id: BigInt(c!.id), expectedVersion: null , now: 0},
    ]);
    await counted({ available: 0, pending: 2, sold: 1 });
    // A batch with a refused item counts only what was written.
    await pets.insertMany([newPet('ok'), { ...newPet('bad'), categoryId: 0n }]);
    await counted({ available: 1, pending: 2, sold: 1 });
  });
  // Holds that expire ------------------------------------------------------------------------

  test('a hold ends at expiresAt to the millisecond: a write 1 ms before sees it placed, a write at expiresAt cancels it as at expiresAt and frees the pet', async (t) => {
    const { keys, pets, orders, settle } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [rex] = await insert(pets, 'available');
    const [order] = await placed(orders, [placement(rex!.id, A!)]);
    const end = order!.expiresAt!;
    // 1 ms before: the pet is still held, by nobody's expiry.
    const [early] = await orders.placeMany([placement(rex!.id, B!, { now: end - 1, expiresAt: end - 1 + HOLD })]);
    assert.deepEqual(early, { kind: 'pet_not_available', status: 'pending' });
    assert.equal(await orders.expireDue(end - 1, 10), 0, 'the sweep finds nothing due 1 ms before');
    assert.equal((await orders.get(1n))?.status, 'placed');
    // At expiresAt, the sweep cancels it, with updatedAt its old expiresAt, and frees the pet.
    assert.equal(await orders.expireDue(end + 5_000, 10), 1, 'however late the sweep runs');
    assert.deepEqual(await orders.get(1n), { ...order!, status: 'cancelled', updatedAt: end, expiresAt: null, version: 2 });
    assert.deepEqual(await pets.get(BigInt(rex!.id)), { ...rex!, status: 'available', version: 3 });
    assert.equal(await orders.expireDue(end + 6_000, 10), 0, 'an order expires once');
    await settle();
    assert.deepEqual(await orders.inventory(), { available: 1, pending: 0, sold: 0 });
  });

  test('a placement at expiresAt for the pet of an ended hold is placed at once, the old order cancelled in the same write', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [rex] = await insert(pets, 'available');
    const [first] = await placed(orders, [placement(rex!.id, A!)]);
    const end = first!.expiresAt!;
    const [result] = allSucceeded(await orders.placeMany([placement(rex!.id, B!, { now: end, expiresAt: end + HOLD })])) as PlacementResult[];
    assert.equal(summary(result!), 'placed');
    assert.equal(result!.expired?.length, 1, 'the placement says it expired one order');
    assert.deepEqual((result as { pet: Pet }).pet, { ...rex!, status: 'pending', version: 4 }, 'freed (3), then taken again (4)');
    assert.deepEqual(await orders.get(1n), { ...first!, status: 'cancelled', updatedAt: end, expiresAt: null, version: 2 });
    assert.deepEqual(await orders.get(2n), { id: 2, petId: BigInt(rex!.id), account: B!, status: 'placed', placedAt: end, updatedAt: end, expiresAt: end + HOLD, version: 1 });
  });

  test('a step at or after expiresAt finds the order cancelled: the same status is unchanged, any other is an invalid transition; an approved order never expires', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A] = await accounts(keys, 1);
    const [a, b, c] = await insert(pets, 'available', 'available', 'available');
    const [first, , third] = await placed(orders, [placement(a!.id, A!), placement(b!.id, A!), placement(c!.id, A!)]);
    const end = first!.expiresAt!;
    const outcomes = await orders.changeMany([
      change(1, 'approved', { now: end }),
      change(2, 'cancelled', { now: end + 1, manage: false, account: A! }),
      change(3, 'approved', { now: end - 1 }),
    ]);
    assert.deepEqual(outcomes.map(summary), ['invalid_transition', 'unchanged', 'changed']);
    assert.deepEqual(counted(outcomes[0]!), { kind: 'invalid_transition', from: 'cancelled', expired: 1 });
    assert.deepEqual(counted(outcomes[1]!), { kind: 'unchanged', order: { ...(await orders.get(2n))!, status: 'cancelled', updatedAt: end, expiresAt: null, version: 2 }, expired: 1 });
    assert.deepEqual([(await pets.get(BigInt(a!.id)))?.status, (await pets.get(BigInt(b!.id)))?.status], ['available', 'available']);
    assert.equal(await orders.expireDue(end + HOLD * 10, 10), 0, 'approved 1 ms before its end, it holds its pet for good');
    assert.deepEqual(await orders.get(3n), { ...third!, status: 'approved', updatedAt: end - 1, expiresAt: null, version: 2 });
    assert.equal((await pets.get(BigInt(c!.id)))?.status, 'pending');
  });

  test('a change or a deletion of a pet at expiresAt of the hold on it is made, the order expired first in the same write', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A] = await accounts(keys, 1);
    const [rex, tom] = await insert(pets, 'available', 'available');
    const [order] = await placed(orders, [placement(rex!.id, A!), placement(tom!.id, A!)]);
    const end = order!.expiresAt!;
    const before = await pets.changeMany([{ kind: 'update', id: BigInt(rex!.id), patch: { status: 'sold' }, expectedVersion: null, now: end - 1 }]);
    assert.deepEqual(before, [{ kind: 'has_open_order' }]);
    const outcomes = await pets.changeMany([
      { kind: 'update', id: BigInt(rex!.id), patch: { status: 'sold' }, expectedVersion: 3, now: end },
      { kind: 'delete', id: BigInt(tom!.id), expectedVersion: null, now: end },
    ]);
    assert.deepEqual(outcomes.map(counted), [{ kind: 'updated', pet: { ...rex!, status: 'sold', version: 4 }, changed: true, expired: 1 }, { kind: 'deleted', expired: 1 }]);
    assert.deepEqual((await orders.list({ afterId: 0n, status: undefined, account: null, limit: 10 })).map((o) => [o.status, o.updatedAt, o.expiresAt]), [
      ['cancelled', end, null], ['cancelled', end, null],
    ]);
  });

  test('of an approval and the expiry racing at expiresAt exactly one wins, and the pet agrees with the order', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A] = await accounts(keys, 1);
    const many = await insert(pets, ...Array.from({ length: 6 }, () => 'available' as const));
    const placedOrders = await placed(orders, many.map((pet) => placement(pet.id, A!)));
    const end = placedOrders[0]!.expiresAt!;
    // Each approval was asked 1 ms before the end (it may win); the sweep runs at the end.
    const [approvals, swept] = await Promise.all([
      Promise.all(placedOrders.map((order) => orders.changeMany([change(order.id, 'approved', { now: end - 1 })]))),
      orders.expireDue(end, 100),
    ]);
    const won = approvals.filter(([outcome]) => summary(outcome!) === 'changed').length;
    assert.equal(won + swept, 6, `${won} approvals and ${swept} expiries: each order went one way`);
    for (const order of placedOrders) {
      const [now, pet] = [await orders.get(BigInt(order.id)), await pets.get(order.petId)];
      assert.equal(pet?.status, now?.status === 'approved' ? 'pending' : 'available', `order ${order.id} is ${now?.status}`);
      assert.ok(now?.status === 'approved' || (now?.status === 'cancelled' && now.updatedAt === end));
    }
  });

  // The cap of open orders per account --------------------------------------------------------

  test('an account at its cap is refused too_many_open_orders after the pet checks, nothing written; expired, cancelled and closed orders free a place', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A, B] = await accounts(keys, 2);
    const [p1, p2, p3, p4, taken, sold] = await insert(pets, 'available', 'available', 'available', 'available', 'available', 'sold');
    await placed(orders, [placement(taken!.id, B!)]);
    const capped = (petId: number, extra: Partial<OrderPlacement> = {}) => placement(petId, A!, { maxOpen: 2, ...extra });
    const outcomes = await orders.placeMany([capped(p1!.id), capped(p2!.id), capped(p3!.id), capped(999_999), capped(taken!.id), capped(sold!.id)]);
    assert.deepEqual(outcomes.map(summary), ['placed', 'placed', 'too_many_open_orders', 'pet_not_found', 'pet_not_available', 'pet_not_available']);
    assert.deepEqual(outcomes[2], { kind: 'too_many_open_orders', limit: 2 });
    assert.deepEqual(await pets.get(BigInt(p3!.id)), p3, 'the refused pet is untouched');
    // Approved orders count; an order placed by staff counts too, and staff are never refused.
    await orders.changeMany([change(2, 'approved')]);
    assert.equal(summary((await orders.placeMany([placement(p3!.id, A!)]))[0]!), 'placed', 'no cap for orders:manage');
    assert.equal(summary((await orders.placeMany([capped(p4!.id, { maxOpen: 3 })]))[0]!), 'too_many_open_orders', 'three open, whoever placed them');
    // A cancelled order frees a place; so does a hold that has ended, in the placement's own write.
    await orders.changeMany([change(3, 'cancelled')]);
    assert.equal(summary((await orders.placeMany([capped(p4!.id, { maxOpen: 3 })]))[0]!), 'placed');
    const end = T0 + HOLD;
    const [late] = await orders.placeMany([capped(p3!.id, { maxOpen: 2, now: end, expiresAt: end + HOLD })]);
    assert.equal(summary(late!), 'placed', 'the account\'s two placed orders expired: its approved one and this one make two');
    assert.equal((late as PlacementResult).expired?.length, 2, 'staff\'s order for this pet and the account\'s other placed one');
  });

  test('of concurrent placements by one account for different pets, exactly the cap are placed', async (t) => {
    const { keys, pets, orders } = await open(t);
    const [A] = await accounts(keys, 1);
    const many = await insert(pets, ...Array.from({ length: 20 }, () => 'available' as const));
    const outcomes = (await Promise.all(many.map((pet) => orders.placeMany([placement(pet.id, A!, { maxOpen: 3 })])))).flat();
    assert.deepEqual(outcomes.map(summary).filter((kind) => kind === 'placed').length, 3);
    assert.equal(outcomes.map(summary).filter((kind) => kind === 'too_many_open_orders').length, 17);
    assert.equal((await orders.list({ afterId: 0n, status: 'placed', account: A!, limit: 100 })).length, 3);
    assert.deepEqual(await orders.inventory(), { available: 17, pending: 3, sold: 0 });
  });
}
