/**
 * The event log part of the storage contract: every change to a pet or an order writes exactly
 * its events, in its own transaction, on every engine, and nothing that changes nothing writes
 * one. Each case makes one kind of write and reads back only the events after the last one seen.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allSucceeded, isItemFailure } from '../../src/lib/item-outcome.ts';
import { EVENT_TYPES, type Actor, type EventLog, type StoredEvent } from '../../src/storage/events.ts';
import type { IdempotencyWrite } from '../../src/storage/idempotency.ts';
import type { KeysStore } from '../../src/storage/keys.ts';
import type { Order, OrderChange, OrderPlacement, OrdersStore, PlacementResult } from '../../src/storage/orders.ts';
import type { Pet, PetsStore } from '../../src/storage/pets.ts';

export interface OpenedEventStores {
  keys: KeysStore;
  pets: PetsStore;
  orders: OrdersStore;
  events: EventLog;
}

export interface EventsContractOptions {
  /** Fresh, empty stores for one test; closed by the engine when the test ends. */
  open(t: { after(fn: () => unknown): void }): Promise<OpenedEventStores>;
}

const T0 = Date.UTC(2026, 0, 1);
const HOLD = 3_600_000;

/** An event as the cases compare it: its type, who made it, and what it says of its subject. */
function seen(event: StoredEvent): string {
  const { subject } = event;
  const what = subject.kind === 'pet' ? `pet ${subject.pet.id} ${subject.pet.name} ${subject.pet.status} v${subject.pet.version}`
    : subject.kind === 'pet_deleted' ? `pet ${subject.id}`
      : `order ${subject.order.id} ${subject.order.status} v${subject.order.version}`;
  return `${event.type} by ${event.actor === null ? 'nobody' : event.actor.keyId} ${what}`;
}

/** Reads the events after the last one `since` returned, as the cases compare them. */
function follower(events: EventLog) {
  let after = 0;
  return async (): Promise<string[]> => {
    const page = await events.page({ afterId: after, limit: 100, types: EVENT_TYPES, account: null });
    if (page.length > 0) after = page.at(-1)!.id;
    return page.map(seen);
  };
}

async function actors(keys: KeysStore, count: number): Promise<Actor[]> {
  const made: Actor[] = [];
  for (let i = 0; i < count; i++) {
    const { record } = await keys.create({ plan: 'free', now: T0 });
    made.push({ account: record.account, keyId: record.id });
  }
  return made;
}

const placement = (petId: number, actor: Actor, extra: Partial<OrderPlacement> = {}): OrderPlacement =>
  ({ petId: BigInt(petId), account: actor.account, now: T0, expiresAt: T0 + HOLD, maxOpen: null, actor, ...extra });

const step = (id: number, to: Order['status'], actor: Actor, extra: Partial<OrderChange> = {}): OrderChange =>
  ({ id: BigInt(id), to, expectedVersion: null, manage: true, account: null, now: T0 + 1000, actor, ...extra });

function remembering(apiKeyId: string, key: string): IdempotencyWrite {
  return { apiKeyId, key, fingerprint: `fp-${key}`, createdAt: T0 };
}

/** Registers every case of the events contract as a test. */
export function runEventsContract({ open }: EventsContractOptions): void {
  test('creations and changes of pets write exactly their events; a refusal, a replay or a change to the values a pet has writes none', async (t) => {
    const { keys, pets, events } = await open(t);
    const next = follower(events);
    const [staff] = await actors(keys, 1);
    const k = staff!.keyId;
    const [rex, tom] = allSucceeded(await pets.insertMany([
      { name: 'Rex', categoryId: 9_223_372_036_854_775_807n, status: 'available', actor: staff!, idempotency: remembering(k, 'c1') },
      { name: 'Tom', categoryId: 2n, status: 'sold', actor: staff! },
    ])) as Pet[];
    assert.deepEqual(await next(), [`pet.created by ${k} pet ${rex!.id} Rex available v1`, `pet.created by ${k} pet ${tom!.id} Tom sold v1`]);
    // A replay of the Idempotency-Key, and a failing item of a batch, write nothing; the rest of its batch does.
    const outcomes = await pets.insertMany([
      { name: 'Rex', categoryId: 1n, status: 'available', actor: staff!, idempotency: remembering(k, 'c1') },
      { name: 'Bad', categoryId: 1n, status: 'available', actor: staff!, idempotency: remembering(k, 'c'.repeat(256)) }, // its record fails the CHECK
      { name: 'Ok', categoryId: 1n, status: 'available', actor: staff! },
    ]);
    assert.ok('conflict' in (outcomes[0] as object) && isItemFailure(outcomes[1]));
    const ok = outcomes[2] as Pet;
    assert.deepEqual(await next(), [`pet.created by ${k} pet ${ok.id} Ok available v1`]);

    const changes = await pets.changeMany([
      { kind: 'update', id: BigInt(rex!.id), patch: { name: 'Rex II' }, expectedVersion: 1, now: T0, actor: staff! },
      { kind: 'update', id: BigInt(rex!.id), patch: { name: 'Rex III' }, expectedVersion: 1, now: T0, actor: staff! },
      { kind: 'update', id: BigInt(tom!.id), patch: { name: 'Tom', status: 'sold' }, expectedVersion: null, now: T0, actor: staff! },
      { kind: 'update', id: 999_999n, patch: { name: 'x' }, expectedVersion: null, now: T0, actor: staff! },
      { kind: 'delete', id: BigInt(ok.id), expectedVersion: 7, now: T0, actor: staff! },
    ]);
    assert.deepEqual(changes.map((outcome) => (outcome as { kind: string }).kind), ['updated', 'version_mismatch', 'updated', 'not_found', 'version_mismatch']);
    assert.deepEqual(await next(), [`pet.updated by ${k} pet ${rex!.id} Rex II available v2`], 'the same values bump the version but change nothing');
    await pets.changeMany([{ kind: 'delete', id: BigInt(ok.id), expectedVersion: 1, now: T0, actor: staff! }]);
    assert.deepEqual(await next(), [`pet.deleted by ${k} pet ${ok.id}`]);
    const [event] = await events.page({ afterId: 0, limit: 1, types: EVENT_TYPES, account: null });
    assert.deepEqual(event!.subject, { kind: 'pet', pet: { ...rex!, version: 1 } }, 'the pet as it was stored, int64 digits exact');
    assert.ok(Math.abs(event!.occurredAt - Date.now()) < 60_000, 'stamped with the commit time');
    // A batch without Idempotency-Keys (one statement on PostgreSQL) logs its creations alike.
    const made = allSucceeded(await pets.insertMany([
      { name: 'Kit', categoryId: 9_223_372_036_854_775_806n, status: 'pending', actor: staff! },
      { name: 'Max', categoryId: 3n, status: 'available' },
    ])) as Pet[];
    const last = await events.page({ afterId: (await events.latestId()) - 2, limit: 10, types: EVENT_TYPES, account: null });
    assert.deepEqual(last.map((logged) => [logged.type, logged.actor, logged.subject]), [
      ['pet.created', staff, { kind: 'pet', pet: made[0] }],
      ['pet.created', null, { kind: 'pet', pet: made[1] }],
    ]);
  });

  test('a placement writes order.placed and pet.updated; each step writes its event and its pet\'s when it moves the pet; refusals write none', async (t) => {
    const { keys, pets, orders, events } = await open(t);
    const next = follower(events);
    const [staff, adopter] = await actors(keys, 2);
    const [s, a] = [staff!.keyId, adopter!.keyId];
    const [rex, tom, kit] = allSucceeded(await pets.insertMany(['Rex', 'Tom', 'Kit'].map((name) => ({ name, categoryId: 1n, status: 'available' as const })))) as Pet[];
    assert.deepEqual(await next(), [
      `pet.created by nobody pet ${rex!.id} Rex available v1`, `pet.created by nobody pet ${tom!.id} Tom available v1`, `pet.created by nobody pet ${kit!.id} Kit available v1`,
    ], 'seeding without a key is the service\'s own');
    const placed = await orders.placeMany([placement(rex!.id, adopter!), placement(rex!.id, staff!), placement(tom!.id, adopter!, { maxOpen: 1 }), placement(kit!.id, adopter!)]);
    assert.deepEqual(placed.map((outcome) => (outcome as PlacementResult & { kind: string }).kind), ['placed', 'pet_not_available', 'too_many_open_orders', 'placed']);
    assert.deepEqual(await next(), [
      `order.placed by ${a} order 1 placed v1`, `pet.updated by ${a} pet ${rex!.id} Rex pending v2`,
      `order.placed by ${a} order 2 placed v1`, `pet.updated by ${a} pet ${kit!.id} Kit pending v2`,
    ]);
    const stepped = await orders.changeMany([
      step(1, 'approved', staff!),
      step(1, 'approved', staff!),
      step(2, 'completed', staff!),
      step(2, 'cancelled', adopter!, { manage: false, account: adopter!.account }),
    ]);
    assert.deepEqual(stepped.map((outcome) => (outcome as { kind: string }).kind), ['changed', 'unchanged', 'invalid_transition', 'changed']);
    assert.deepEqual(await next(), [
      `order.approved by ${s} order 1 approved v2`,
      `order.cancelled by ${a} order 2 cancelled v2`, `pet.updated by ${a} pet ${kit!.id} Kit available v3`,
    ], 'approving leaves the pet pending: no pet event');
    await orders.changeMany([step(1, 'completed', staff!, { expectedVersion: 1 })]);
    assert.deepEqual(await next(), [], 'a 412 writes nothing');
    await orders.changeMany([step(1, 'completed', staff!)]);
    assert.deepEqual(await next(), [`order.completed by ${s} order 1 completed v3`, `pet.updated by ${s} pet ${rex!.id} Rex sold v3`]);
    const [order] = await events.page({ afterId: 0, limit: 1, types: ['order.placed'], account: null });
    assert.deepEqual(order!.subject, { kind: 'order', order: { id: 1, petId: BigInt(rex!.id), account: adopter!.account, status: 'placed', placedAt: T0, updatedAt: T0, expiresAt: T0 + HOLD, version: 1 } });
    assert.deepEqual(order!.actor, adopter);
  });

  test('an expired hold writes order.cancelled and pet.updated by nobody, in the sweep and in the write that finds it, before that write\'s own events', async (t) => {
    const { keys, pets, orders, events } = await open(t);
    const next = follower(events);
    const [adopter, other] = await actors(keys, 2);
    const [rex, tom] = allSucceeded(await pets.insertMany(['Rex', 'Tom'].map((name) => ({ name, categoryId: 1n, status: 'available' as const })))) as Pet[];
    await orders.placeMany([placement(rex!.id, adopter!), placement(tom!.id, adopter!)]);
    await next();
    const end = T0 + HOLD;
    assert.equal(await orders.expireDue(end - 1, 10), 0);
    assert.deepEqual(await next(), [], 'nothing due, nothing written');
    await orders.placeMany([placement(rex!.id, other!, { now: end, expiresAt: end + HOLD })]);
    assert.deepEqual(await next(), [
      'order.cancelled by nobody order 1 cancelled v2', `pet.updated by nobody pet ${rex!.id} Rex available v3`,
      `order.placed by ${other!.keyId} order 3 placed v1`, `pet.updated by ${other!.keyId} pet ${rex!.id} Rex pending v4`,
    ]);
    assert.equal(await orders.expireDue(end, 10), 1);
    assert.deepEqual(await next(), ['order.cancelled by nobody order 2 cancelled v2', `pet.updated by nobody pet ${tom!.id} Tom available v3`]);
  });

  test('a page holds the events after its id, of the types asked, pet events and the account\'s own order events only, at most limit', async (t) => {
    const { keys, pets, orders, events } = await open(t);
    const [a, b] = await actors(keys, 2);
    const [rex, tom] = allSucceeded(await pets.insertMany(['Rex', 'Tom'].map((name) => ({ name, categoryId: 1n, status: 'available' as const })))) as Pet[];
    await orders.placeMany([placement(rex!.id, a!)]);
    await orders.placeMany([placement(tom!.id, b!)]);
    const all = await events.page({ afterId: 0, limit: 100, types: EVENT_TYPES, account: null });
    assert.deepEqual(all.map((event) => event.id), [1, 2, 3, 4, 5, 6]);
    assert.equal(await events.latestId(), 6);
    const ofA = await events.page({ afterId: 0, limit: 100, types: EVENT_TYPES, account: a!.account });
    assert.deepEqual(ofA.map((event) => `${event.id} ${event.type}`), ['1 pet.created', '2 pet.created', '3 order.placed', '4 pet.updated', '6 pet.updated']);
    const placedOnly = await events.page({ afterId: 3, limit: 100, types: ['order.placed'], account: null });
    assert.deepEqual(placedOnly.map((event) => event.id), [5]);
    assert.deepEqual((await events.page({ afterId: 1, limit: 2, types: EVENT_TYPES, account: null })).map((event) => event.id), [2, 3]);
  });

  test('retention deletes the events older than its limit, oldest first, in chunks, and remembers the highest id it deleted', async (t) => {
    const { pets, events } = await open(t);
    assert.equal(await events.deletedThrough(), 0);
    // Three writes (PostgreSQL deletes the events of one write together: event-log.test.ts).
    for (const name of ['a', 'b', 'c']) allSucceeded(await pets.insertMany([{ name, categoryId: 1n, status: 'available' }]));
    assert.equal(await events.purge(Date.now() - 3_600_000, 10), 0, 'nothing older than an hour');
    assert.equal(await events.purge(Date.now() + 60_000, 2), 2);
    assert.equal(await events.deletedThrough(), 2);
    assert.equal(await events.purge(Date.now() + 60_000, 2), 1);
    assert.equal(await events.deletedThrough(), 3);
    allSucceeded(await pets.insertMany([{ name: 'd', categoryId: 1n, status: 'available' }]));
    assert.deepEqual((await events.page({ afterId: 0, limit: 10, types: EVENT_TYPES, account: null })).map((event) => event.id), [4], 'an id is never handed out again');
  });
}
