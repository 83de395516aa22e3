/**
 * Every kind of write (test/support/write-kinds.ts), made once every answer it can change has
 * been cached, is seen by the next request: the pet by id, every page of every list by status and
 * of the list of all pets (a small `limit`, so that the pet sits behind a cursor), the inventory
 * (which must count what those lists hold), the order it moved, and every page of every list of
 * orders. Run on the server as it runs on a file (src/main.ts in a child process): with the
 * writer thread, with the inline writer, and with two workers on the thread, where each read is
 * made on a new connection, so that both workers fill their caches and both must see the write.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { join } from 'node:path';
import { request } from 'node:http';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { ORDER_STATUSES } from '../../src/storage/orders.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import { startMain, tempDir } from '../support/main-process.ts';
import { createPet, WRITE_KINDS, type Answer, type Call, type PetSeen, type PetStatus, type Touched, type WriteKind } from '../support/write-kinds.ts';

const STATUSES: readonly PetStatus[] = ['available', 'pending', 'sold'];
/** Pets before the rows' own, so that theirs are behind a cursor. */
const FILLERS = 9;
const PAGE = 4;
/** Each read made this many times, each on a new connection: with two workers, both answer. */
const CONNECTIONS = 6;

const MODES: { name: string; env: Record<string, string> }[] = [
  { name: 'the writer thread', env: { WRITER: 'thread' } },
  { name: 'the inline writer', env: { WRITER: 'inline' } },
  { name: 'two workers on the writer thread', env: { WORKERS: '2' } },
];

/** Calls over a new connection each time (no keep-alive). */
function caller(url: string, key: string): Call {
  return (method, path, body) => new Promise<Answer>((resolve, reject) => {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string | number> = { authorization: `Bearer ${key}`, connection: 'close' };
    if (text !== undefined) Object.assign(headers, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    const sent = request(`${url}${path}`, { method, agent: false, headers }, (response) => {
      let received = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (received += chunk)).on('end', () => {
        resolve({ status: response.statusCode!, body: received === '' ? null : JSON.parse(received), link: (response.headers.link as string | undefined) ?? null });
      });
    });
    sent.on('error', reject);
    sent.end(text);
  });
}

/** Every page of a list, following its Link header. */
async function allPages<T>(call: Call, first: string): Promise<T[]> {
  const pets: T[] = [];
  for (let path: string | undefined = first; path !== undefined; ) {
    const answer = await call('GET', path);
    assert.equal(answer.status, 200, path);
    pets.push(...(answer.body as T[]));
    path = answer.link === null ? undefined : /^<([^>]+)>; rel="next"$/.exec(answer.link)![1];
  }
  return pets;
}

/** The lists a pet may be in: by each status, and all pets. */
const LISTS = [...STATUSES.map((status) => `/v1/pets?status=${status}&limit=${PAGE}`), `/v1/pets?limit=${PAGE}`];
/** The lists an order may be in: by each status, and all orders. */
const ORDER_LISTS = [...ORDER_STATUSES.map((status) => `/v1/store/orders?status=${status}&limit=${PAGE}`), `/v1/store/orders?limit=${PAGE}`];

/** Reads everything a write to these pets (and this order) can change, on as many connections. */
async function readAll(call: Call, petIds: readonly number[], orderId?: number) {
  const rounds = await Promise.all(Array.from({ length: CONNECTIONS }, async () => ({
    byId: await Promise.all(petIds.map((id) => call('GET', `/v1/pets/${id}`))),
    lists: await Promise.all(LISTS.map((path) => allPages<PetSeen>(call, path))),
    inventory: await call('GET', '/v1/store/inventory'),
    order: orderId === undefined ? null : await call('GET', `/v1/store/orders/${orderId}`),
    orderLists: await Promise.all(ORDER_LISTS.map((path) => allPages<{ id: number; status: string }>(call, path))),
  })));
  return rounds;
}

/** Where a list's path filters by status, that status. */
const statusIn = (path: string) => /status=(\w+)/.exec(path)?.[1];

/** Asserts that every read shows `touched`. */
function assertSeen(rounds: Awaited<ReturnType<typeof readAll>>, touched: Touched, kind: string): void {
  for (const [index, round] of rounds.entries()) {
    const where = `${kind}, connection ${index + 1}`;
    const byId = round.byId.at(-1)!;
    if (touched.pet === null) assert.equal(byId.status, 404, `${where}: get by id`);
    else {
      assert.equal(byId.status, 200, `${where}: get by id`);
      const pet = byId.body as PetSeen;
      assert.deepEqual({ name: pet.name, status: pet.status }, touched.pet, `${where}: get by id`);
    }
    for (const [at, path] of LISTS.entries()) {
      const found = round.lists[at]!.filter((pet) => pet.id === touched.petId);
      const status = statusIn(path);
      const expected = touched.pet !== null && (status === undefined || status === touched.pet.status) ? [touched.pet] : [];
      assert.deepEqual(found.map((pet) => ({ name: pet.name, status: pet.status })), expected, `${where}: ${path}`);
    }
    // No write runs between the reads of a round: the inventory counts what the lists hold.
    assert.deepEqual(round.inventory.body, Object.fromEntries(STATUSES.map((status, at) => [status, round.lists[at]!.length])), `${where}: the inventory`);
    if (touched.order !== undefined) {
      const { id, status } = touched.order;
      assert.equal((round.order!.body as { status: string }).status, status, `${where}: the order`);
      for (const [at, path] of ORDER_LISTS.entries()) {
        const listed = statusIn(path);
        const found = round.orderLists[at]!.filter((order) => order.id === id).map((order) => order.status);
        assert.deepEqual(found, listed === undefined || listed === status ? [status] : [], `${where}: ${path}`);
      }
    }
  }
}

/** The rows, grouped by the `env` their server needs (most share the default one). */
function byServer(kinds: readonly WriteKind[]): { env: Record<string, string>; kinds: WriteKind[] }[] {
  const groups = new Map<string, { env: Record<string, string>; kinds: WriteKind[] }>();
  for (const kind of kinds) {
    const env = kind.env ?? {};
    const group = groups.get(JSON.stringify(env)) ?? { env, kinds: [] };
    group.kinds.push(kind);
    groups.set(JSON.stringify(env), group);
  }
  return [...groups.values()];
}

/** src/main.ts on a fresh file with `env`, and a caller with a key of its own; stopped when the test ends. */
async function serve(t: TestContext, env: Record<string, string>): Promise<Call> {
  const databasePath = join(tempDir(t, 'pets-write-kinds-'), 'pets.db');
  const setup = openDatabase(databasePath);
  const { key } = createKeysStore(setup, { appEnv: 'development' }).create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 100_000_000, label: 'write kinds', now: Date.now() });
  setup.close();
  const server = await startMain({ DATABASE_PATH: databasePath, HOST: '127.0.0.1', APP_ENV: 'development', LOG_LEVEL: 'info', ...env });
  t.after(async () => {
    server.child.kill('SIGTERM');
    if (server.child.exitCode === null) await once(server.child, 'exit');
  });
  return caller(server.url, key);
}

for (const { name, env } of MODES) test(`every kind of write is seen by the next request through every cached answer it can change (${name})`, async (t) => {
  for (const group of byServer(WRITE_KINDS)) {
    const call = await serve(t, { ...env, ...group.env });
    for (let i = 0; i < FILLERS; i++) await createPet(call, `filler ${i}`, STATUSES[i % STATUSES.length]!);
    for (const kind of group.kinds) {
      const { petIds, make } = await kind.arrange(call);
      // Fill every cache, on every worker, with the answers as they are before the write.
      await readAll(call, petIds);
      const touched = await make(call);
      assertSeen(await readAll(call, [touched.petId], touched.order?.id), touched, kind.name);
    }
  }
});
