/**
 * The webhooks part of the storage contract: endpoints kept per account (the cap exact under
 * concurrency, Idempotency-Key records as for the other creations), a delivery stored with every
 * event an enabled webhook sees, in the event's transaction, and the delivery worker's claims:
 * leased, taken over once the lease ended, recorded (done, due again, abandoned, the endpoint
 * disabled), released. Times are the cases' own (an injected clock), never the machine's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { allSucceeded } from '../../src/lib/item-outcome.ts';
import { EVENT_TYPES, type Actor, type EventLog, type EventType } from '../../src/storage/events.ts';
import type { IdempotencyWrite } from '../../src/storage/idempotency.ts';
import type { KeysStore } from '../../src/storage/keys.ts';
import type { OrdersStore, PlacementResult } from '../../src/storage/orders.ts';
import type { Pet, PetsStore } from '../../src/storage/pets.ts';
import {
  MAX_WEBHOOKS_PER_ACCOUNT, type AttemptRecord, type ClaimedDelivery, type CreatedWebhook, type DeliveryAttempt, type WebhookCreation, type WebhookOrders,
  type WebhooksStore,
} from '../../src/storage/webhooks.ts';

export interface OpenedWebhookStores {
  keys: KeysStore;
  pets: PetsStore;
  orders: OrdersStore;
  webhooks: WebhooksStore;
  events: EventLog;
}

export interface WebhooksContractOptions {
  /** Fresh, empty stores for one test; closed by the engine when the test ends. */
  open(t: { after(fn: () => unknown): void }): Promise<OpenedWebhookStores>;
}

const T0 = Date.UTC(2026, 0, 1);
const LEASE = 30_000;
const DAY = 24 * 3_600_000;
const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

async function actor(keys: KeysStore): Promise<Actor> {
  const { record } = await keys.create({ plan: 'free', now: T0 });
  return { account: record.account, keyId: record.id };
}

const creation = (account: string, extra: Partial<WebhookCreation> = {}): WebhookCreation => ({
  account, url: 'https://hooks.example.com/in', types: EVENT_TYPES, orders: 'own', secret: SECRET, now: T0, maxPerAccount: MAX_WEBHOOKS_PER_ACCOUNT, ...extra,
});

async function made(webhooks: WebhooksStore, account: string, extra: Partial<WebhookCreation> = {}): Promise<CreatedWebhook> {
  const result = await webhooks.create(creation(account, extra));
  assert.equal('kind' in result && result.kind, 'created');
  return result as CreatedWebhook;
}

async function newPets(pets: PetsStore, by: Actor, ...names: string[]): Promise<Pet[]> {
  return allSucceeded(await pets.insertMany(names.map((name) => ({ name, categoryId: 1n, status: 'available' as const, actor: by })))) as Pet[];
}

const outcome = (at: number, status: number | null, error: DeliveryAttempt['error'] = null): DeliveryAttempt =>
  ({ eventId: 0, attempt: 0, attemptedAt: at, status, error, durationMs: 12 });

const record = (delivery: ClaimedDelivery, holder: string, attempt: DeliveryAttempt, retryAt: number | null = null, disableAfterMs = 5 * DAY): AttemptRecord =>
  ({ delivery, holder, outcome: { ...attempt, eventId: delivery.event.id, attempt: delivery.attempt }, retryAt, disableAfterMs });

/** A claim as the cases compare it: webhook, event type and subject, attempt. */
const claimed = (deliveries: readonly ClaimedDelivery[]) => deliveries.map((d) => {
  const subject = d.event.subject;
  const what = subject.kind === 'pet' ? subject.pet.name : subject.kind === 'order' ? `order ${subject.order.id}` : `pet ${subject.id}`;
  return `${d.webhookId} ${d.event.type} ${what} #${d.attempt}`;
});

/** Registers every case of the webhooks contract as a test. */
export function runWebhooksContract({ open }: WebhooksContractOptions): void {
  test('webhooks are kept per account: created, listed by id, read, patched, removed; another account sees none of them', async (t) => {
    const { keys, webhooks } = await open(t);
    const a = await actor(keys);
    const b = await actor(keys);
    const first = await made(webhooks, a.account, { types: ['pet.created', 'order.placed'] });
    assert.deepEqual(first, {
      kind: 'created', secret: SECRET,
      webhook: { id: first.webhook.id, account: a.account, url: 'https://hooks.example.com/in', types: ['pet.created', 'order.placed'], orders: 'own', status: 'enabled', createdAt: T0 },
    });
    const second = await made(webhooks, a.account, { url: 'https://other.example.com/', orders: 'all', now: T0 + 1 });
    await made(webhooks, b.account);
    assert.deepEqual((await webhooks.list({ account: a.account, afterId: 0, limit: 10 })).map((w) => w.id), [first.webhook.id, second.webhook.id]);
    assert.deepEqual((await webhooks.list({ account: a.account, afterId: first.webhook.id, limit: 10 })).map((w) => w.id), [second.webhook.id]);
    assert.deepEqual((await webhooks.list({ account: a.account, afterId: 0, limit: 1 })).map((w) => w.id), [first.webhook.id]);
    assert.deepEqual(await webhooks.get(a.account, first.webhook.id), first.webhook);
    assert.equal(await webhooks.get(b.account, first.webhook.id), null, "another account's webhook is none of its own");

    const changed = await webhooks.change({ id: first.webhook.id, account: a.account, types: ['pet.deleted'], status: 'disabled', now: T0 + 2 });
    assert.deepEqual(changed, { ...first.webhook, types: ['pet.deleted'], status: 'disabled' });
    assert.deepEqual(await webhooks.get(a.account, first.webhook.id), changed);
    assert.equal(await webhooks.change({ id: first.webhook.id, account: b.account, url: 'https://x.example.com/', now: T0 }), null);
    assert.equal(await webhooks.change({ id: 999_999, account: a.account, now: T0 }), null);

    assert.equal(await webhooks.remove(b.account, first.webhook.id), false);
    assert.equal(await webhooks.remove(a.account, first.webhook.id), true);
    assert.equal(await webhooks.remove(a.account, first.webhook.id), false);
    assert.equal(await webhooks.get(a.account, first.webhook.id), null);
    assert.equal(await webhooks.attempts(a.account, first.webhook.id), null);
    assert.deepEqual(await webhooks.attempts(a.account, second.webhook.id), []);
  });

  test('at most 10 webhooks per account, exactly, when 14 creations race; another account has its own 10', async (t) => {
    const { keys, webhooks } = await open(t);
    const a = await actor(keys);
    const b = await actor(keys);
    const results = await Promise.all(Array.from({ length: 14 }, () => Promise.resolve(webhooks.create(creation(a.account)))));
    const kinds = results.map((result) => ('kind' in result ? result.kind : result.conflict));
    assert.equal(kinds.filter((kind) => kind === 'created').length, MAX_WEBHOOKS_PER_ACCOUNT);
    assert.deepEqual(results.filter((result) => 'kind' in result && result.kind === 'too_many_webhooks'), Array(4).fill({ kind: 'too_many_webhooks', limit: 10 }));
    assert.equal((await webhooks.list({ account: a.account, afterId: 0, limit: 100 })).length, 10);
    await made(webhooks, b.account);
  });

  test('the list is in numeric id order, 9 before 10, and a page after an id is the ids above it', async (t) => {
    const { keys, webhooks } = await open(t);
    const a = await actor(keys);
    const ids: number[] = [];
    for (let i = 0; i < MAX_WEBHOOKS_PER_ACCOUNT; i++) ids.push((await made(webhooks, a.account)).webhook.id);
    assert.ok(ids.some((id) => id >= 10), 'ids of two digits and of one');
    assert.deepEqual((await webhooks.list({ account: a.account, afterId: 0, limit: 100 })).map((w) => w.id), ids);
    assert.deepEqual((await webhooks.list({ account: a.account, afterId: ids[7]!, limit: 1 })).map((w) => w.id), [ids[8]]);
  });

  test("a creation with an Idempotency-Key remembers what it made, secret included, found by that key; the key's second creation replays it", async (t) => {
    const { keys, webhooks } = await open(t);
    const a = await actor(keys);
    const remember: IdempotencyWrite = { apiKeyId: a.keyId, key: 'hook-1', fingerprint: 'fp', createdAt: T0 };
    const first = await made(webhooks, a.account, { idempotency: remember });
    // The record keeps what was made, the secret included: the replay shows it again.
    const expected = { fingerprint: 'fp', createdAt: T0, made: { webhook: first.webhook, secret: SECRET } };
    assert.deepEqual(await webhooks.findIdempotencyRecord(a.keyId, 'hook-1', T0 + 1), expected);
    assert.equal(await webhooks.findIdempotencyRecord(a.keyId, 'hook-2', T0 + 1), null);
    assert.equal(await webhooks.findIdempotencyRecord(a.keyId, 'hook-1', T0 + DAY + 1), null, 'expired after 24 h');
    const again = await webhooks.create(creation(a.account, { idempotency: { ...remember, createdAt: T0 + 5 } }));
    assert.deepEqual(again, { conflict: 'recorded', record: expected });
    assert.equal((await webhooks.list({ account: a.account, afterId: 0, limit: 100 })).length, 1);
  });

  test('an event gets one delivery per enabled webhook that sees it: its types, its account\'s orders or all; none for a disabled one', async (t) => {
    const { keys, pets, orders, webhooks } = await open(t);
    const a = await actor(keys);
    const b = await actor(keys);
    const pet = await made(webhooks, a.account, { types: ['pet.created'] });
    const own = await made(webhooks, a.account, { types: ['order.placed'], orders: 'own' });
    const all = await made(webhooks, b.account, { types: ['order.placed', 'pet.updated'], orders: 'all' as WebhookOrders });
    const off = await made(webhooks, a.account);
    await webhooks.change({ id: off.webhook.id, account: a.account, status: 'disabled', now: T0 });
    assert.equal(await webhooks.pending(), 0);

    const [rex] = await newPets(pets, a, 'Rex');
    const [placed] = allSucceeded(await orders.placeMany([{ petId: BigInt(rex!.id), account: a.account, now: T0, expiresAt: T0 + DAY, maxOpen: null, actor: a }])) as PlacementResult[];
    const orderId = (placed as { order: { id: number } }).order.id;
    // pet.created: `pet`; order.placed of a's order: `own` and `all`; pet.updated: `all`.
    assert.equal(await webhooks.pending(), 4);
    const got = await webhooks.claimDue('h1', T0, LEASE, 16, new Set());
    assert.deepEqual(claimed(got).sort(), [
      `${pet.webhook.id} pet.created Rex #1`, `${own.webhook.id} order.placed order ${orderId} #1`,
      `${all.webhook.id} order.placed order ${orderId} #1`, `${all.webhook.id} pet.updated Rex #1`,
    ].sort());
    const delivery = got.find((d) => d.webhookId === pet.webhook.id)!;
    assert.deepEqual({ ...delivery, event: { ...delivery.event, occurredAt: 0 } }, {
      webhookId: pet.webhook.id, account: a.account, orders: 'own', url: 'https://hooks.example.com/in', secret: SECRET, attempt: 1,
      event: { id: delivery.event.id, type: 'pet.created', occurredAt: 0, actor: a, subject: { kind: 'pet', pet: rex } },
    });
    assert.ok(delivery.event.id >= 1, 'the event has its id, sent as webhook-id');

    // b's own-orders webhook does not see a's order.
    const bOwn = await made(webhooks, b.account, { types: ['order.cancelled'] });
    await orders.changeMany([{ id: BigInt(orderId), to: 'cancelled', expectedVersion: null, manage: true, account: null, now: T0 + 1, actor: a }]);
    assert.deepEqual(claimed(await webhooks.claimDue('h1', T0, LEASE, 16, new Set())).filter((c) => c.startsWith(`${bOwn.webhook.id} `)), []);
  });

  test('a claim leases its deliveries: no other claim takes them until the lease ends; then a record by the first holder is ignored', async (t) => {
    const { keys, pets, webhooks } = await open(t);
    const a = await actor(keys);
    const hook = await made(webhooks, a.account);
    await newPets(pets, a, 'Rex');
    const [mine] = await webhooks.claimDue('first', T0, LEASE, 16, new Set());
    assert.ok(mine);
    assert.deepEqual(await webhooks.claimDue('second', T0 + LEASE - 1, LEASE, 16, new Set()), [], 'held while the lease runs');
    const [taken] = await webhooks.claimDue('second', T0 + LEASE, LEASE, 16, new Set());
    assert.deepEqual(claimed([taken!]), claimed([mine!]), 'taken over once the lease ended: the same attempt number, none recorded');
    await webhooks.recordAttempt(record(mine!, 'first', outcome(T0 + LEASE + 5, 200)));
    assert.deepEqual(await webhooks.attempts(a.account, hook.webhook.id), [], "the first holder's record is ignored");
    assert.equal(await webhooks.pending(), 1);
    await webhooks.recordAttempt(record(taken!, 'second', outcome(T0 + LEASE + 6, 204)));
    assert.deepEqual(await webhooks.attempts(a.account, hook.webhook.id), [
      { eventId: mine!.event.id, attempt: 1, attemptedAt: T0 + LEASE + 6, status: 204, error: null, durationMs: 12 },
    ]);
    assert.equal(await webhooks.pending(), 0, 'done');
  });

  test('a failed attempt is due again at its retry time as the next attempt; with no retry left it is abandoned', async (t) => {
    const { keys, pets, webhooks } = await open(t);
    const a = await actor(keys);
    const hook = await made(webhooks, a.account);
    await newPets(pets, a, 'Rex');
    const [first] = await webhooks.claimDue('w', T0, LEASE, 16, new Set());
    await webhooks.recordAttempt(record(first!, 'w', outcome(T0 + 1, 500, 'http_status'), T0 + 5_000));
    assert.deepEqual(await webhooks.claimDue('w', T0 + 4_999, LEASE, 16, new Set()), [], 'not due yet');
    const [second] = await webhooks.claimDue('w', T0 + 5_000, LEASE, 16, new Set());
    assert.equal(second!.attempt, 2);
    await webhooks.recordAttempt(record(second!, 'w', outcome(T0 + 5_001, null, 'timeout'), null));
    assert.equal(await webhooks.pending(), 0, 'abandoned');
    assert.deepEqual((await webhooks.attempts(a.account, hook.webhook.id))!.map((x) => [x.attempt, x.status, x.error]), [[2, null, 'timeout'], [1, 500, 'http_status']]);
  });

  test('release gives claims back, due at once; skip and the cap per endpoint keep a claim off busy webhooks', async (t) => {
    const { keys, pets, webhooks } = await open(t);
    const a = await actor(keys);
    const one = await made(webhooks, a.account, { types: ['pet.created'] });
    const two = await made(webhooks, a.account, { types: ['pet.created'] });
    await newPets(pets, a, 'P1', 'P2', 'P3', 'P4', 'P5', 'P6');
    const skipped = await webhooks.claimDue('w', T0, LEASE, 16, new Set([one.webhook.id]));
    assert.deepEqual(skipped.map((d) => d.webhookId), Array(4).fill(two.webhook.id), 'at most 4 of one webhook at a time, none of one skipped');
    await webhooks.release('someone else', skipped);
    const rest = await webhooks.claimDue('x', T0, LEASE, 16, new Set([one.webhook.id]));
    assert.deepEqual(rest.map((d) => d.event.id).filter((id) => skipped.some((d) => d.event.id === id)), [], "only the holder's own claims are released");
    assert.equal(rest.length, 2);
    await webhooks.release('w', skipped);
    const again = await webhooks.claimDue('x', T0 + 1, LEASE, 3, new Set());
    assert.equal(again.length, 3, 'the limit');
    assert.equal(await webhooks.pending(), 12);
  });

  test('an endpoint failing for 5 days is disabled and its pending deliveries dropped; a success forgets its failures; enabled again, it gets new events', async (t) => {
    const { keys, pets, webhooks } = await open(t);
    const a = await actor(keys);
    const hook = await made(webhooks, a.account, { types: ['pet.created'] });
    const id = hook.webhook.id;
    await newPets(pets, a, 'Rex', 'Tom');
    const fail = async (at: number) => {
      const [d] = await webhooks.claimDue('w', at, LEASE, 1, new Set());
      await webhooks.recordAttempt(record(d!, 'w', outcome(at, null, 'connection_failed'), at + 1));
    };
    await fail(T0);
    await fail(T0 + 2 * DAY);
    // A success in between forgets the failures: failing since the next one.
    const [ok] = await webhooks.claimDue('w', T0 + 3 * DAY, LEASE, 1, new Set());
    await webhooks.recordAttempt(record(ok!, 'w', outcome(T0 + 3 * DAY, 200)));
    await fail(T0 + 4 * DAY);
    await fail(T0 + 8 * DAY);
    assert.equal((await webhooks.get(a.account, id))!.status, 'enabled', 'failing for 4 days only');
    await fail(T0 + 9 * DAY);
    assert.equal((await webhooks.get(a.account, id))!.status, 'disabled');
    assert.equal(await webhooks.pending(), 0, 'its pending delivery dropped');
    await newPets(pets, a, 'Ann');
    assert.equal(await webhooks.pending(), 0, 'no delivery while disabled');
    await webhooks.change({ id, account: a.account, status: 'enabled', now: T0 + 10 * DAY });
    const [bob] = await newPets(pets, a, 'Bob');
    const [next] = await webhooks.claimDue('w', T0 + 10 * DAY, LEASE, 16, new Set());
    assert.deepEqual(claimed([next!]), [`${id} pet.created Bob #1`]);
    assert.equal(next!.event.subject.kind === 'pet' && next!.event.subject.pet.id, bob!.id);
    // Enabled again, its failing time starts over: one failure does not disable it.
    await webhooks.recordAttempt(record(next!, 'w', outcome(T0 + 10 * DAY, 500, 'http_status'), null));
    assert.equal((await webhooks.get(a.account, id))!.status, 'enabled');
  });

  test('the attempts log keeps the newest 100 of a webhook, newest first; removing the webhook removes its deliveries and log', async (t) => {
    const { keys, pets, webhooks } = await open(t);
    const a = await actor(keys);
    const hook = await made(webhooks, a.account, { types: ['pet.created'] });
    await newPets(pets, a, 'Rex');
    for (let i = 0; i < 103; i++) {
      const [d] = await webhooks.claimDue('w', T0 + i, LEASE, 1, new Set());
      await webhooks.recordAttempt(record(d!, 'w', outcome(T0 + i, 503, 'http_status'), T0 + i + 1, 365 * DAY));
    }
    const log = (await webhooks.attempts(a.account, hook.webhook.id))!;
    assert.equal(log.length, 100);
    assert.deepEqual([log[0]!.attempt, log[0]!.attemptedAt, log.at(-1)!.attempt], [103, T0 + 102, 4]);
    assert.equal(await webhooks.pending(), 1);
    assert.equal(await webhooks.remove(a.account, hook.webhook.id), true);
    assert.equal(await webhooks.pending(), 0);
    await newPets(pets, a, 'Tom');
    assert.equal(await webhooks.pending(), 0);
  });

  test('an event deleted by the retention takes its waiting deliveries with it', async (t) => {
    const { keys, pets, webhooks, events } = await open(t);
    const a = await actor(keys);
    await made(webhooks, a.account, { types: ['pet.created'] });
    await newPets(pets, a, 'Rex', 'Tom');
    assert.equal(await webhooks.pending(), 2);
    // Every event is older than a time far ahead: the retention deletes them all.
    while (await events.purge(Date.now() + 365 * DAY, 1) > 0);
    assert.equal(await webhooks.pending(), 0);
    assert.deepEqual(await webhooks.claimDue('w', T0, LEASE, 16, new Set()), []);
  });

  test('no webhook, no delivery: writes of every kind leave nothing pending', async (t) => {
    const { keys, pets, webhooks } = await open(t);
    const a = await actor(keys);
    await newPets(pets, a, 'Rex');
    assert.equal(await webhooks.pending(), 0);
    assert.deepEqual(await webhooks.claimDue('w', T0, LEASE, 16, new Set()), []);
    const types: readonly EventType[] = ['pet.deleted'];
    await made(webhooks, a.account, { types });
    await newPets(pets, a, 'Tom');
    assert.equal(await webhooks.pending(), 0, 'a type it does not list');
  });
}
