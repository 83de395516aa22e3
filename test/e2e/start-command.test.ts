/**
 * `npm start`'s entry (src/start.js), run for real on a copy of the checkout: the compile cache
 * is private, and a checkout where it cannot be made still starts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import { checkoutCopy, startMain, tempDir } from '../support/main-process.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

const checkout = (t: { after(fn: () => void): void }) => checkoutCopy(t, 'pets-start-');

/** Starts the checkout's src/start.js, checks one answer, stops it; returns its listening line and stderr. */
async function startAndStop(dir: string, env: Record<string, string> = {}): Promise<{ compileCache: string | null; stderr: string }> {
  const server = await startMain({ APP_ENV: 'production', DATABASE_PATH: ':memory:', ...env }, join(dir, 'src', 'start.js'));
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
  server.child.kill('SIGTERM');
  assert.deepEqual(await once(server.child, 'exit'), [0, null]);
  const { stdout, stderr } = server.output();
  const line = stdout.split('\n').find((text) => text.includes('"event":"listening"'))!;
  return { compileCache: (JSON.parse(line) as { compileCache: string | null }).compileCache, stderr };
}

test('a start creates its compile cache in node_modules/.cache, private (0700), and fills it', async (t) => {
  const dir = checkout(t);
  const folder = join(dir, 'node_modules', '.cache', 'animal-adoption-store');
  const { compileCache } = await startAndStop(dir);
  assert.ok(compileCache?.startsWith(folder + '/'), String(compileCache));
  assert.equal(statSync(folder).mode & 0o777, 0o700);
  assert.ok(readdirSync(compileCache!).length > 10, 'one entry per module at least');
  // The next start uses the same folder.
  assert.equal((await startAndStop(dir)).compileCache, compileCache);
});

test('a checkout where the cache folder cannot be made still starts, without the cache', async (t) => {
  const dir = checkout(t);
  mkdirSync(join(dir, 'node_modules'));
  // A file where the folder should be: mkdir fails even for root, as on a read-only checkout.
  writeFileSync(join(dir, 'node_modules', '.cache'), '');
  assert.equal((await startAndStop(dir)).compileCache, null);
});

test('worker threads (WORKERS=2) read their modules from the same cache', async (t) => {
  const dir = checkout(t);
  const env = { WORKERS: '2', DATABASE_PATH: join(dir, 'pets.db') };
  const first = await startAndStop(dir, env);
  assert.ok(first.compileCache?.startsWith(join(dir, 'node_modules', '.cache', 'animal-adoption-store') + '/'), String(first.compileCache));
  // Node's own debug log of the cache (pinned Node 24): only a worker thread loads worker.ts.
  const second = await startAndStop(dir, { ...env, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' });
  assert.match(second.stderr, /retrieving transpile cache for StrippedTypeScript \S*\/src\/cluster\/worker\.ts\.\.\.success/);
});

test('npm start passes SIGTERM on to the server: it drains, exits 0, and the port is free', { timeout: 20_000, skip: process.env.npm_execpath === undefined ? 'run through npm (npm test) to test npm start' : false }, async (t) => {
  // npm ran the script through sh, which died of the SIGTERM npm passed on, and the server was
  // left running and listening without anyone to stop it.
  const dir = checkout(t);
  const { spawn } = await import('node:child_process');
  const { symlinkSync } = await import('node:fs');
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  const npm = spawn(process.execPath, [process.env.npm_execpath!, 'start'], {
    cwd: dir,
    env: { PATH: `${join(ROOT, 'node_modules', '.bin')}:${process.env.PATH ?? ''}`, APP_ENV: 'production', DATABASE_PATH: ':memory:', PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => npm.kill('SIGKILL'));
  let stdout = '';
  const url = await new Promise<string>((resolve, reject) => {
    npm.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
      const match = /"event":"listening","url":"([^"]+)"/.exec(stdout);
      if (match) resolve(match[1]!);
    });
    npm.once('exit', (code) => reject(new Error(`npm exited ${code}`)));
  });
  assert.equal((await fetch(`${url}/healthz`, { headers: { connection: 'close' } })).status, 200);
  npm.kill('SIGTERM');
  assert.deepEqual(await once(npm, 'exit'), [0, null]);
  assert.match(stdout, /"event":"stopped"/, 'the server drained and stopped');
  await assert.rejects(fetch(`${url}/healthz`), 'nothing listens any more');
});

test('a fresh clone starts without a permissions warning: the data/ folder git made 0755 is made 0700 by the first start', async (t) => {
  // The repository keeps data/ (the project's layout has it), so git creates it 0755; every start
  // of a fresh clone used to warn about it.
  const { spawn } = await import('node:child_process');
  const dir = checkout(t);
  mkdirSync(join(dir, 'data'), { mode: 0o755 });
  chmodSync(join(dir, 'data'), 0o755);
  writeFileSync(join(dir, 'data', '.gitkeep'), '');
  const child = spawn(process.execPath, ['src/start.js'], { cwd: dir, env: { PATH: process.env.PATH ?? '', PORT: '0' }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => child.kill('SIGKILL'));
  let stdout = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
      if (stdout.includes('"event":"listening"')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}`)));
  });
  child.kill('SIGTERM');
  await once(child, 'exit');
  assert.equal(statSync(join(dir, 'data')).mode & 0o777, 0o700);
  assert.doesNotMatch(stdout, /database_permissions/);
  assert.match(stdout, /"event":"database_folder_made_private"/);
});

test('a folder named in DATABASE_PATH is the operator\'s: it is warned about, never changed', async (t) => {
  const folder = join(tempDir(t), 'shared');
  mkdirSync(folder, { mode: 0o755 });
  chmodSync(folder, 0o755);
  const server = await startMain({ APP_ENV: 'production', DATABASE_PATH: join(folder, 'pets.db') });
  server.child.kill('SIGTERM');
  await once(server.child, 'exit');
  assert.equal(statSync(folder).mode & 0o777, 0o755);
  assert.match(server.output().stdout, /"event":"database_permissions"/);
});

test('the set-up commands raise no alarm on an older system Node: npm is not told to warn, and the server itself refuses another Node in one line', async (t) => {
  // package.json's engines field made `npm install` on the system Node 20 print EBADENGINE,
  // although every npm script runs the pinned Node 24.
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { engines?: unknown; devDependencies: Record<string, string> };
  assert.equal(pkg.engines, undefined);
  assert.match(pkg.devDependencies.node!, /^24\./, 'the pinned Node that every script runs');
  const { spawnSync } = await import('node:child_process');
  const system = spawnSync('/usr/bin/node', ['--version'], { encoding: 'utf8' });
  if (system.status !== 0 || system.stdout.startsWith('v24.')) {
    t.skip('no older system Node at /usr/bin/node to start the server with');
    return;
  }
  const started = spawnSync('/usr/bin/node', ['src/start.js'], { cwd: ROOT, encoding: 'utf8', env: { PATH: process.env.PATH ?? '', PORT: '0' } });
  assert.equal(started.status, 1);
  assert.match(started.stderr, /^the service needs Node 24 \(this is Node \d+\.[^\n]+node_modules\/\.bin\/node[^\n]*\n$/);
});

test("a start does not load Node's fetch client (undici), which cost about 35 ms of each start", async (t) => {
  const dir = checkout(t);
  // Loaded before the service, it reports at exit which of Node's internal modules the process loaded.
  const probe = join(dir, 'probe.mjs');
  writeFileSync(probe, "process.on('exit', () => process.stderr.write(`loaded: ${JSON.stringify(process.moduleLoadList)}\\n`));\n");
  const { stderr } = await startAndStop(dir, { NODE_OPTIONS: `--import=${probe}` });
  const loaded = JSON.parse(/^loaded: (.*)$/m.exec(stderr)![1]!) as string[];
  assert.ok(loaded.some((name) => name.includes('internal/http')), 'the probe sees the modules a start loads');
  assert.deepEqual(loaded.filter((name) => name.includes('undici')), []);
});

/**
 * The modules a start loads only on the first request that needs them (each costs a start about
 * 0.3 ms before its first answer): the pets' write paths, the store, the feed, the webhooks, the
 * OpenAPI document and /docs, an attempt at a webhook delivery, the writer thread (a start with
 * the inline writer), and PostgreSQL, the metrics and the worker threads.
 */
const LOADED_ON_FIRST_USE = [
  /^src\/api\/pets\/(creations|changes)\.ts$/, /^src\/api\/idempotent-writes\.ts$/, /^src\/lib\/group-commit\.ts$/,
  /^src\/api\/orders\//, /^src\/api\/events\//, /^src\/api\/webhooks\//, /^src\/api\/openapi\//, /^src\/api\/reference-page\//,
  /^src\/api\/response-headers\.ts$/, /^src\/limits\/stream-slots\.ts$/, /^src\/webhooks\/(attempt|signature|address-policy)\.ts$/,
  /^src\/http\/outbound-/, /^src\/lib\/special-purpose-addresses\.ts$/, /^src\/storage\/sqlite\/writer\/(thread|host|client|protocol)\.ts$/,
  /^src\/storage\/postgres\//, /^src\/ops\//, /^src\/cluster\//,
];

test('a start answers its first request without loading the modules of the other operations, of webhook deliveries or of the writer thread; each first request of theirs is answered in full', async (t) => {
  const dir = checkout(t);
  // Loaded before the service: it lists the modules of src/ loaded before the first answer, with
  // Node's own, then the modules of src/ at exit.
  const probe = join(dir, 'probe.mjs');
  writeFileSync(probe, [
    "import { registerHooks } from 'node:module';",
    "import { subscribe } from 'node:diagnostics_channel';",
    "const loaded = [];",
    "registerHooks({ load(url, context, next) { if (url.includes('/src/')) loaded.push(url.slice(url.indexOf('/src/') + 1)); return next(url, context); } });",
    "let first = null;",
    "let builtins = null;",
    "subscribe('http.server.response.finish', () => { first ??= [...loaded]; builtins ??= [...process.moduleLoadList]; });",
    "process.on('exit', () => process.stderr.write(`before the first answer: ${JSON.stringify(first)}\\nNode's: ${JSON.stringify(builtins)}\\nat exit: ${JSON.stringify(loaded)}\\n`));",
  ].join('\n'));
  // A webhook receiver, as an endpoint would be: it keeps what it is sent.
  const { createServer } = await import('node:http');
  const received: { headers: Record<string, unknown>; body: string }[] = [];
  const delivered = Promise.withResolvers<void>();
  const receiver = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (text: string) => (body += text)).on('end', () => {
      received.push({ headers: request.headers, body });
      response.writeHead(204).end();
      delivered.resolve();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  t.after(() => receiver.close());
  const server = await startMain({
    APP_ENV: 'development', DATABASE_PATH: join(dir, 'pets.db'), WRITER: 'inline', WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', NODE_OPTIONS: `--import=${probe}`,
  }, join(dir, 'src', 'start.js'));
  t.after(() => server.child.kill('SIGKILL'));
  const key = /^ {2}(\S+)$/m.exec(server.output().stderr)![1]!;
  const call = (path: string, init: RequestInit = {}) =>
    fetch(server.url + path, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers } });

  const pets = await call('/v1/pets?limit=20');
  assert.equal(pets.status, 200);
  assert.deepEqual(await pets.json(), []);
  // The first request of each group loads it, and is answered as any later one.
  const hook = await call('/v1/webhooks', { method: 'POST', body: JSON.stringify({ url: `http://127.0.0.1:${(receiver.address() as { port: number }).port}/in`, types: ['pet.created'] }) });
  assert.equal(hook.status, 201);
  const webhook = await hook.json() as { id: number; secret: string; status: string };
  assert.equal(hook.headers.get('location'), `/v1/webhooks/${webhook.id}`);
  assert.match(webhook.secret, /^whsec_/);
  assert.equal(webhook.status, 'enabled');
  const created = await call('/v1/pets', { method: 'POST', body: JSON.stringify({ name: 'Rex', categoryId: 1 }) });
  assert.equal(created.status, 201);
  const pet = await created.json() as { id: number };
  const order = await call('/v1/store/orders', { method: 'POST', body: JSON.stringify({ petId: pet.id }) });
  assert.equal(order.status, 201);
  const placed = await order.json() as { id: number; petId: number; status: string };
  assert.equal(order.headers.get('location'), `/v1/store/orders/${placed.id}`);
  assert.deepEqual([placed.petId, placed.status], [pet.id, 'placed']);
  assert.deepEqual(await (await call(`/v1/store/orders/${placed.id}`)).json(), placed);
  const events = await call('/v1/events?limit=10');
  assert.equal(events.status, 200);
  const feed = await events.json() as { id: number; type: string; data: { id: number } }[];
  assert.deepEqual(feed.map((event) => event.type), ['pet.created', 'order.placed', 'pet.updated']);
  const unknownEvents = await call('/v1/events?after=x');
  assert.equal(unknownEvents.status, 400);
  assert.equal((await unknownEvents.json() as { code: string }).code, 'invalid_query');
  const document = await fetch(`${server.url}/v1/openapi.json`);
  assert.equal(document.status, 200);
  assert.match((await document.json() as { openapi: string }).openapi, /^3\.1\.\d+$/);
  // The first delivery loads the attempt: the pet.created event, signed, as the feed shows it.
  await delivered.promise;
  assert.equal(received.length, 1);
  assert.deepEqual(JSON.parse(received[0]!.body), feed[0]);
  assert.equal(received[0]!.headers['webhook-id'], String(feed[0]!.id));
  assert.match(String(received[0]!.headers['webhook-signature']), /^v1,/);

  server.child.kill('SIGTERM');
  assert.deepEqual(await once(server.child, 'exit'), [0, null]);
  const { stderr } = server.output();
  const first = JSON.parse(/^before the first answer: (.*)$/m.exec(stderr)![1]!) as string[];
  const all = JSON.parse(/^at exit: (.*)$/m.exec(stderr)![1]!) as string[];
  assert.ok(first.includes('src/api/pets/handlers.ts'), 'the probe sees the modules of the first answer');
  assert.deepEqual(first.filter((path) => LOADED_ON_FIRST_USE.some((pattern) => pattern.test(path))), []);
  // None of them takes one of Node's modules by an ES import (node:sqlite aside: its class is also
  // a type): the import makes the module's ES view, which reads every export once (about 1.5 ms
  // for node:crypto); process.getBuiltinModule gives the module itself.
  const esImports = first.flatMap((path) => [...readFileSync(join(dir, path), 'utf8').matchAll(/^import (?!type\b)[^;]*? from '(node:[^']+)';$/gm)]
    .filter((match) => match[1] !== 'node:sqlite').map((match) => `${path}: ${match[0]}`));
  assert.deepEqual(esImports, []);
  // Nor node:fs's ES-module view, which loads its promises, streams and watchers, and readline.
  const builtins = JSON.parse(/^Node's: (.*)$/m.exec(stderr)![1]!) as string[];
  assert.ok(builtins.includes('NativeModule fs'), 'the probe sees the modules of Node that a start loads');
  assert.deepEqual(builtins.filter((name) => /internal\/fs\/(promises|streams|watchers)|readline/.test(name)), []);
  // And the later requests did load them: the patterns name modules that exist.
  for (const path of ['src/api/pets/creations.ts', 'src/api/orders/handlers.ts', 'src/api/events/handlers.ts', 'src/api/webhooks/handlers.ts', 'src/api/openapi/document.ts', 'src/webhooks/attempt.ts']) {
    assert.ok(all.includes(path), path);
  }
});
