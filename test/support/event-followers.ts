/**
 * The event feed under load, for the end-to-end tests of several workers or instances: random
 * writes over HTTP on every server while consumers follow `Link: rel="next"` on every server, and
 * others the stream (`text/event-stream`), dropping it now and then to resume with
 * `Last-Event-ID` on another server,
 * then the checks that each consumer saw exactly the events it may see, once each, in id order,
 * and that replaying them rebuilds the pets and orders that the database holds.
 */
import assert from 'node:assert/strict';
import { openStream } from './event-stream.ts';

/** A key as the load uses it. */
export interface LoadKey {
  key: string;
  account: string;
  /** Holds `orders:manage`: sees every order event. */
  manage: boolean;
}

/** An event as the feed serves it. */
export interface FeedEvent {
  id: number;
  type: string;
  occurredAt: string;
  actor: { account: string; keyId: string } | null;
  data: { id: number; account?: string; [field: string]: unknown };
}

/** The log as the database holds it: every event's id, type and the account of an order event (null for a pet's). */
export interface LoggedEvent {
  id: number;
  type: string;
  account: string | null;
}

export interface LoadOptions {
  /** The servers' base URLs: every write and every consumer picks among them. */
  urls: readonly string[];
  staff: LoadKey;
  adopters: readonly LoadKey[];
  /** Keys that follow the feed (each on every server). */
  consumers: readonly LoadKey[];
  writers: number;
  writesPerWriter: number;
  /** A pseudo-random source (seeded, so a failure can be replayed). */
  random: () => number;
}

export interface LoadFigures {
  writes: number;
  refused: number;
  consumers: number;
  /** Of the consumers, those that followed the stream; and how many times they reconnected. */
  streamConsumers: number;
  reconnections: number;
  eventsChecked: number;
  duplicates: number;
  misses: number;
  outOfOrder: number;
}

const call = (url: string, key: string, method = 'GET', body?: unknown) =>
  fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

/** One consumer: follows `next` from the start, on a random server each time, until the writes are over and a page comes back empty. */
async function follow(options: LoadOptions, consumer: LoadKey, writing: () => boolean): Promise<FeedEvent[]> {
  const seen: FeedEvent[] = [];
  let next = `/v1/events?limit=${1 + Math.floor(options.random() * 100)}&wait=1`;
  for (;;) {
    const done = !writing();
    const url = options.urls[Math.floor(options.random() * options.urls.length)]!;
    const response = await call(url + next, consumer.key);
    assert.equal(response.status, 200, await response.clone().text());
    const page = (await response.json()) as FeedEvent[];
    seen.push(...page);
    next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')![1]!;
    // The writes were all answered before this request started: an empty page is the end.
    if (done && page.length === 0) return seen;
  }
}

/** How long a stream follower waits, once the writes are over, for the last event it may see. */
const STREAM_SETTLE_MS = 20_000;

/**
 * One consumer of the stream: opens it on a random server, reads a random number of events, drops
 * it and resumes with `Last-Event-ID` on another, until it has the last event it may see (known
 * once the writes are over) or STREAM_SETTLE_MS passed after that.
 */
async function stream(options: LoadOptions, consumer: LoadKey, lastExpected: Promise<number>, figures: LoadFigures): Promise<FeedEvent[]> {
  const seen: FeedEvent[] = [];
  let target: number | null = null;
  let giveUp = Infinity;
  void lastExpected.then((id) => {
    target = id;
    giveUp = Date.now() + STREAM_SETTLE_MS;
  });
  const reached = () => target !== null && ((seen.at(-1)?.id ?? 0) >= target || Date.now() > giveUp);
  const tick = () => new Promise<'tick'>((resolve) => setTimeout(() => resolve('tick'), 100));
  for (let opened = 0; !reached(); opened++) {
    if (opened > 0) figures.reconnections++;
    const url = options.urls[Math.floor(options.random() * options.urls.length)]!;
    const last = seen.at(-1)?.id;
    const open = await openStream(`${url}/v1/events`, { key: consumer.key, ...(last === undefined ? {} : { lastEventId: String(last) }) });
    if (open.response.status !== 200) assert.fail(`a stream answered ${open.response.status}: ${await open.response.text()}`);
    let budget = 1 + Math.floor(options.random() * 80);
    // The frame asked for is kept across ticks: a promise dropped would take its frame with it.
    let pending = open.next();
    while (budget > 0 && !reached()) {
      const frame = await Promise.race([pending, tick()]);
      if (frame === 'tick') continue;
      pending = open.next();
      if (frame === null) break;
      if (frame.data === undefined) continue;
      seen.push(JSON.parse(frame.data) as FeedEvent);
      budget--;
    }
    open.close();
    await open.ended;
  }
  return seen;
}

/** One writer: `writesPerWriter` random writes, each on a random server; counts the 2xx and the refusals. */
async function write(options: LoadOptions, pets: number[], orders: { id: number; owner: LoadKey }[], figures: LoadFigures): Promise<void> {
  const { random, staff, adopters } = options;
  const pick = <T>(items: readonly T[]): T | undefined => items[Math.floor(random() * items.length)];
  for (let i = 0; i < options.writesPerWriter; i++) {
    const url = pick(options.urls)!;
    const roll = random();
    let response: Response;
    if (roll < 0.25 || pets.length === 0) {
      response = await call(`${url}/v1/pets`, staff.key, 'POST', { name: `pet ${i}`, categoryId: 1 + Math.floor(random() * 5) });
      if (response.status === 201) pets.push(((await response.clone().json()) as { id: number }).id);
    } else if (roll < 0.4) {
      const change = random() < 0.5 ? { name: `renamed ${i}` } : { status: pick(['available', 'sold'] as const) };
      response = await call(`${url}/v1/pets/${pick(pets)}`, staff.key, 'PATCH', change);
    } else if (roll < 0.45) {
      response = await call(`${url}/v1/pets/${pick(pets)}`, staff.key, 'DELETE');
    } else if (roll < 0.7) {
      const adopter = pick(adopters)!;
      response = await call(`${url}/v1/store/orders`, adopter.key, 'POST', { petId: pick(pets) });
      if (response.status === 201) orders.push({ id: ((await response.clone().json()) as { id: number }).id, owner: adopter });
    } else {
      const order = pick(orders);
      if (order === undefined) continue;
      const status = pick(['approved', 'completed', 'cancelled'] as const)!;
      response = await call(`${url}/v1/store/orders/${order.id}`, status === 'cancelled' && random() < 0.5 ? order.owner.key : staff.key, 'PATCH', { status });
    }
    const body = await response.text();
    if (response.status >= 200 && response.status < 300) figures.writes++;
    else if (response.status === 404 || response.status === 409) figures.refused++;
    else assert.fail(`a write answered ${response.status}: ${body}`);
  }
}

/** Every page of a list, following its `Link` until there is none (a list) or a page is empty (the feed). */
async function readAll(url: string, path: string, key: string): Promise<{ id: number }[]> {
  const all: { id: number }[] = [];
  let next: string | undefined = `${path}?limit=100`;
  while (next !== undefined) {
    const response = await call(url + next, key);
    assert.equal(response.status, 200);
    const page = (await response.json()) as { id: number }[];
    if (page.length === 0) break;
    all.push(...page);
    next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1];
  }
  return all;
}

/**
 * Runs the load, then checks every consumer against `logged()` (the database's log, read once the
 * writes are over) and the replay of the staff's events against the pets and orders the API
 * serves. Resolves with the figures, every count of a failure 0 (or the assertions failed first).
 */
export async function followWhileWriting(options: LoadOptions, logged: () => Promise<LoggedEvent[]>): Promise<LoadFigures> {
  const figures: LoadFigures = { writes: 0, refused: 0, consumers: 0, streamConsumers: 0, reconnections: 0, eventsChecked: 0, duplicates: 0, misses: 0, outOfOrder: 0 };
  const pets: number[] = [];
  const orders: { id: number; owner: LoadKey }[] = [];
  let writing = true;
  // Every consumer key follows the feed twice, each time on random servers.
  const consumers = [...options.consumers, ...options.consumers];
  const following = consumers.map((consumer) => follow(options, consumer, () => writing));
  // And once more each, on the stream.
  const written = Promise.withResolvers<LoggedEvent[]>();
  const mayHave = (consumer: LoadKey) => (event: LoggedEvent) => event.account === null || consumer.manage || event.account === consumer.account;
  const streaming = options.consumers.map((consumer) => stream(options, consumer, written.promise.then((log) => log.filter(mayHave(consumer)).at(-1)?.id ?? 0), figures));
  await Promise.all(Array.from({ length: options.writers }, () => write(options, pets, orders, figures)));
  writing = false;
  const pagesSeen = await Promise.all(following);
  // Read once the pages are read to their end: on PostgreSQL a read of the feed is what numbers
  // the last events (decision 0025), and the log read here in SQL does not.
  const log = await logged();
  written.resolve(log);
  const seenBy = [...pagesSeen, ...(await Promise.all(streaming))];
  consumers.push(...options.consumers);
  figures.consumers = consumers.length;
  figures.streamConsumers = options.consumers.length;

  consumers.forEach((consumer, index) => {
    const expected = log.filter(mayHave(consumer)).map((event) => event.id);
    const seen = seenBy[index]!.map((event) => event.id);
    const unique = new Set(seen);
    figures.duplicates += seen.length - unique.size;
    figures.misses += expected.filter((id) => !unique.has(id)).length;
    figures.outOfOrder += seen.filter((id, i) => i > 0 && id <= seen[i - 1]!).length;
    figures.eventsChecked += seen.length;
    assert.deepEqual(seen, expected, `consumer ${index} (${consumer.manage ? 'staff' : consumer.account}${index >= consumers.length - options.consumers.length ? ', streaming' : ''}) saw exactly the events it may see, once, in id order`);
  });

  // Replayed in order, the staff's events (it sees them all) rebuild the pets and the orders.
  await assertReplayRebuilds(seenBy[options.consumers.indexOf(options.staff)]!, options.urls[0]!, options.staff.key);
  return figures;
}

/**
 * Checks that `events` (every event, in id order), applied in order, rebuild exactly the pets and
 * the orders that the server at `url` serves to `staffKey` (a key with `orders:manage`).
 */
export async function assertReplayRebuilds(events: readonly FeedEvent[], url: string, staffKey: string): Promise<void> {
  const petsReplayed = new Map<number, unknown>();
  const ordersReplayed = new Map<number, unknown>();
  for (const event of events) {
    if (event.type === 'pet.deleted') petsReplayed.delete(event.data.id);
    else if (event.type.startsWith('pet.')) petsReplayed.set(event.data.id, event.data);
    else ordersReplayed.set(event.data.id, event.data);
  }
  const byId = (a: unknown, b: unknown) => (a as { id: number }).id - (b as { id: number }).id;
  assert.deepEqual([...petsReplayed.values()].sort(byId), await readAll(url, '/v1/pets', staffKey), 'the replay rebuilds the pets');
  assert.deepEqual([...ordersReplayed.values()].sort(byId), await readAll(url, '/v1/store/orders', staffKey), 'the replay rebuilds the orders');
}

/** Every event `key` may see, read through the feed's pages. */
export async function readFeed(url: string, key: string): Promise<FeedEvent[]> {
  return (await readAll(url, '/v1/events', key)) as FeedEvent[];
}

/** A small seeded generator (mulberry32), so that a failing run can be replayed with its seed. */
export function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
