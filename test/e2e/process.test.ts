/** The process edge, run for real as a child process: start, first key, signals, bad config. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { MAIN, startMain, tempDir } from '../support/main-process.ts';

test('a first development start creates one free key with every scope, prints it once on stderr, and it works', async (t) => {
  const dir = tempDir(t);
  const env = { APP_ENV: 'development', DATABASE_PATH: join(dir, 'dev.db') };
  const first = await startMain(env);
  const key = /(pk_test_[A-Za-z0-9_-]+)/.exec(first.output().stderr)?.[1];
  assert.ok(key, first.output().stderr);
  const response = await fetch(`${first.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('x-ratelimit-limit'), '60');
  first.child.kill('SIGTERM');
  const [code] = await once(first.child, 'exit');
  assert.equal(code, 0);
  assert.ok(!first.output().stdout.includes(key!), 'the key is never logged on stdout');

  const second = await startMain(env);
  assert.doesNotMatch(second.output().stderr, /pk_test_/);
  second.child.kill('SIGINT');
  assert.deepEqual(await once(second.child, 'exit'), [0, null]);
  // The newcomer's key may try every operation: all six scopes, the only key made without asking.
  const db = openDatabase(env.DATABASE_PATH);
  const keys = db.prepare('SELECT plan, label, scopes FROM api_keys').all().map((row) => ({ ...row }));
  db.close();
  assert.deepEqual(keys, [{ plan: 'free', label: 'development', scopes: 'pets:read pets:write orders:write orders:manage events:read webhooks:manage' }]);
});

test('production never creates a key', async (t) => {
  const dir = tempDir(t);
  const server = await startMain({ APP_ENV: 'production', DATABASE_PATH: join(dir, 'prod.db') });
  server.child.kill('SIGTERM');
  await once(server.child, 'exit');
  assert.doesNotMatch(server.output().stderr, /pk_/);
  const db = openDatabase(join(dir, 'prod.db'));
  assert.equal((db.prepare('SELECT count(*) AS n FROM api_keys').get() as { n: number }).n, 0);
  db.close();
});

test('SIGTERM lets a request in flight finish, saves limiter state and exits 0', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'dev.db');
  const server = await startMain({ APP_ENV: 'development', DATABASE_PATH: path });
  const key = /(pk_test_[A-Za-z0-9_-]+)/.exec(server.output().stderr)![1]!;
  // A create whose body has not fully arrived yet is in flight when the signal comes.
  const { request } = await import('node:http');
  const body = JSON.stringify({ name: 'Rex', categoryId: 1 });
  const pending = new Promise<{ status: number; text: string; connection: string | undefined }>((resolve, reject) => {
    const req = request(`${server.url}/v1/pets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk)).on('end', () => resolve({ status: res.statusCode!, text, connection: res.headers.connection }));
    });
    req.on('error', reject);
    req.write(body.slice(0, 5));
    setTimeout(() => {
      server.child.kill('SIGTERM');
      setTimeout(() => req.end(body.slice(5)), 200);
    }, 100);
  });
  const answer = await pending;
  assert.equal(answer.status, 201);
  assert.equal(answer.connection, 'close');
  const [code] = await once(server.child, 'exit');
  assert.equal(code, 0);
  assert.match(server.output().stdout, /"event":"stopped"/);
  const db = openDatabase(path);
  assert.equal((db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 1);
  const saved = db.prepare('SELECT minute_tokens FROM rate_limit_callers').all() as { minute_tokens: number }[];
  assert.equal(saved.length, 1, 'the key\'s bucket was saved at shutdown');
  assert.ok(saved[0]!.minute_tokens < 60);
  db.close();
});

test('an invalid variable stops the server with one line naming it and exit code 1', () => {
  const invalid = [
    ['PORT', 'abc'], ['APP_ENV', 'prod'], ['LOG_LEVEL', 'loud'], ['TRUST_PROXY', 'yes'], ['CORS_ALLOWED_ORIGINS', 'https://shop.example/'],
    ['METRICS_PORT', 'x'], ['METRICS_PORT', '8080'], ['MAX_CONNECTIONS_PER_ADDRESS', '0'],
    ['WEBHOOK_ALLOWED_NETWORKS', '10.0.0.0/33'], ['WEBHOOK_RETRY_SCHEDULE', '5,0'],
  ] as const;
  for (const [name, value] of invalid) {
    const result = spawnSync(process.execPath, [MAIN], { env: { PATH: process.env.PATH ?? '', [name]: value, DATABASE_PATH: ':memory:' }, encoding: 'utf8', timeout: 10_000 });
    assert.equal(result.status, 1, name);
    const lines = result.stderr.trim().split('\n');
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0]!, new RegExp(name));
  }
});

test('the server creates the database folder 0700 and its files 0600; a start on wider modes logs one warning', async (t) => {
  const previous = process.umask(0o022); // the child inherits it: what a default shell gives
  t.after(() => process.umask(previous));
  const dir = tempDir(t);
  const folder = join(dir, 'state');
  const path = join(folder, 'prod.db');
  const modeOf = (file: string) => (statSync(file).mode & 0o777).toString(8);
  const first = await startMain({ APP_ENV: 'production', DATABASE_PATH: path });
  t.after(() => first.child.kill('SIGKILL')); // if an assertion fails before the SIGTERM below
  assert.equal(modeOf(folder), '700');
  for (const file of [path, `${path}-wal`, `${path}-shm`]) assert.equal(modeOf(file), '600', file);
  first.child.kill('SIGTERM');
  await once(first.child, 'exit');
  assert.doesNotMatch(first.output().stdout, /database_permissions/);

  chmodSync(folder, 0o755);
  chmodSync(path, 0o644);
  const second = await startMain({ APP_ENV: 'production', DATABASE_PATH: path });
  t.after(() => second.child.kill('SIGKILL'));
  second.child.kill('SIGTERM');
  await once(second.child, 'exit');
  const warnings = second.output().stdout.split('\n').filter((line) => line.includes('database_permissions'));
  assert.equal(warnings.length, 1, second.output().stdout);
  const warning = JSON.parse(warnings[0]!);
  assert.equal(warning.level, 'warn');
  assert.match(warning.found, new RegExp(`${folder} 0755`));
  assert.match(warning.found, new RegExp(`${path} 0644`));
});

test('METRICS_PORT starts a second listener on HOST serving GET /metrics only; the API port does not serve it', async (t) => {
  const dir = tempDir(t);
  const server = await startMain({ APP_ENV: 'development', DATABASE_PATH: join(dir, 'dev.db'), METRICS_PORT: '0' });
  const metricsUrl = /"event":"metrics_listening","url":"([^"]+)"/.exec(server.output().stdout)?.[1];
  assert.ok(metricsUrl, 'the metrics listener is up before the API logs "listening"');
  assert.match(metricsUrl!, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.notEqual(metricsUrl, server.url);
  const key = /(pk_test_[A-Za-z0-9_-]+)/.exec(server.output().stderr)![1]!;
  assert.equal((await fetch(`${server.url}/v1/pets`, { headers: { authorization: `Bearer ${key}` } })).status, 200);
  assert.equal((await fetch(`${server.url}/metrics`)).status, 404, 'not on the API port');

  const scrape = await fetch(`${metricsUrl}/metrics`);
  assert.equal(scrape.status, 200);
  assert.equal(scrape.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  const text = await scrape.text();
  assert.match(text, /^http_requests_total\{method="GET",route="\/v1\/pets",status="200"\} 1$/m);
  assert.match(text, /^http_requests_total\{method="GET",route="other",status="404"\} 1$/m);
  assert.match(text, /^process_start_time_seconds \d+(\.\d+)?$/m);
  assert.equal((await fetch(`${metricsUrl}/v1/pets`)).status, 404);

  server.child.kill('SIGTERM');
  assert.deepEqual(await once(server.child, 'exit'), [0, null]);
});

/** GET `path` on `url` with the given Host header (fetch does not let a page or a test set it). */
async function withHost(url: string, path: string, host: string): Promise<{ status: number; body: string }> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    request(`${url}${path}`, { headers: { host, connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => resolve({ status: res.statusCode!, body }));
    }).on('error', reject).end();
  });
}

test('the metrics listener answers only a Host that is an IP address, localhost or a name of ALLOWED_HOSTS; the API checks Host once ALLOWED_HOSTS is set', async (t) => {
  // A DNS-rebinding page (its name resolving to 127.0.0.1 a moment later) could read /metrics.
  const dir = tempDir(t);
  const plain = await startMain({ APP_ENV: 'development', DATABASE_PATH: join(dir, 'a.db'), METRICS_PORT: '0' });
  t.after(() => plain.child.kill('SIGKILL'));
  const metricsUrl = /"event":"metrics_listening","url":"([^"]+)"/.exec(plain.output().stdout)![1]!;
  const port = new URL(metricsUrl).port;
  const rebound = await withHost(metricsUrl, '/metrics', `attacker.example:${port}`);
  assert.equal(rebound.status, 400);
  assert.equal(JSON.parse(rebound.body).code, 'bad_request');
  for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, '10.0.0.7']) assert.equal((await withHost(metricsUrl, '/metrics', host)).status, 200, host);
  assert.equal((await withHost(plain.url, '/healthz', 'attacker.example')).status, 200, 'unset, the API answers any Host');
  plain.child.kill('SIGTERM');
  assert.deepEqual(await once(plain.child, 'exit'), [0, null]);

  const listed = await startMain({ APP_ENV: 'development', DATABASE_PATH: join(dir, 'b.db'), METRICS_PORT: '0', ALLOWED_HOSTS: 'pets.example,metrics.pets.example' });
  t.after(() => listed.child.kill('SIGKILL'));
  const listedMetrics = /"event":"metrics_listening","url":"([^"]+)"/.exec(listed.output().stdout)![1]!;
  assert.equal((await withHost(listedMetrics, '/metrics', 'metrics.pets.example:9464')).status, 200);
  assert.equal((await withHost(listed.url, '/healthz', 'PETS.example.')).status, 200);
  assert.equal((await withHost(listed.url, '/healthz', '127.0.0.1')).status, 200);
  const refused = await withHost(listed.url, '/docs', 'attacker.example');
  assert.equal(refused.status, 400);
  assert.match(refused.body, /ALLOWED_HOSTS/);
  listed.child.kill('SIGTERM');
  assert.deepEqual(await once(listed.child, 'exit'), [0, null]);
  assert.match(listed.output().stdout, /"event":"client_error","code":"bad_request","nodeCode":"HOST"/);
});

test('without METRICS_PORT there is no metrics listener', async (t) => {
  const dir = tempDir(t);
  const server = await startMain({ APP_ENV: 'development', DATABASE_PATH: join(dir, 'dev.db') });
  server.child.kill('SIGTERM');
  await once(server.child, 'exit');
  assert.doesNotMatch(server.output().stdout, /metrics_listening/);
});

test('CORS_ALLOWED_ORIGINS reaches the server: an allowed origin may read, another may not', async (t) => {
  const dir = tempDir(t);
  const server = await startMain({ APP_ENV: 'production', DATABASE_PATH: join(dir, 'prod.db'), CORS_ALLOWED_ORIGINS: 'https://shop.example' });
  t.after(() => server.child.kill('SIGKILL')); // if an assertion fails before the SIGTERM below
  const allowed = await fetch(`${server.url}/healthz`, { headers: { origin: 'https://shop.example' } });
  assert.equal(allowed.headers.get('access-control-allow-origin'), 'https://shop.example');
  const other = await fetch(`${server.url}/healthz`, { headers: { origin: 'https://evil.example' } });
  assert.equal(other.headers.get('access-control-allow-origin'), null);
  // Stopped and gone before its folder is removed. Stopped in an `after` hook, it was still
  // running when tempDir's hook (added first, so run first) removed the folder, and the folder
  // was left behind with a prod.db.
  server.child.kill('SIGTERM');
  assert.deepEqual(await once(server.child, 'exit'), [0, null]);
});

test('SIGTERM under keep-alive load loses no request: every request sent is answered, then the server exits 0', { timeout: 30_000 }, async (t) => {
  // Closing idle keep-alive connections at once cut requests already on their way: wrk with 8
  // connections saw 14 read errors on one SIGTERM.
  const { Agent, request } = await import('node:http');
  const dir = tempDir(t);
  const server = await startMain({ APP_ENV: 'development', DATABASE_PATH: join(dir, 'dev.db') });
  t.after(() => server.child.kill('SIGKILL'));
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  t.after(() => agent.destroy());
  const outcomes = { answered: 0, refused: 0, cut: [] as string[] };
  const exited = once(server.child, 'exit');
  let stopping = false;
  void exited.then(() => (stopping = true));
  const get = () => new Promise<void>((resolve) => {
    const req = request(`${server.url}/healthz`, { agent }, (res) => {
      res.resume().on('end', () => {
        outcomes.answered++;
        resolve();
      });
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      // Refused before anything was sent: the listener is closed, always safe to retry.
      if (error.code === 'ECONNREFUSED') outcomes.refused++;
      else outcomes.cut.push(error.code ?? error.message);
      resolve();
    });
    req.end();
  });
  const clients = Array.from({ length: 8 }, async () => {
    while (!stopping) await get();
  });
  // Let the load run, then signal in the middle of it.
  while (outcomes.answered < 400) await get();
  server.child.kill('SIGTERM');
  const [code] = await exited;
  await Promise.all(clients);
  assert.equal(code, 0);
  assert.deepEqual(outcomes.cut, [], `requests cut after being sent (${outcomes.answered} answered, ${outcomes.refused} refused before being sent)`);
  t.diagnostic(`${outcomes.answered} answered, ${outcomes.refused} refused at connect, ${outcomes.cut.length} cut`);
});
