/**
 * The event log under `kill -9`: a real server process is killed in the middle of a burst of
 * concurrent random writes (pets created, changed, deleted; orders placed and moved), then
 * started again on the same database. Every change that was stored has its event and every event
 * its change: the events, replayed in order, rebuild exactly the pets and the orders the database
 * holds, and every acknowledged create and placement has its event. On a SQLite file and on
 * PostgreSQL.
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { join } from 'node:path';
import type { Scope } from '../../src/keys/scopes.ts';
import type { KeysStore } from '../../src/storage/keys.ts';
import { createKeysStore as createPostgresKeys } from '../../src/storage/postgres/keys-store.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore as createSqliteKeys } from '../../src/storage/sqlite/keys-store.ts';
import { assertReplayRebuilds, readFeed, seeded } from '../support/event-followers.ts';
import { killAll, startInstance, type Instance } from '../support/instances.ts';
import { tempDir } from '../support/main-process.ts';
import { openTestDatabase, postgresSkip, startPostgres, type PostgresCluster } from '../support/postgres.ts';

const WRITERS = 16;
const KILL_AFTER_ACKNOWLEDGED = 150;

interface Acknowledged {
  pets: number[];
  orders: number[];
  count: number;
}

/**
 * Random writes by `WRITERS` concurrent loops until the server stops answering; kills it with
 * SIGKILL once KILL_AFTER_ACKNOWLEDGED writes were acknowledged. Resolves with what was.
 */
async function writeUntilKilled(instance: Instance, staff: string, adopter: string, random: () => number): Promise<Acknowledged> {
  const acknowledged: Acknowledged = { pets: [], orders: [], count: 0 };
  const pick = <T>(items: readonly T[]): T | undefined => items[Math.floor(random() * items.length)];
  const call = (path: string, key: string, method: string, body?: unknown) =>
    fetch(instance.url + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  let killed = false;
  const loop = async (writer: number) => {
    for (let i = 0; !killed; i++) {
      const roll = random();
      try {
        let response: Response;
        if (roll < 0.35 || acknowledged.pets.length === 0) {
          response = await call('/v1/pets', staff, 'POST', { name: `pet ${writer}.${i}`, categoryId: 1 });
          if (response.status === 201) acknowledged.pets.push(((await response.clone().json()) as { id: number }).id);
        } else if (roll < 0.55) {
          response = await call(`/v1/pets/${pick(acknowledged.pets)}`, staff, 'PATCH', { name: `renamed ${writer}.${i}` });
        } else if (roll < 0.6) {
          response = await call(`/v1/pets/${pick(acknowledged.pets)}`, staff, 'DELETE');
        } else if (roll < 0.8) {
          response = await call('/v1/store/orders', adopter, 'POST', { petId: pick(acknowledged.pets) });
          if (response.status === 201) acknowledged.orders.push(((await response.clone().json()) as { id: number }).id);
        } else {
          const order = pick(acknowledged.orders);
          if (order === undefined) continue;
          response = await call(`/v1/store/orders/${order}`, staff, 'PATCH', { status: pick(['approved', 'completed', 'cancelled'] as const) });
        }
        await response.arrayBuffer();
        if (response.status < 300 && ++acknowledged.count === KILL_AFTER_ACKNOWLEDGED && !killed) {
          killed = true;
          instance.child.kill('SIGKILL');
        }
      } catch {
        // The connection died with the process: this loop is over.
        return;
      }
    }
  };
  await Promise.all(Array.from({ length: WRITERS }, (_, writer) => loop(writer)));
  if (instance.child.exitCode === null && instance.child.signalCode === null) await once(instance.child, 'exit');
  return acknowledged;
}

async function makeKeys(keys: Pick<KeysStore, 'create'>) {
  const make = async (scopes: Scope[]) => (await keys.create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 100_000_000, scopes, now: Date.now() })).key;
  return { staff: await make(['pets:read', 'pets:write', 'orders:write', 'orders:manage', 'events:read']), adopter: await make(['pets:read', 'orders:write', 'events:read']) };
}

/** Kills `first` under writes, starts `again` on the same database, and checks the log against what it holds. */
async function killedUnderWrites(t: TestContext, start: () => Promise<Instance>, keys: () => Promise<{ staff: string; adopter: string }>, seed: number): Promise<void> {
  const first = await start();
  t.after(() => killAll([first]));
  const { staff, adopter } = await keys();
  const acknowledged = await writeUntilKilled(first, staff, adopter, seeded(seed));
  assert.equal(first.child.signalCode, 'SIGKILL');
  const again = await start();
  t.after(() => killAll([again]));
  const events = await readFeed(again.url, staff);
  const ids = events.map((event) => event.id);
  assert.deepEqual(ids, [...new Set(ids)].sort((a, b) => a - b), 'ids unique and increasing');
  const created = new Set(events.filter((event) => event.type === 'pet.created').map((event) => event.data.id));
  const placed = new Set(events.filter((event) => event.type === 'order.placed').map((event) => event.data.id));
  assert.deepEqual(acknowledged.pets.filter((id) => !created.has(id)), [], 'every acknowledged pet has its pet.created');
  assert.deepEqual(acknowledged.orders.filter((id) => !placed.has(id)), [], 'every acknowledged order has its order.placed');
  await assertReplayRebuilds(events, again.url, staff);
  t.diagnostic(`${acknowledged.count} writes acknowledged before the kill; ${events.length} events after the restart, replayed into the store exactly`);
  assert.ok(acknowledged.count >= KILL_AFTER_ACKNOWLEDGED);
}

test('kill -9 under concurrent writes on a SQLite file: every stored change has its event, every event its change', async (t) => {
  const path = join(tempDir(t, 'pets-events-kill-'), 'pets.db');
  const env = { DATABASE_PATH: path, APP_ENV: 'staging' };
  let db: ReturnType<typeof openDatabase> | undefined;
  t.after(() => db?.close());
  await killedUnderWrites(t, () => startInstance(env), async () => makeKeys(createSqliteKeys((db = openDatabase(path)), { appEnv: 'staging' })), 9);
});

describe('on PostgreSQL', { skip: postgresSkip }, () => {
  let cluster: PostgresCluster;
  before(async () => {
    cluster = await startPostgres();
  });
  // After the test's own hooks: the instances are killed and the pool closed first.
  after(() => cluster?.remove());

  test('kill -9 under concurrent writes on PostgreSQL: every stored change has its event, every event its change', async (t) => {
    const opened = await openTestDatabase(t, cluster, { poolSize: 2 });
    const env = { DATABASE_URL: opened.url, APP_ENV: 'staging', DATABASE_POOL_SIZE: '4' };
    await killedUnderWrites(t, () => startInstance(env), () => makeKeys(createPostgresKeys(opened.sql, { appEnv: 'staging' })), 11);
  });
});
