/**
 * Webhook deliveries made by real processes (`node src/main.ts`):
 * - with WORKERS=2 on a SQLite file, the primary thread delivers what either worker wrote, and
 *   /metrics counts the attempt and the pending deliveries;
 * - they are durable and attempted by one instance at a time, processes killed with SIGKILL:
 * - on a SQLite file, killed while every delivery waits for a receiver that is down: after the
 *   restart, with the receiver up, every one arrives (at least once);
 * - with three instances on one PostgreSQL database, one killed in the middle: every delivery
 *   arrives, and the receiver, which answers slowly and records the attempts it holds open for
 *   each webhook-id, never sees two at once.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { closeDatabase, openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore as createSqliteKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import { createWebhooksStore as createSqliteWebhooksStore } from '../../src/storage/sqlite/webhooks-store.ts';
import { createKeysStore as createPostgresKeysStore } from '../../src/storage/postgres/keys-store.ts';
import { createWebhooksStore as createPostgresWebhooksStore } from '../../src/storage/postgres/webhooks-store.ts';
import { EVENT_TYPES } from '../../src/storage/events.ts';
import type { KeysStore } from '../../src/storage/keys.ts';
import type { WebhooksStore } from '../../src/storage/webhooks.ts';
import { generateSecret } from '../../src/webhooks/signature.ts';
import { killAll, startInstance, type Instance } from '../support/instances.ts';
import { tempDir } from '../support/main-process.ts';
import { openTestDatabase, postgresSkip, startPostgres } from '../support/postgres.ts';
import { startReceiver, type Received } from '../support/webhook-receivers.ts';
import { parseExposition, valueOf } from '../support/prometheus-text.ts';

const PETS = 40;
/** Long enough that no delivery is abandoned while the receiver is down and the server restarts. */
const SCHEDULE = Array(20).fill(2).join(',');

/** A key and a webhook of its account, to `url`, for pet.created only. */
async function keyAndWebhook(keys: KeysStore, webhooks: WebhooksStore, url: string) {
  const { key, record } = await keys.create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 100_000_000, now: Date.now() });
  await webhooks.create({ account: record.account, url, types: [EVENT_TYPES[0]], orders: 'own', secret: generateSecret(), now: Date.now(), maxPerAccount: 10 });
  return key;
}

async function createPets(urls: readonly string[], key: string, count: number): Promise<void> {
  await Promise.all(Array.from({ length: count }, async (_, i) => {
    const response = await fetch(`${urls[i % urls.length]}/v1/pets`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: `P${i}`, categoryId: 1, status: 'available' }),
    });
    assert.equal(response.status, 201);
  }));
}

/**
 * A receiver that answers 204 after `delayMs`, counting per webhook-id the attempts it holds open
 * and how often one arrived while another of its id was open.
 */
async function recordingReceiver(t: TestContext, delayMs: number, port?: number) {
  const open = new Map<string, number>();
  let overlaps = 0;
  const receiver = await startReceiver(t, (request: Received, response: ServerResponse) => {
    const id = String(request.headers['webhook-id']);
    const holding = open.get(id) ?? 0;
    if (holding > 0) overlaps++;
    open.set(id, holding + 1);
    const done = () => open.set(id, open.get(id)! - 1);
    response.on('close', done);
    setTimeout(() => {
      response.writeHead(204);
      response.end();
    }, delayMs).unref();
  }, port === undefined ? {} : { port });
  return {
    receiver,
    overlaps: () => overlaps,
    ids: () => new Set(receiver.requests.map((r) => String(r.headers['webhook-id']))),
  };
}

async function until(what: string, ready: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) assert.fail(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

test('with WORKERS=2 the primary delivers what the workers wrote, verified by the receiver; /metrics counts the attempts and what is pending', async (t) => {
  const dir = tempDir(t, 'pets-webhooks-workers-');
  const path = join(dir, 'pets.db');
  let status = 503;
  const receiver = await startReceiver(t, (_request, response) => {
    response.writeHead(status);
    response.end();
  });
  const db = openDatabase(path);
  const key = await keyAndWebhook(createSqliteKeysStore(db, { appEnv: 'development' }), createSqliteWebhooksStore(db), `http://127.0.0.1:${receiver.port}/hooks`);
  closeDatabase(db);
  const instance = await startInstance({
    DATABASE_PATH: path, APP_ENV: 'development', WORKERS: '2', METRICS_PORT: '0', WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_RETRY_SCHEDULE: '1',
  });
  t.after(() => killAll([instance]));
  const metricsUrl = /"event":"metrics_listening","url":"([^"]+)"/.exec(instance.stdout.join('\n'))![1]!;
  const scrape = async () => parseExposition(await (await fetch(`${metricsUrl}/metrics`)).text());
  await createPets([instance.url], key, 4);
  await until('every delivery attempted once', () => receiver.requests.length >= 4, 10_000);
  status = 204;
  await until('every delivery arrived', () => new Set(receiver.requests.filter((r) => r !== undefined).map((r) => r.headers['webhook-id'])).size === 4 && receiver.requests.length >= 8, 10_000);
  // Counted once recorded; the gauge every 5 s.
  let exposition = await scrape();
  const deadline = Date.now() + 10_000;
  while ((valueOf(exposition, 'webhook_attempts_total', { outcome: 'success' }) < 4 || valueOf(exposition, 'webhook_deliveries_pending') !== 0) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    exposition = await scrape();
  }
  assert.equal(valueOf(exposition, 'webhook_attempts_total', { outcome: 'http_status' }), 4);
  assert.equal(valueOf(exposition, 'webhook_attempts_total', { outcome: 'success' }), 4);
  assert.equal(valueOf(exposition, 'webhook_deliveries_pending'), 0);
  assert.equal(await instance.stop(), 0);
});

test('a SQLite server killed with SIGKILL while every delivery waits for a receiver that is down delivers each after its restart', async (t) => {
  const dir = tempDir(t, 'pets-webhooks-kill-');
  const path = join(dir, 'pets.db');
  // A port that nothing listens on: the receiver is down, until it listens there.
  const closed = createServer().listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const { port } = closed.address() as AddressInfo;
  closed.close();
  await once(closed, 'close');
  const instances: Instance[] = [];
  t.after(() => killAll(instances));
  const db = openDatabase(path);
  const key = await keyAndWebhook(createSqliteKeysStore(db, { appEnv: 'development' }), createSqliteWebhooksStore(db), `http://127.0.0.1:${port}/hooks`);
  closeDatabase(db);
  const env = { DATABASE_PATH: path, APP_ENV: 'development', WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_RETRY_SCHEDULE: SCHEDULE };

  const first = await startInstance(env);
  instances.push(first);
  await createPets([first.url], key, PETS);
  await until('a failed attempt is logged', () => first.stdout.some((line) => line.includes('"webhook_attempt_failed"')), 10_000);
  first.child.kill('SIGKILL');
  await new Promise((resolve) => first.child.once('exit', resolve));

  const file = openDatabase(path);
  const pending = (file.prepare('SELECT count(*) AS n FROM webhook_deliveries').get() as { n: number }).n;
  closeDatabase(file);
  assert.equal(pending, PETS, 'every delivery waits, none lost');

  const { receiver, ids } = await recordingReceiver(t, 0, port);
  const second = await startInstance(env);
  instances.push(second);
  // A claim of the killed process is taken again once its lease (30 s) has ended.
  await until('every delivery arrived', () => ids().size === PETS, 45_000);
  const figures = { pending, delivered: ids().size, requests: receiver.requests.length, duplicates: receiver.requests.length - ids().size };
  t.diagnostic(`SQLite kill: ${JSON.stringify(figures)}`);
  await second.stop();
});

test('three PostgreSQL instances, one killed with SIGKILL in the middle: every delivery arrives, and never two attempts of one at once', { skip: postgresSkip }, async (t) => {
  const cluster = await startPostgres();
  t.after(() => cluster.remove());
  const { sql, url } = await openTestDatabase(t, cluster, { poolSize: 2 });
  const { receiver, overlaps, ids } = await recordingReceiver(t, 300);
  const key = await keyAndWebhook(createPostgresKeysStore(sql, { appEnv: 'staging' }), createPostgresWebhooksStore(sql), `http://127.0.0.1:${receiver.port}/hooks`);
  const env = { DATABASE_URL: url, APP_ENV: 'staging', DATABASE_POOL_SIZE: '4', WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_RETRY_SCHEDULE: SCHEDULE };
  const instances = await Promise.all([0, 1, 2].map(() => startInstance(env)));
  t.after(() => killAll(instances));

  await createPets(instances.map((instance) => instance.url), key, PETS);
  await until('some deliveries arrived', () => receiver.requests.length >= 5, 10_000);
  instances[0]!.child.kill('SIGKILL');
  await until('every delivery arrived', () => ids().size === PETS, 45_000);
  // The killed instance's claims (attempts it had in flight, which may have arrived but were
  // never recorded) are taken by another instance once their lease (30 s) has ended.
  let pending = -1;
  const deadline = Date.now() + 45_000;
  while (pending !== 0 && Date.now() < deadline) {
    pending = Number((await sql<[{ n: string }]>`SELECT count(*)::text AS n FROM webhook_deliveries`)[0].n);
    if (pending !== 0) await new Promise((resolve) => setTimeout(resolve, 250));
  }
  assert.equal(pending, 0, 'nothing left pending');
  const figures = { delivered: ids().size, requests: receiver.requests.length, duplicates: receiver.requests.length - ids().size, overlaps: overlaps() };
  t.diagnostic(`PostgreSQL kill: ${JSON.stringify(figures)}`);
  assert.equal(overlaps(), 0, 'no delivery attempted by two instances at once');
  await Promise.all(instances.slice(1).map((instance) => instance.stop()));
});
