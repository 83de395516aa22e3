/**
 * WORKERS=2: one real server process (`src/main.ts`) whose two worker threads
 * listen on one port over one SQLite file. Every guarantee of the single process must hold for
 * the port: exact limits and bans (one limiter, in the primary thread), idempotency, changes
 * seen at once everywhere, the per-address connection cap, summed metrics, the drain.
 *
 * Which worker serves a connection is the kernel's choice (SO_REUSEPORT hashes each connection's
 * addresses and ports), so the suite does not hope for a spread: it opens 32 keep-alive
 * connections and finds, from the per-worker request count of /metrics, which worker holds each
 * one. All 32 on one worker has a chance of 2 x 2^-32; the first test fails then, saying so.
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { Agent, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import type { DatabaseSync } from 'node:sqlite';
import { killAll, startInstance, type Instance } from '../support/instances.ts';
import { MAIN } from '../support/main-process.ts';
import { parseExposition, samplesOf, valueOf } from '../support/prometheus-text.ts';
import { promtoolCheckMetrics } from '../support/promtool.ts';
import { loopbackAddress, needsLoopbackRange } from '../support/loopback.ts';
import { openRaw } from '../support/raw-http.ts';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One keep-alive connection: every request sent through it travels on the same socket. */
interface Connection {
  send(path: string, init?: { method?: string; headers?: Record<string, string>; body?: string }): Promise<Answer>;
  close(): void;
}

function openConnection(url: string, localAddress?: string): Connection {
  const agent = new Agent({ keepAlive: true, maxSockets: 1, ...(localAddress !== undefined ? { localAddress } : {}) });
  return {
    send(path, init = {}) {
      return new Promise((resolve, reject) => {
        const req = httpRequest(url + path, { agent, method: init.method ?? 'GET', headers: init.headers ?? {} }, (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => {
            resolve({ status: res.statusCode!, headers: res.headers as Record<string, string>, body });
          });
        });
        req.on('error', reject);
        req.end(init.body);
      });
    },
    close: () => agent.destroy(),
  };
}

const CONNECTIONS = 32;
const CAP = 40;

describe('WORKERS=2: two worker threads on one port and one SQLite file', () => {
  let dir: string;
  let path: string;
  let env: Record<string, string>;
  let instance: Instance;
  let metricsUrl: string;
  let db: DatabaseSync;
  const connections: Connection[] = [];
  /** The worker (1 or 2) that serves each connection. */
  const workerOf: number[] = [];
  /** The key that the ban test gets banned. */
  let bannedKey = '';
  /** A connection served by `worker` (1 or 2). */
  const onWorker = (worker: number) => connections[workerOf.indexOf(worker)]!;

  const start = async () => {
    instance = await startInstance(env);
    metricsUrl = /"event":"metrics_listening","url":"([^"]+)"/.exec(instance.stdout.join('\n'))![1]!;
  };
  const scrape = async () => parseExposition(await (await fetch(`${metricsUrl}/metrics`)).text());

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pets-workers-'));
    path = join(dir, 'pets.db');
    db = openDatabase(path);
    env = { WORKERS: '2', APP_ENV: 'staging', DATABASE_PATH: path, METRICS_PORT: '0', MAX_CONNECTIONS_PER_ADDRESS: String(CAP) };
    await start();
  });
  after(() => {
    for (const connection of connections) connection.close();
    killAll([instance]);
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const newKey = (limits: { perMinute: number; perDay: number }) =>
    createKeysStore(db, { appEnv: 'staging' }).create({ plan: 'enterprise', ...limits, now: Date.now() }).key;
  const auth = (key: string) => ({ authorization: `Bearer ${key}` });

  test('the kernel spreads connections over both workers, and /metrics says which worker served each', async () => {
    for (let i = 0; i < CONNECTIONS; i++) {
      const connection = openConnection(instance.url);
      connections.push(connection);
      const before = await scrape();
      assert.equal((await connection.send('/healthz')).status, 200);
      const after = await scrape();
      const grew = [1, 2].filter((worker) => valueOf(after, 'worker_requests_total', { worker: String(worker) }) > valueOf(before, 'worker_requests_total', { worker: String(worker) }));
      assert.equal(grew.length, 1, 'exactly one worker answered');
      workerOf.push(grew[0]!);
    }
    const spread = [1, 2].map((worker) => workerOf.filter((served) => served === worker).length);
    assert.ok(spread[0]! > 0 && spread[1]! > 0, `both workers hold connections (${spread.join(' / ')}); all ${CONNECTIONS} on one has a chance of 2^-31`);
  });

  test('limits are exact across workers: 240 concurrent requests with one key get exactly 60 x 200, the rest 429 with the contract headers', async () => {
    // A day bucket of 60 refills one token per 24 minutes: the count is exact whatever the timing.
    const key = newKey({ perMinute: 100_000, perDay: 60 });
    const answers = await Promise.all(Array.from({ length: 240 }, (_, i) => connections[i % CONNECTIONS]!.send('/v1/pets', { headers: auth(key) })));
    const ok = answers.filter((answer) => answer.status === 200);
    const refused = answers.filter((answer) => answer.status === 429);
    assert.equal(ok.length, 60);
    assert.equal(refused.length, 180);
    // One shared bucket: each remaining count from 59 down to 0 is handed out exactly once.
    assert.deepEqual(ok.map((answer) => Number(answer.headers['x-ratelimit-remaining'])).sort((a, b) => b - a), Array.from({ length: 60 }, (_, i) => 59 - i));
    for (const answer of refused) {
      assert.match(answer.headers['retry-after']!, /^[1-9][0-9]*$/);
      assert.equal(answer.headers['x-ratelimit-limit'], '60');
      assert.equal(answer.headers['x-ratelimit-remaining'], '0');
      assert.match(answer.headers['x-ratelimit-reset']!, /^[0-9]+$/);
      assert.match(answer.headers['ratelimit']!, /"day";r=0;/);
      assert.equal(JSON.parse(answer.body).status, 429);
    }
    // RATE_LIMIT_BAN_THRESHOLD is 30: the 30th refusal bans the key, counted across both workers.
    const codes = refused.map((answer) => JSON.parse(answer.body).code as string);
    assert.equal(codes.filter((code) => code === 'rate_limited').length, 29);
    assert.equal(codes.filter((code) => code === 'temporarily_banned').length, 151);
  });

  test('a ban reached across workers holds on every worker', async () => {
    const key = (bannedKey = newKey({ perMinute: 100_000, perDay: 5 }));
    // 5 accepted, then 30 refusals alternating between the two workers: the 30th bans the key.
    const statuses: number[] = [];
    for (let i = 0; i < 35; i++) statuses.push((await onWorker(1 + (i % 2)).send('/v1/pets', { headers: auth(key) })).status);
    assert.deepEqual(statuses, [...Array(5).fill(200), ...Array(30).fill(429)]);
    for (const worker of [1, 2]) {
      const answer = await onWorker(worker).send('/v1/store/inventory', { headers: auth(key) });
      assert.equal(answer.status, 429, `worker ${worker}`);
      assert.equal(JSON.parse(answer.body).code, 'temporarily_banned', `worker ${worker}`);
      assert.ok(Number(answer.headers['retry-after']) > 800, 'the ban of RATE_LIMIT_BAN_SECONDS (900)');
    }
  });

  test('20 concurrent creates with one Idempotency-Key over both workers create exactly one pet; the others replay it or are told it is in flight; creates beside them are all stored', async () => {
    const key = newKey({ perMinute: 100_000, perDay: 100_000 });
    for (let round = 0; round < 5; round++) {
      const name = `Idem ${round}`;
      const body = JSON.stringify({ name, categoryId: 7 });
      // Two other clients' creates (one with a key of its own) go in the same burst, into the
      // same batches: another request's conflict must not touch them.
      const beside = [null, `beside-${round}`].map((idempotencyKey, i) => connections[(i * 11 + round + 3) % CONNECTIONS]!.send('/v1/pets', {
        method: 'POST', body: JSON.stringify({ name: `Beside ${round}`, categoryId: 1 }),
        headers: { ...auth(key), 'content-type': 'application/json', ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
      }));
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => connections[(i * 7 + round) % CONNECTIONS]!.send('/v1/pets', {
        method: 'POST', body, headers: { ...auth(key), 'content-type': 'application/json', 'idempotency-key': `one-key-${round}` },
      })));
      assert.deepEqual((await Promise.all(beside)).map((answer) => answer.status), [201, 201]);
      const besideRows = db.prepare('SELECT count(*) AS n FROM pets WHERE name = ?').get(`Beside ${round}`) as { n: number };
      assert.equal(besideRows.n, 2, `round ${round}: both creates beside the race are stored`);
      const firsts = answers.filter((answer) => answer.status === 201 && answer.headers['idempotent-replayed'] === undefined);
      assert.equal(firsts.length, 1, `round ${round}: one creation answered as such`);
      for (const answer of answers) {
        if (answer.status === 201) assert.equal(answer.body, firsts[0]!.body, 'a replay is the first answer');
        else assert.deepEqual([answer.status, JSON.parse(answer.body).code], [409, 'idempotency_key_in_flight'], answer.body);
      }
      const rows = db.prepare('SELECT count(*) AS n FROM pets WHERE name = ?').get(name) as { n: number };
      assert.equal(rows.n, 1, `round ${round}: one pet row`);
    }
  });

  test('a PATCH on one connection is seen at once by a GET on every other, on both workers', async () => {
    const key = newKey({ perMinute: 100_000, perDay: 100_000 });
    const created = await connections[0]!.send('/v1/pets', { method: 'POST', body: JSON.stringify({ name: 'v0', categoryId: 1 }), headers: { ...auth(key), 'content-type': 'application/json' } });
    const { id } = JSON.parse(created.body) as { id: number };
    // Every connection reads the pet (and a list page) first, so each worker has them cached.
    for (const connection of connections) {
      assert.equal((await connection.send(`/v1/pets/${id}`, { headers: auth(key) })).status, 200);
      assert.equal((await connection.send(`/v1/pets?limit=100`, { headers: auth(key) })).status, 200);
    }
    for (let round = 1; round <= 4; round++) {
      const writer = onWorker(1 + (round % 2));
      const changed = await writer.send(`/v1/pets/${id}`, { method: 'PATCH', body: JSON.stringify({ name: `v${round}` }), headers: { ...auth(key), 'content-type': 'application/merge-patch+json' } });
      assert.equal(changed.status, 200);
      for (const [index, connection] of connections.entries()) {
        const byId = JSON.parse((await connection.send(`/v1/pets/${id}`, { headers: auth(key) })).body) as { name: string };
        assert.equal(byId.name, `v${round}`, `connection ${index} on worker ${workerOf[index]}, by id`);
        const page = JSON.parse((await connection.send(`/v1/pets?limit=100`, { headers: auth(key) })).body) as { id: number; name: string }[];
        assert.equal(page.find((pet) => pet.id === id)?.name, `v${round}`, `connection ${index} on worker ${workerOf[index]}, in the list`);
      }
    }
  });

  test('under concurrent writes from both workers, every read that starts after a write\'s answer sees it, on either worker', async () => {
    const key = newKey({ perMinute: 1_000_000, perDay: 1_000_000 });
    const json = { ...auth(key), 'content-type': 'application/json' };
    const patchHeaders = { ...auth(key), 'content-type': 'application/merge-patch+json' };
    const other = (connection: number) => connections[workerOf.indexOf(workerOf[connection] === 1 ? 2 : 1)]!;
    const made = await Promise.all(Array.from({ length: 8 }, (_, i) => connections[i]!.send('/v1/pets', { method: 'POST', body: JSON.stringify({ name: `Busy ${i}`, categoryId: 1 }), headers: json })));
    const ids = made.map((answer) => (JSON.parse(answer.body) as { id: number }).id);
    const first = Math.min(...ids) - 1;
    // Both workers cache every pet and the pages that hold them.
    for (const connection of connections) {
      for (const id of ids) assert.equal((await connection.send(`/v1/pets/${id}`, { headers: auth(key) })).status, 200);
      assert.equal((await connection.send(`/v1/pets?limit=100&cursor=${Buffer.from(`after:${first}`).toString('base64url')}`, { headers: auth(key) })).status, 200);
    }
    for (let round = 1; round <= 5; round++) {
      // Each pet changed by a connection of one worker, a pet created by each connection of the
      // first eight: all at once; each answer is checked at once on a connection of the other worker.
      await Promise.all([
        ...ids.map(async (id, i) => {
          const changed = await connections[i]!.send(`/v1/pets/${id}`, { method: 'PATCH', body: JSON.stringify({ name: `Busy ${i} r${round}` }), headers: patchHeaders });
          assert.equal(changed.status, 200);
          const reader = other(i);
          assert.equal(JSON.parse((await reader.send(`/v1/pets/${id}`, { headers: auth(key) })).body).name, `Busy ${i} r${round}`, `pet ${id}, round ${round}, by id`);
          const page = JSON.parse((await reader.send(`/v1/pets?limit=100&cursor=${Buffer.from(`after:${first}`).toString('base64url')}`, { headers: auth(key) })).body) as { id: number; name: string }[];
          assert.equal(page.find((pet) => pet.id === id)?.name, `Busy ${i} r${round}`, `pet ${id}, round ${round}, in the list`);
        }),
        ...ids.map(async (_, i) => {
          const createdNow = await connections[i + 8]!.send('/v1/pets', { method: 'POST', body: JSON.stringify({ name: `New ${i} r${round}`, categoryId: 1 }), headers: json });
          assert.equal(createdNow.status, 201);
          const { id } = JSON.parse(createdNow.body) as { id: number };
          const last = JSON.parse((await other(i + 8).send(`/v1/pets?limit=100&cursor=${Buffer.from(`after:${id - 1}`).toString('base64url')}`, { headers: auth(key) })).body) as { id: number }[];
          assert.equal(last[0]?.id, id, `a new pet is on the last page of the other worker at once (round ${round})`);
        }),
      ]);
    }
  });

  test('keys scopes, run as a command beside the server, applies to the next request on every connection of both workers, both ways', async () => {
    const { key, record } = createKeysStore(db, { appEnv: 'staging' }).create({
      plan: 'enterprise', perMinute: 100_000, perDay: 100_000, scopes: ['pets:read', 'orders:manage'], now: Date.now(),
    });
    const statuses = async () => Promise.all(connections.map(async (connection) => {
      const answer = await connection.send('/v1/store/orders', { headers: auth(key) });
      return answer.status === 403 ? `403 ${JSON.parse(answer.body).code} ${answer.headers['www-authenticate']}` : String(answer.status);
    }));
    const refused = '403 insufficient_scope Bearer realm="pets", error="insufficient_scope", scope="orders:write"';
    // Every connection uses the key first, so that each worker has it cached.
    assert.deepEqual(await statuses(), connections.map(() => '200'));
    const keys = (...args: string[]) => spawnSync(process.execPath, ['src/cli/keys.ts', ...args], { cwd: join(import.meta.dirname, '..', '..'), env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' });
    const narrowed = keys('scopes', record.id, 'pets:read');
    assert.equal(narrowed.status, 0, narrowed.stderr);
    assert.deepEqual(await statuses(), connections.map(() => refused), 'narrowed on both workers at once');
    const widened = keys('scopes', record.id, 'pets:read,orders:write');
    assert.equal(widened.status, 0, widened.stderr);
    assert.deepEqual(await statuses(), connections.map(() => '200'), 'widened on both workers at once');
  });

  test('50 concurrent orders for one pet over both workers: exactly one 201; the pet is pending and the inventory counts it on every connection at once', async () => {
    const store = createKeysStore(db, { appEnv: 'staging' });
    const adopters = Array.from({ length: 5 }, () =>
      store.create({ plan: 'enterprise', perMinute: 100_000, perDay: 100_000, scopes: ['pets:read', 'orders:write'], now: Date.now() }).key);
    const staff = newKey({ perMinute: 100_000, perDay: 100_000 });
    const json = (key: string) => ({ ...auth(key), 'content-type': 'application/json' });
    for (let round = 0; round < 3; round++) {
      const created = await connections[round]!.send('/v1/pets', { method: 'POST', body: JSON.stringify({ name: `Adopt ${round}`, categoryId: 1 }), headers: json(staff) });
      const { id } = JSON.parse(created.body) as { id: number };
      // Every connection reads the pet and the inventory first, so each worker has them cached.
      const before = JSON.parse((await connections[0]!.send('/v1/store/inventory', { headers: auth(staff) })).body) as Record<string, number>;
      for (const connection of connections) assert.equal(JSON.parse((await connection.send(`/v1/pets/${id}`, { headers: auth(staff) })).body).status, 'available');
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => connections[(i * 5 + round) % CONNECTIONS]!.send('/v1/store/orders', {
        method: 'POST', body: JSON.stringify({ petId: id }), headers: json(adopters[i % adopters.length]!),
      })));
      assert.deepEqual(answers.map((answer) => answer.status).sort(), [201, ...Array(49).fill(409)], `round ${round}`);
      for (const answer of answers.filter((each) => each.status === 409)) assert.equal(JSON.parse(answer.body).code, 'pet_not_available');
      for (const [index, connection] of connections.entries()) {
        const pet = JSON.parse((await connection.send(`/v1/pets/${id}`, { headers: auth(staff) })).body) as { status: string };
        assert.equal(pet.status, 'pending', `connection ${index} on worker ${workerOf[index]}`);
        const inventory = JSON.parse((await connection.send('/v1/store/inventory', { headers: auth(staff) })).body) as Record<string, number>;
        assert.deepEqual(inventory, { ...before, available: before.available! - 1, pending: before.pending! + 1 }, `connection ${index}`);
      }
      const rows = db.prepare("SELECT count(*) AS n FROM orders WHERE pet_id = ? AND status = 'placed'").get(id) as { n: number };
      assert.equal(rows.n, 1, `round ${round}: one order row`);
    }
  });

  test('the per-address connection cap counts the connections of both workers', async (t) => {
    if (!(await needsLoopbackRange(t))) return;
    const address = loopbackAddress(77);
    const held: Connection[] = [];
    t.after(() => held.forEach((connection) => connection.close()));
    const before = await scrape();
    for (let i = 0; i < CAP; i++) {
      const connection = openConnection(instance.url, address);
      held.push(connection);
      assert.equal((await connection.send('/healthz')).status, 200, `connection ${i + 1} of ${CAP}`);
    }
    const after = await scrape();
    const served = [1, 2].map((worker) => valueOf(after, 'worker_requests_total', { worker: String(worker) }) - valueOf(before, 'worker_requests_total', { worker: String(worker) }));
    assert.ok(served[0]! > 0 && served[1]! > 0, `the ${CAP} connections are on both workers (${served.join(' / ')}), so neither worker alone reached the cap`);
    const extra = await openRaw(instance.url, { localAddress: address });
    extra.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    const refused = await extra.response;
    assert.equal(refused.status, 503);
    assert.equal(JSON.parse(refused.body).code, 'unavailable');
    assert.equal(refused.headers['retry-after'], '1');
    // Another address is still served.
    assert.equal((await connections[0]!.send('/healthz')).status, 200);
  });

  test('/metrics sums both workers: every request is counted once, on the worker that answered it', async (t) => {
    const text = await (await fetch(`${metricsUrl}/metrics`)).text();
    const exposition = parseExposition(text);
    const total = samplesOf(exposition, 'http_requests_total').reduce((sum, sample) => sum + sample.value, 0);
    const byWorker = [1, 2].map((worker) => valueOf(exposition, 'worker_requests_total', { worker: String(worker) }));
    assert.ok(byWorker[0]! > 0 && byWorker[1]! > 0, byWorker.join(' / '));
    assert.equal(byWorker[0]! + byWorker[1]!, total);
    // The first test sent one /healthz per connection, the cap test CAP more and one after.
    assert.ok(valueOf(exposition, 'http_requests_total', { method: 'GET', route: '/healthz', status: '200' }) >= CONNECTIONS + 1);
    assert.equal(valueOf(exposition, 'pets_created_total'), 19 + 8 + 40, 'five idempotent creates, the ten beside them, the PATCH test\'s pet, the concurrent test\'s 8 and 40 and the orders test\'s three, whichever worker made them');
    assert.equal(valueOf(exposition, 'orders_total', { status: 'placed' }), 3, 'one order of each of the orders test\'s rounds');
    assert.ok(valueOf(exposition, 'idempotent_replays_total') > 0);
    assert.equal(valueOf(exposition, 'rate_limit_rejections_total', { code: 'temporarily_banned' }), 151 + 1 + 2);
    const verdict = promtoolCheckMetrics(t, text);
    if (verdict !== null) assert.equal(verdict.status, 0, verdict.output);
  });

  test('50 concurrent placements by one account over both workers: exactly MAX_OPEN_ORDERS_PER_ACCOUNT (3) are placed, the rest 409; the file agrees', async (t) => {
    const { key, record } = createKeysStore(db, { appEnv: 'staging' }).create({
      plan: 'enterprise', perMinute: 100_000, perDay: 100_000, scopes: ['pets:read', 'orders:write'], now: Date.now(),
    });
    const insert = db.prepare("INSERT INTO pets (name, category_id, status) VALUES (?, 1, 'available') RETURNING id");
    const petIds = Array.from({ length: 50 }, (_, i) => (insert.get(`capped ${i}`) as { id: number }).id);
    const answers = await Promise.all(petIds.map((petId, i) => connections[i % CONNECTIONS]!.send('/v1/store/orders', {
      method: 'POST', body: JSON.stringify({ petId }), headers: { ...auth(key), 'content-type': 'application/json' },
    })));
    const placed = answers.filter((answer) => answer.status === 201);
    const refused = answers.filter((answer) => answer.status === 409);
    assert.deepEqual([placed.length, refused.length], [3, 47]);
    t.diagnostic(`50 placements raced by one account over two workers: ${placed.length} placed, ${refused.length} too_many_open_orders`);
    for (const answer of refused) assert.equal(JSON.parse(answer.body).code, 'too_many_open_orders');
    const served = new Set(answers.map((_, i) => workerOf[i % CONNECTIONS]));
    assert.deepEqual([...served].sort(), [1, 2], 'the placements came through both workers');
    const open = db.prepare("SELECT count(*) AS n FROM orders WHERE account = ? AND status IN ('placed', 'approved')").get(record.account) as { n: number };
    const pending = db.prepare("SELECT count(*) AS n FROM pets WHERE name LIKE 'capped %' AND status = 'pending'").get() as { n: number };
    assert.deepEqual([open.n, pending.n], [3, 3]);
  });

  test('a hold that ends is seen by both workers within a second: the primary\'s sweep frees the pet through the writer thread', async (t) => {
    const { key } = createKeysStore(db, { appEnv: 'staging' }).create({
      plan: 'enterprise', perMinute: 100_000, perDay: 100_000, scopes: ['pets:read', 'orders:write'], now: Date.now(),
    });
    const staff = newKey({ perMinute: 100_000, perDay: 100_000 });
    const { id: petId } = JSON.parse((await connections[0]!.send('/v1/pets', {
      method: 'POST', body: JSON.stringify({ name: 'Held briefly', categoryId: 1 }), headers: { ...auth(staff), 'content-type': 'application/json' },
    })).body) as { id: number };
    const { id } = JSON.parse((await connections[1]!.send('/v1/store/orders', {
      method: 'POST', body: JSON.stringify({ petId }), headers: { ...auth(key), 'content-type': 'application/json' },
    })).body) as { id: number };
    // The hold is made to end 300 ms from now (the server's hold is 48 h): the sweep is what is tried.
    const end = Date.now() + 300;
    db.prepare('UPDATE orders SET expires_at = ? WHERE id = ?').run(end, id);
    const seen = await Promise.all([1, 2].map(async (worker) => {
      const connection = onWorker(worker);
      for (;;) {
        const pet = JSON.parse((await connection.send(`/v1/pets/${petId}`, { headers: auth(staff) })).body) as { status: string };
        if (pet.status === 'available') return Date.now() - end;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    }));
    for (const late of seen) assert.ok(late >= 0 && late <= 1000, `seen ${seen.join(' and ')} ms after expiresAt on workers 1 and 2`);
    const row = db.prepare('SELECT status, updated_at, expires_at FROM orders WHERE id = ?').get(id) as { status: string; updated_at: number; expires_at: number | null };
    assert.deepEqual({ ...row }, { status: 'cancelled', updated_at: end, expires_at: null });
    t.diagnostic(`expiry seen ${seen[0]} ms (worker 1) and ${seen[1]} ms (worker 2) after expiresAt`);
  });

  test('both workers log to one stdout in whole lines: one JSON object per line, one access line per request answered', async () => {
    const answered = samplesOf(await scrape(), 'http_requests_total').reduce((sum, sample) => sum + sample.value, 0);
    const accessLines = () => instance.stdout.filter((line) => line.includes('"requestId"') && line.includes('"status"')).length;
    // The lines of the last requests may still be on their way through the pipe.
    for (let tries = 0; accessLines() < answered && tries < 100; tries++) await new Promise((resolve) => setImmediate(resolve));
    for (const line of instance.stdout) assert.doesNotThrow(() => JSON.parse(line), `not one whole JSON line: ${line.slice(0, 200)}`);
    assert.equal(accessLines(), answered);
  });

  test('SIGTERM lets a request in flight finish on its worker, saves the limiter and exits 0; a restart keeps every bucket and ban', async () => {
    const key = newKey({ perMinute: 100_000, perDay: 3 });
    for (let i = 0; i < 3; i++) assert.equal((await connections[i]!.send('/v1/pets', { headers: auth(key) })).status, 200);
    // A create whose body has not fully arrived when the signal comes.
    const body = JSON.stringify({ name: 'In flight', categoryId: 1 });
    const keyForCreate = newKey({ perMinute: 100_000, perDay: 100_000 });
    const raw = await openRaw(instance.url);
    raw.write(`POST /v1/pets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${keyForCreate}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 5)}`);
    // Let the request reach its worker's pipeline (past the drain check) before the signal, as
    // process.test.ts does for one process.
    await new Promise((resolve) => setTimeout(resolve, 200));
    instance.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 100));
    raw.write(body.slice(5));
    const answer = await raw.response;
    assert.equal(answer.status, 201);
    const [code] = (await once(instance.child, 'exit')) as [number | null];
    assert.equal(code, 0);
    assert.deepEqual(instance.stderr, []);
    assert.ok(instance.stdout.some((line) => line.includes('"event":"stopped"')));
    assert.equal((db.prepare('SELECT count(*) AS n FROM pets WHERE name = ?').get('In flight') as { n: number }).n, 1);
    for (const connection of connections) connection.close();

    await start();
    const again = openConnection(instance.url);
    connections.push(again);
    const spent = await again.send('/v1/pets', { headers: auth(key) });
    assert.equal(spent.status, 429, 'the day bucket of 3 is still empty after the restart');
    assert.equal(spent.headers['x-ratelimit-remaining'], '0');
    const banned = await again.send('/v1/pets', { headers: auth(bannedKey) });
    assert.equal(JSON.parse(banned.body).code, 'temporarily_banned', 'the ban survived the restart');
  });
});

test('a bad WORKERS stops the server at start with one line naming it, and exit code 1', () => {
  for (const value of ['0', 'many', '2x']) {
    const result = spawnSync(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', PORT: '0', WORKERS: value }, encoding: 'utf8', timeout: 15_000 });
    assert.equal(result.status, 1, value);
    assert.equal(result.stdout, '');
    assert.match(result.stderr, /^WORKERS [^\n]*\n$/, value);
  }
  const memory = spawnSync(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', PORT: '0', WORKERS: '2', DATABASE_PATH: ':memory:' }, encoding: 'utf8', timeout: 15_000 });
  assert.equal(memory.status, 1);
  assert.match(memory.stderr, /^WORKERS [^\n]*\n$/);
});

test('with WORKERS, a fixed PORT that another socket holds fails the start with one line, even when that socket set SO_REUSEPORT too', async (t) => {
  const { createServer } = await import('node:net');
  const stranger = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => stranger.listen({ port: 0, host: '127.0.0.1', reusePort: true }, resolve));
  t.after(() => stranger.close());
  const port = (stranger.address() as { port: number }).port;
  const dir = mkdtempSync(join(tmpdir(), 'pets-workers-port-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const result = spawnSync(process.execPath, [MAIN], {
    env: { PATH: process.env.PATH ?? '', PORT: String(port), WORKERS: '2', APP_ENV: 'staging', DATABASE_PATH: join(dir, 'pets.db') },
    encoding: 'utf8', timeout: 15_000,
  });
  assert.equal(result.status, 1);
  assert.equal(result.stderr, `cannot listen on 127.0.0.1:${port}: EADDRINUSE\n`);
  assert.doesNotMatch(result.stdout, /"event":"listening"/);
});

/**
 * A server with WORKERS=2 on a fresh file, started with `fault` preloaded into every thread
 * (worker threads inherit --import): a fault from outside the code under test. Resolves once it
 * listens; `exited` resolves with its exit code, `output` with what it wrote.
 */
/**
 * What the process printed, its log lines without the stack frames they may carry (an unknown
 * error's line names its frames, never its message: docs/operations.md, "Logs"): the error's
 * message or a stack printed whole would show here.
 */
function printedBesidesFrames(stdout: string, stderr: string): string {
  const lines = stdout.split('\n').filter(Boolean).map((line) => {
    const { frames, ...rest } = JSON.parse(line) as { frames?: unknown };
    assert.ok(frames === undefined || (Array.isArray(frames) && frames.every((frame) => /^at [^\n]*$/.test(String(frame)) && !String(frame).includes('data:'))), line);
    return JSON.stringify(rest);
  });
  return `${lines.join('\n')}\n${stderr}`;
}

async function startWithFault(t: TestContext, fault: string, env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'pets-workers-crash-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'pets.db');
  const db = openDatabase(path);
  t.after(() => db.close());
  const { key } = createKeysStore(db, { appEnv: 'staging' }).create({ plan: 'enterprise', perMinute: 100_000, perDay: 100, now: Date.now() });
  const child = spawn(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(fault)}`, MAIN], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', WORKERS: '2', APP_ENV: 'staging', DATABASE_PATH: path, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const exited = (once(child, 'exit') as Promise<[number | null]>).then(([code]) => code);
  const urls = await new Promise<{ api: string; metrics: string | undefined }>((resolve) => {
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
      const api = /"event":"listening","url":"([^"]+)"/.exec(stdout)?.[1];
      const metrics = /"event":"metrics_listening","url":"([^"]+)"/.exec(stdout)?.[1];
      if (api && (metrics || env.METRICS_PORT === undefined)) resolve({ api, metrics });
    });
  });
  return { db, key, urls, exited, output: () => ({ stdout, stderr }) };
}

test('a worker that crashes takes the whole process down: exit 1, one line on stderr, the limiter saved first', async (t) => {
  // Worker 2 throws when asked for its metrics.
  const { db, key, urls, exited, output } = await startWithFault(t, `import { isMainThread, parentPort, workerData } from "node:worker_threads";
    if (!isMainThread && workerData?.start?.index === 2) parentPort.on("message", (m) => { if (m.type === "counts") throw new TypeError("injected"); });`,
  { METRICS_PORT: '0' });
  const answer = await fetch(`${urls.api}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(answer.status, 200);
  await fetch(`${urls.metrics}/metrics`).catch(() => null);
  assert.equal(await exited, 1);
  const { stdout, stderr } = output();
  assert.equal(stderr, 'worker 2 of 2 crashed (TypeError); stopping the server\n');
  assert.doesNotMatch(printedBesidesFrames(stdout, stderr), /injected|at .*\.ts:/, 'no message or stack of the error');
  const saved = db.prepare('SELECT day_tokens FROM rate_limit_callers WHERE caller LIKE ?').get('key:%') as { day_tokens: number } | undefined;
  assert.equal(saved?.day_tokens, 99, 'the request\'s token was saved before the exit');
});

test('a writer thread that crashes takes the whole process down: exit 1, one line on stderr, nothing of the error', async (t) => {
  // The writer thread (the one started with the writer's memory) throws once asked to insert a
  // pet named 'crash'.
  const { db, key, urls, exited, output } = await startWithFault(t, `import { isMainThread, workerData } from 'node:worker_threads';
    import { StatementSync } from 'node:sqlite';
    if (!isMainThread && workerData?.memory?.journal) {
      const get = StatementSync.prototype.get;
      StatementSync.prototype.get = function (...values) {
        if (values[0] === 'crash') setImmediate(() => { throw new TypeError('injected'); });
        return get.apply(this, values);
      };
    }`);
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  assert.equal((await fetch(`${urls.api}/v1/pets`, { method: 'POST', headers, body: '{"name":"fine","categoryId":1}' })).status, 201);
  await fetch(`${urls.api}/v1/pets`, { method: 'POST', headers, body: '{"name":"crash","categoryId":1}' }).catch(() => null);
  assert.equal(await exited, 1);
  const { stdout, stderr } = output();
  assert.equal(stderr, 'the writer thread crashed (TypeError); stopping the server\n');
  assert.doesNotMatch(printedBesidesFrames(stdout, stderr), /injected|at .*\.ts:/, 'no message or stack of the error');
  assert.equal((db.prepare("SELECT count(*) AS n FROM pets WHERE name = 'fine'").get() as { n: number }).n, 1);
});
