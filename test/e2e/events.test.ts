/**
 * The event feed across real processes: three instances on one PostgreSQL database, and one
 * process with WORKERS=2 on a SQLite file. A long poll on one server is woken by a commit made on
 * another (within the second the interface allows), and under random concurrent writes on every
 * server, consumers that follow `next` on every server, and consumers of the stream that resume
 * with `Last-Event-ID` on every server, each see exactly the events they may see, once, in id
 * order; the events replayed rebuild the pets and orders the database holds. The caps on streams
 * hold across the workers of one instance, and a key revoked through another connection to the
 * database ends its streams within a second; SIGTERM ends them at once.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import type { Scope } from '../../src/keys/scopes.ts';
import type { KeysStore } from '../../src/storage/keys.ts';
import type { PostgresSql } from '../../src/storage/postgres/driver.ts';
import { createKeysStore as createPostgresKeys } from '../../src/storage/postgres/keys-store.ts';
import { blockStart, eventId } from '../../src/storage/postgres/event-log.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore as createSqliteKeys } from '../../src/storage/sqlite/keys-store.ts';
import { openStream } from '../support/event-stream.ts';
import { followWhileWriting, seeded, type LoadKey, type LoggedEvent } from '../support/event-followers.ts';
import { killAll, startInstance, withProblemsLogged, type Instance } from '../support/instances.ts';
import { openTestDatabase, postgresSkip, startPostgres, type PostgresCluster } from '../support/postgres.ts';
import { parseExposition, valueOf } from '../support/prometheus-text.ts';

const STAFF: Scope[] = ['pets:read', 'pets:write', 'orders:write', 'orders:manage', 'events:read'];
const ADOPTER: Scope[] = ['pets:read', 'orders:write', 'events:read'];

/** Keys for the load: staff, three adopters (each its own account) and a reader of events only. */
async function loadKeys(keys: Pick<KeysStore, 'create'>) {
  const make = async (scopes: Scope[]): Promise<LoadKey> => {
    const { key, record } = await keys.create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 100_000_000, scopes, now: Date.now() });
    return { key, account: record.account, manage: scopes.includes('orders:manage') };
  };
  const staff = await make(STAFF);
  const adopters = [await make(ADOPTER), await make(ADOPTER), await make(ADOPTER)];
  const reader = await make(['events:read']);
  return { staff, adopters, reader };
}

/** Waits on `waiter` (a long poll), then writes on `writer`: resolves with how long the poll took after the write was answered. */
async function wokenAcross(waiter: string, writer: string, key: string): Promise<{ status: number; events: number; afterWrite: number }> {
  const latest = await fetch(`${waiter}/v1/events?limit=100`, { headers: { authorization: `Bearer ${key}` } });
  const after = /after=(\d+)/.exec(latest.headers.get('link')!)![1];
  await latest.arrayBuffer();
  const polling = fetch(`${waiter}/v1/events?after=${after}&wait=20`, { headers: { authorization: `Bearer ${key}` } });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const created = await fetch(`${writer}/v1/pets`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"name":"Rex","categoryId":1}' });
  assert.equal(created.status, 201);
  const written = Date.now();
  const answer = await polling;
  return { status: answer.status, events: ((await answer.json()) as unknown[]).length, afterWrite: Date.now() - written };
}

/**
 * A keep-alive connection that the kernel gave to `worker` (1 or 2) of the instance, found by
 * opening connections until the worker's request count grows; its `url` is a proxy on a port of
 * this process that sends everything through that one connection.
 */
async function connectionTo(instance: Instance, worker: number): Promise<{ url: string; close(): void }> {
  const metrics = /"event":"metrics_listening","url":"([^"]+)"/.exec(instance.stdout.join('\n'))![1]!;
  const served = async () => valueOf(parseExposition(await (await fetch(`${metrics}/metrics`)).text()), 'worker_requests_total', { worker: String(worker) });
  for (let attempt = 0; attempt < 64; attempt++) {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const before = await served();
    await send(agent, `${instance.url}/healthz`);
    if (await served() > before) {
      const proxy = createServer((req, res) => {
        const forwarded = httpRequest(instance.url + req.url, { agent, method: req.method, headers: req.headers }, (answer) => {
          res.writeHead(answer.statusCode!, answer.headers);
          answer.pipe(res);
        });
        req.pipe(forwarded);
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      return { url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, close: () => { proxy.closeAllConnections(); proxy.close(); agent.destroy(); } };
    }
    agent.destroy();
  }
  throw new Error(`no connection reached worker ${worker}`);
}

function send(agent: Agent, url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    httpRequest(url, { agent }, (res) => res.resume().on('end', resolve)).on('error', reject).end();
  });
}

/**
 * Opens a stream on `url` with a key of its own, revokes the key with `revoke` (another
 * connection to the database, as the keys command is), and resolves with how long the stream
 * took to end after that.
 */
async function endedAfterRevocation(url: string, keys: Pick<KeysStore, 'create' | 'revoke'>): Promise<number> {
  const { key, record } = await keys.create({ plan: 'enterprise', perMinute: 1000, perDay: 100_000, scopes: ['events:read'], now: Date.now() });
  const open = await openStream(`${url}/v1/events`, { key });
  assert.equal(open.response.status, 200);
  // Past the first check of the key, which the revocation must not depend on.
  await new Promise((resolve) => setTimeout(resolve, 1200));
  const revoked = Date.now();
  assert.equal(await keys.revoke(record.id, revoked), true);
  await open.ended;
  return Date.now() - revoked;
}

describe('three instances on one PostgreSQL database', { skip: postgresSkip }, () => {
  let cluster: PostgresCluster;
  let sql: PostgresSql;
  const instances: Instance[] = [];

  before(async () => {
    cluster = await startPostgres();
    const opened = await openTestDatabase({ after: () => {} }, cluster, { poolSize: 2 });
    sql = opened.sql;
    const env = { DATABASE_URL: opened.url, APP_ENV: 'staging', DATABASE_POOL_SIZE: '4' };
    instances.push(...(await Promise.all([0, 1, 2].map(() => startInstance(env)))));
  });
  after(async () => {
    killAll(instances);
    await sql.end({ timeout: 1 });
    cluster.remove();
  });

  test('a long poll on one instance is answered within a second of a commit on another', async () => {
    const { staff } = await loadKeys(createPostgresKeys(sql, { appEnv: 'staging' }));
    const woken = await wokenAcross(instances[0]!.url, instances[1]!.url, staff.key);
    assert.deepEqual([woken.status, woken.events], [200, 1]);
    assert.ok(woken.afterWrite < 1000, `answered ${woken.afterWrite} ms after the write`);
  });

  test('a key revoked in the database ends its stream on an instance within a second', async () => {
    const took = await endedAfterRevocation(instances[2]!.url, createPostgresKeys(sql, { appEnv: 'staging' }));
    assert.ok(took < 1500, `ended ${took} ms after the revocation`);
  });

  test('random concurrent writes on three instances, consumers following next and the stream on all three: each sees its events once, in order; the replay rebuilds the store', async (t) => {
    const { staff, adopters, reader } = await loadKeys(createPostgresKeys(sql, { appEnv: 'staging' }));
    const figures = await followWhileWriting({
      urls: instances.map((instance) => instance.url), staff, adopters, consumers: [staff, ...adopters, reader],
      writers: 12, writesPerWriter: 60, random: seeded(27),
    }, async () => (await sql.unsafe<{ id: string; type: string; account: string | null }[]>(
      `SELECT ${eventId('f', 'e')}::text AS id, e.type, e.account FROM events e JOIN events f ON f.seq = ${blockStart('e')} WHERE f.id IS NOT NULL ORDER BY f.id, e.seq`))
      .map((row): LoggedEvent => ({ id: Number(row.id), type: row.type, account: row.account }))).catch(withProblemsLogged(instances));
    t.diagnostic(`PostgreSQL, 3 instances: ${JSON.stringify(figures)}`);
    assert.deepEqual([figures.duplicates, figures.misses, figures.outOfOrder], [0, 0, 0]);
    assert.ok(figures.writes > 300, `${figures.writes} writes made`);
  });
});

describe('WORKERS=2 on one SQLite file', () => {
  let dir: string;
  let db: DatabaseSync;
  let instance: Instance;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pets-events-'));
    const path = join(dir, 'pets.db');
    db = openDatabase(path);
    instance = await startInstance({ WORKERS: '2', APP_ENV: 'staging', DATABASE_PATH: path, METRICS_PORT: '0' });
  });
  after(() => {
    killAll([instance]);
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('a long poll on one worker is answered within a second of a commit made through the other', async () => {
    const { staff } = await loadKeys(createSqliteKeys(db, { appEnv: 'staging' }));
    const worker1 = await connectionTo(instance, 1);
    const worker2 = await connectionTo(instance, 2);
    for (const [waiter, writer] of [[worker1, worker2], [worker2, worker1]] as const) {
      const woken = await wokenAcross(waiter.url, writer.url, staff.key);
      assert.deepEqual([woken.status, woken.events], [200, 1]);
      assert.ok(woken.afterWrite < 1000, `answered ${woken.afterWrite} ms after the write`);
    }
    worker1.close();
    worker2.close();
  });

  test('a key revoked through another connection to the file (as the keys command does) ends its stream on a worker within a second', async () => {
    const took = await endedAfterRevocation(instance.url, createSqliteKeys(db, { appEnv: 'staging' }));
    assert.ok(took < 1500, `ended ${took} ms after the revocation`);
  });

  test('random concurrent writes on two workers, consumers following next and the stream: each sees its events once, in order; the replay rebuilds the store', async (t) => {
    const { staff, adopters, reader } = await loadKeys(createSqliteKeys(db, { appEnv: 'staging' }));
    const figures = await followWhileWriting({
      urls: [instance.url], staff, adopters, consumers: [staff, ...adopters, reader],
      writers: 12, writesPerWriter: 60, random: seeded(2),
    }, async () => (db.prepare('SELECT id, type, account FROM events ORDER BY id').all() as unknown as LoggedEvent[])).catch(withProblemsLogged([instance]));
    t.diagnostic(`SQLite, WORKERS=2: ${JSON.stringify(figures)}`);
    assert.deepEqual([figures.duplicates, figures.misses, figures.outOfOrder], [0, 0, 0]);
    assert.ok(figures.writes > 300, `${figures.writes} writes made`);
  });

  test('five streams per key hold across the workers, and event_streams_open sums them', async () => {
    const { reader } = await loadKeys(createSqliteKeys(db, { appEnv: 'staging' }));
    // Each stream on a connection of its own, known to reach its worker: three on 1, two on 2.
    const connections = await Promise.all([1, 1, 1, 2, 2, 1, 2].map((worker) => connectionTo(instance, worker)));
    const streams = await Promise.all(connections.slice(0, 5).map((connection) => openStream(`${connection.url}/v1/events`, { key: reader.key })));
    assert.deepEqual(streams.map((each) => each.response.status), [200, 200, 200, 200, 200]);
    for (const connection of connections.slice(5)) {
      const refused = await fetch(`${connection.url}/v1/events`, { headers: { authorization: `Bearer ${reader.key}`, accept: 'text/event-stream' } });
      assert.equal(refused.status, 429, 'a sixth, on either worker');
      assert.equal(((await refused.json()) as { code: string }).code, 'too_many_streams');
    }
    const metrics = /"event":"metrics_listening","url":"([^"]+)"/.exec(instance.stdout.join('\n'))![1]!;
    assert.equal(valueOf(parseExposition(await (await fetch(`${metrics}/metrics`)).text()), 'event_streams_open'), 5);
    for (const each of streams) each.close();
    for (const connection of connections) connection.close();
  });
});

test('SIGTERM ends the open streams at once and the process exits 0, without waiting for its grace period', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pets-events-drain-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'pets.db');
  const server = await startInstance({ APP_ENV: 'staging', DATABASE_PATH: path });
  t.after(() => killAll([server]));
  const db = openDatabase(path);
  const { reader } = await loadKeys(createSqliteKeys(db, { appEnv: 'staging' }));
  db.close();
  const streams = await Promise.all([1, 2, 3].map(() => openStream(`${server.url}/v1/events`, { key: reader.key })));
  assert.deepEqual(streams.map((each) => each.response.status), [200, 200, 200]);
  const stopping = Date.now();
  const exited = server.stop();
  await Promise.all(streams.map((each) => each.ended));
  assert.ok(Date.now() - stopping < 1000, `the streams ended ${Date.now() - stopping} ms after SIGTERM`);
  assert.equal(await exited, 0);
  assert.ok(Date.now() - stopping < 5000, `exited ${Date.now() - stopping} ms after SIGTERM (the grace period is 10 s)`);
});
