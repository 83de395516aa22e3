/**
 * Durability: an acknowledged create or order is never lost and a retried one never duplicated,
 * even when the server is killed with SIGKILL in the middle of a burst of them (one process, or
 * two workers writing through the one writer thread), or while its writer thread holds a group it
 * has committed but not yet answered; and a pet and its order never disagree.
 */
import { test, type TestContext } from 'node:test';
import type { DatabaseSync } from 'node:sqlite';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CREATES = 300;
const CONCURRENCY = 50;
const KILL_AFTER_ACKNOWLEDGED = 100;

interface Server {
  child: ChildProcess;
  url: string;
}

/**
 * Starts `node src/main.ts` on the file and resolves once it logs that it is listening; `env`
 * adds to its environment (WORKERS), `nodeOptions` go before the script (a preloaded fault), and
 * `stderr` is told each line the process writes there.
 */
async function startServer(databasePath: string, { env = {}, nodeOptions = [], stderr = () => {} }: { env?: Record<string, string>; nodeOptions?: string[]; stderr?: (line: string) => void } = {}): Promise<Server> {
  const child = spawn(process.execPath, [...nodeOptions, 'src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', DATABASE_PATH: databasePath, APP_ENV: 'development', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  createInterface({ input: child.stderr! }).on('line', stderr);
  const lines = createInterface({ input: child.stdout! });
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the server did not start within 10 s')), 10_000);
    child.once('exit', (code) => reject(new Error(`the server exited with ${code} before listening`)));
    lines.on('line', (line) => {
      if (!line.includes('"listening"')) return;
      const entry = JSON.parse(line) as { event?: string; url?: string; writer?: string };
      if (entry.event === 'listening') {
        clearTimeout(timer);
        // The mode asked for is the one that runs (WORKERS above 1 always write through the thread).
        if (env.WRITER !== undefined && entry.writer !== env.WRITER) reject(new Error(`asked for WRITER=${env.WRITER}, the server writes ${entry.writer}`));
        resolve(entry.url!);
      }
    });
  });
  return { child, url };
}

interface Answer {
  status: number;
  body: string;
  replayed: string | undefined;
}

function post(server: Server, agent: Agent, key: string, idempotencyKey: string, body: string, path = '/v1/pets'): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${server.url}${path}`, {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey, 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(chunks).toString(), replayed: res.headers['idempotent-replayed'] as string | undefined }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

function get(server: Server, agent: Agent, key: string, path: string): Promise<{ body: string; link: string | undefined }> {
  return new Promise((resolve, reject) => {
    request(`${server.url}${path}`, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        assert.equal(res.statusCode, 200);
        resolve({ body: Buffer.concat(chunks).toString(), link: res.headers.link as string | undefined });
      });
    }).on('error', reject).end();
  });
}

/** The text of every pet object stored, following the next links from the first page. */
async function allPets(server: Server, agent: Agent, key: string): Promise<string[]> {
  const pets: string[] = [];
  let path: string | undefined = '/v1/pets?limit=100';
  while (path !== undefined) {
    const page = await get(server, agent, key, path);
    // Pets never contain "},{" outside a name, and our names are plain: split the array text.
    if (page.body !== '[]') pets.push(...page.body.slice(2, -2).split('},{').map((pet) => `{${pet}}`));
    path = page.link?.match(/^<([^>]+)>; rel="next"$/)?.[1];
  }
  return pets;
}

/** Each request's body: names unique, categoryIds above 2^53 written as exact digits. */
function bodyOf(i: number): string {
  const status = ['', ',"status":"available"', ',"status":"pending"', ',"status":"sold"'][i % 4];
  return `{"name":"crash ${i}","categoryId":${9007199254740993n + BigInt(i)}${status}}`;
}

/** A fresh database file for a kill test, with an enterprise key; the servers started on it are killed and the folder removed when the test ends. */
function killTestDatabase(t: TestContext, prefix: string): { databasePath: string; children: ChildProcess[]; key: string; setup: DatabaseSync } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const databasePath = join(dir, 'pets.db');
  const children: ChildProcess[] = [];
  t.after(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });
  const setup = openDatabase(databasePath);
  const { key } = createKeysStore(setup, { appEnv: 'development' }).create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 100_000_000, label: 'kill test', now: Date.now() });
  return { databasePath, children, key, setup };
}

/** Every way the writes are made: the writer thread, inline (one core), and two workers on the thread. */
const WRITERS = [{ WORKERS: '1', WRITER: 'thread' }, { WORKERS: '1', WRITER: 'inline' }, { WORKERS: '2', WRITER: 'thread' }];

for (const env of WRITERS) test(`SIGKILL during concurrent creates loses no acknowledged pet, and retries replay instead of creating (WORKERS=${env.WORKERS}, WRITER=${env.WRITER})`, async (t) => {
  const { databasePath, children, key, setup } = killTestDatabase(t, 'pets-kill-');
  setup.close();

  // 1. A burst of creates; the server is killed as soon as some have been acknowledged.
  const first = await startServer(databasePath, { env });
  children.push(first.child);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let acknowledgedCount = 0;
  const outcomes = await Promise.allSettled(Array.from({ length: CREATES }, async (_, i) => {
    const answer = await post(first, agent, key, `create-${i}`, bodyOf(i));
    if (answer.status === 201 && ++acknowledgedCount === KILL_AFTER_ACKNOWLEDGED) first.child.kill('SIGKILL');
    return answer;
  }));
  agent.destroy();
  if (first.child.exitCode === null && first.child.signalCode === null) await once(first.child, 'exit');
  assert.equal(first.child.signalCode, 'SIGKILL');
  const acknowledged = new Map<number, string>();
  for (const [i, outcome] of outcomes.entries()) {
    if (outcome.status === 'fulfilled') {
      assert.equal(outcome.value.status, 201, outcome.value.body);
      acknowledged.set(i, outcome.value.body);
    }
  }
  assert.ok(acknowledged.size >= KILL_AFTER_ACKNOWLEDGED);
  assert.ok(acknowledged.size < CREATES, 'the kill came part-way through');

  // 2. Restarted on the same file, every acknowledged pet is there with its exact body.
  const second = await startServer(databasePath, { env });
  children.push(second.child);
  const again = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  t.after(() => again.destroy());
  const survivors = new Set(await allPets(second, again, key));
  for (const [i, body] of acknowledged) assert.ok(survivors.has(body), `acknowledged create ${i} (${body}) was lost`);

  // 3. Retrying every request: acknowledged ones replay; the others are created at most once.
  const retries = await Promise.all(Array.from({ length: CREATES }, (_, i) => post(second, again, key, `create-${i}`, bodyOf(i))));
  for (const [i, answer] of retries.entries()) {
    assert.equal(answer.status, 201, `retry ${i}: ${answer.body}`);
    if (acknowledged.has(i)) {
      assert.equal(answer.replayed, 'true', `retry ${i} of an acknowledged create`);
      assert.equal(answer.body, acknowledged.get(i));
    }
  }
  const committedUnacknowledged = retries.filter((answer, i) => !acknowledged.has(i) && answer.replayed === 'true').length;
  t.diagnostic(`${acknowledged.size} of ${CREATES} acknowledged before the kill; ${committedUnacknowledged} more were committed unacknowledged and replayed`);
  const final = await allPets(second, again, key);
  assert.equal(final.length, CREATES, 'each request created exactly one pet');
  assert.equal(new Set(final.map((pet) => JSON.parse(pet).name)).size, CREATES);
  for (const [i, answer] of retries.entries()) assert.ok(final.includes(answer.body), `retry ${i} answered a pet that is stored`);

  second.child.kill('SIGTERM');
  await once(second.child, 'exit');
});

for (const writer of ['thread', 'inline']) test(`SIGKILL during concurrent orders loses no acknowledged order, retries replay, and every pet agrees with its order (WRITER=${writer})`, async (t) => {
  const env = { WRITER: writer };
  const { databasePath, children, key, setup } = killTestDatabase(t, 'pets-kill-orders-');
  const PETS = 200;
  createPetsStore(setup).insertMany(Array.from({ length: PETS }, (_, i) => ({ name: `held ${i}`, categoryId: 1n, status: 'available' as const })));
  setup.close();
  const orderOf = (i: number) => `{"petId":${i + 1}}`;

  const first = await startServer(databasePath, { env });
  children.push(first.child);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  let acknowledgedCount = 0;
  const outcomes = await Promise.allSettled(Array.from({ length: PETS }, async (_, i) => {
    const answer = await post(first, agent, key, `order-${i}`, orderOf(i), '/v1/store/orders');
    if (answer.status === 201 && ++acknowledgedCount === 60) first.child.kill('SIGKILL');
    return answer;
  }));
  agent.destroy();
  if (first.child.exitCode === null && first.child.signalCode === null) await once(first.child, 'exit');
  const acknowledged = new Map<number, string>();
  for (const [i, outcome] of outcomes.entries()) {
    if (outcome.status === 'fulfilled') {
      assert.equal(outcome.value.status, 201, outcome.value.body);
      acknowledged.set(i, outcome.value.body);
    }
  }
  assert.ok(acknowledged.size >= 60 && acknowledged.size < PETS, `${acknowledged.size} acknowledged: the kill came part-way through`);

  // The file as the kill left it: each pet is pending exactly when an open order holds it.
  const check = openDatabase(databasePath);
  t.after(() => check.close());
  const disagreements = () => check.prepare(`
    SELECT count(*) AS n FROM pets p
     WHERE (p.status = 'pending') <> EXISTS (SELECT 1 FROM orders o WHERE o.pet_id = p.id AND o.status IN ('placed', 'approved'))`).get() as { n: number };
  assert.equal(disagreements().n, 0);

  const second = await startServer(databasePath, { env });
  children.push(second.child);
  const again = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  t.after(() => again.destroy());
  for (const [i, body] of acknowledged) {
    const { id } = JSON.parse(body) as { id: number };
    assert.equal((await get(second, again, key, `/v1/store/orders/${id}`)).body, body, `acknowledged order ${i}`);
  }
  const retries = await Promise.all(Array.from({ length: PETS }, (_, i) => post(second, again, key, `order-${i}`, orderOf(i), '/v1/store/orders')));
  for (const [i, answer] of retries.entries()) {
    assert.equal(answer.status, 201, `retry ${i}: ${answer.body}`);
    if (acknowledged.has(i)) assert.deepEqual([answer.replayed, answer.body], ['true', acknowledged.get(i)], `retry ${i} of an acknowledged order`);
  }
  const rows = check.prepare("SELECT count(*) AS orders, count(DISTINCT pet_id) AS pets FROM orders WHERE status = 'placed'").get() as { orders: number; pets: number };
  assert.deepEqual({ ...rows }, { orders: PETS, pets: PETS }, 'each request placed exactly one order');
  assert.equal(disagreements().n, 0);
  second.child.kill('SIGTERM');
  await once(second.child, 'exit');
});

/**
 * Preloaded into every thread of the server: in the thread that writes (the writer thread, the
 * one started with the writer's shared memory; with WRITER=inline, the main thread), once COMMIT has returned for the group holding a pet named 'hold',
 * it says so on stderr and holds the thread before the group is answered.
 */
const HOLD_AFTER_COMMIT = 'data:text/javascript,' + encodeURIComponent(`
  import { isMainThread, workerData } from 'node:worker_threads';
  import { writeSync } from 'node:fs';
  import { DatabaseSync, StatementSync } from 'node:sqlite';
  if (isMainThread ? process.env.WRITER === 'inline' : workerData?.memory?.journal) {
    let holding = false;
    const get = StatementSync.prototype.get;
    StatementSync.prototype.get = function (...values) {
      if (values[0] === 'hold') holding = true;
      return get.apply(this, values);
    };
    const exec = DatabaseSync.prototype.exec;
    DatabaseSync.prototype.exec = function (sql) {
      const result = exec.call(this, sql);
      if (sql === 'COMMIT' && holding) {
        writeSync(2, 'committed, not answered\\n');
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
      }
      return result;
    };
  }
`);

for (const writer of ['thread', 'inline']) test(`SIGKILL while the writer holds a group it has committed but not answered: the group is stored, and its retries replay it (WRITER=${writer})`, async (t) => {
  const env = { WRITER: writer };
  const { databasePath, children, key, setup } = killTestDatabase(t, 'pets-kill-writer-');
  setup.close();

  const held = Promise.withResolvers<void>();
  const first = await startServer(databasePath, { env, nodeOptions: ['--import', HOLD_AFTER_COMMIT], stderr: (line) => line === 'committed, not answered' && held.resolve() });
  children.push(first.child);
  const agent = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  // Acknowledged creates first, then a burst around the one named 'hold'.
  const before = await Promise.all(Array.from({ length: 20 }, (_, i) => post(first, agent, key, `before-${i}`, bodyOf(i))));
  assert.ok(before.every((answer) => answer.status === 201));
  const names = ['hold', ...Array.from({ length: 30 }, (_, i) => `beside ${i}`)];
  const burst = Promise.allSettled(names.map((name) => post(first, agent, key, `burst-${name.replace(" ", "-")}`, `{"name":"${name}","categoryId":1}`)));
  await held.promise;
  first.child.kill('SIGKILL');
  await once(first.child, 'exit');
  agent.destroy();
  const unanswered = (await burst).filter((outcome) => outcome.status === 'rejected').length;
  assert.ok(unanswered >= 1, 'at least the held group went unanswered');

  const check = openDatabase(databasePath);
  t.after(() => check.close());
  assert.equal((check.prepare("SELECT count(*) AS n FROM pets WHERE name = 'hold'").get() as { n: number }).n, 1, 'committed before the kill: on disk');

  const second = await startServer(databasePath, { env });
  children.push(second.child);
  const again = new Agent({ keepAlive: true, maxSockets: CONCURRENCY });
  t.after(() => again.destroy());
  const retried = await Promise.all(names.map((name) => post(second, again, key, `burst-${name.replace(" ", "-")}`, `{"name":"${name}","categoryId":1}`)));
  assert.deepEqual(retried.filter((answer) => answer.status !== 201), []);
  assert.equal(retried[0]!.replayed, 'true', 'the held create replays: it was made once');
  const counts = check.prepare('SELECT name, count(*) AS n FROM pets GROUP BY name HAVING n > 1').all();
  assert.deepEqual(counts, [], 'no request made two pets');
  for (let i = 0; i < 20; i++) assert.equal((check.prepare('SELECT count(*) AS n FROM pets WHERE name = ?').get(`crash ${i}`) as { n: number }).n, 1);
  second.child.kill('SIGTERM');
  await once(second.child, 'exit');
});
