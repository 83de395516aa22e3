/**
 * Backups end to end: a backup taken with `npm run backup` from a real server while
 * creates are being answered, then a server started on the copy, serving the same pets and keys.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import { startMain, tempDir } from '../support/main-process.ts';

const ROOT = new URL('../..', import.meta.url).pathname;
const CLIENTS = 8;

interface Acknowledged {
  id: number;
  body: string;
  /** performance.now() when the 201 arrived. */
  at: number;
}

/** `npm run --silent backup -- FILE`, as an operator runs it; resolves with its exit code and output. */
async function npmBackup(file: string, env: Record<string, string>) {
  const { DATABASE_URL: _ignored, ...inherited } = process.env;
  const child = spawn('npm', ['run', '--silent', 'backup', '--', file], { cwd: ROOT, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stdout, stderr };
}

/** Every pet the server lists, following its next links. */
async function listAll(url: string, key: string): Promise<unknown[]> {
  const pets: unknown[] = [];
  for (let path: string | null = '/v1/pets?limit=100'; path !== null; ) {
    const response: Response = await fetch(url + path, { headers: { authorization: `Bearer ${key}` } });
    assert.equal(response.status, 200);
    pets.push(...((await response.json()) as unknown[]));
    path = /^<([^>]+)>; rel="next"$/.exec(response.headers.get('link') ?? '')?.[1] ?? null;
  }
  return pets;
}

test('a backup taken while creates run is a consistent snapshot, and a server on the copy serves the same pets and keys', async (t) => {
  const dir = tempDir(t, 'pets-backup-');
  const path = join(dir, 'live.db');
  const setup = openDatabase(path);
  const { key } = createKeysStore(setup, { appEnv: 'development' }).create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 100_000_000, label: 'backup', now: Date.now() });
  setup.close();
  const env = { APP_ENV: 'development', DATABASE_PATH: path };
  const server = await startMain(env);
  t.after(() => server.child.kill('SIGKILL'));

  const acknowledged: Acknowledged[] = [];
  let running = true;
  let sequence = 0;
  const client = async () => {
    while (running) {
      const body = JSON.stringify({ name: `pet ${++sequence}`, categoryId: sequence, status: 'pending' });
      const response = await fetch(`${server.url}/v1/pets`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
      const text = await response.text();
      assert.equal(response.status, 201, text);
      acknowledged.push({ id: (JSON.parse(text) as { id: number }).id, body: text, at: performance.now() });
    }
  };
  const waitFor = async (count: number) => {
    while (acknowledged.length < count) await new Promise((resolve) => setTimeout(resolve, 5));
  };
  const clients = Array.from({ length: CLIENTS }, client);

  await waitFor(100);
  const copyPath = join(dir, 'copy.db');
  const started = performance.now();
  const before = [...acknowledged];
  const backup = await npmBackup(copyPath, env);
  const ended = performance.now();
  assert.deepEqual({ code: backup.code, stderr: backup.stderr }, { code: 0, stderr: '' });
  assert.match(backup.stdout, /^Backed up .* to .*copy\.db \(\d+ pages\)\n$/);
  const during = acknowledged.filter((pet) => pet.at > started && pet.at < ended).length;
  assert.ok(during > 0, 'creates were answered while the backup ran');
  // Creates go on after the backup, so the original ends up with pets that the copy lacks.
  await waitFor(acknowledged.length + 50);
  running = false;
  await Promise.all(clients);
  server.child.kill('SIGTERM');
  assert.deepEqual(await once(server.child, 'exit'), [0, null]);

  assert.equal(statSync(copyPath).mode & 0o777, 0o600, 'the copy is readable by its owner only');
  const onCopy = await startMain({ APP_ENV: 'development', DATABASE_PATH: copyPath });
  t.after(() => onCopy.child.kill('SIGKILL'));
  assert.doesNotMatch(onCopy.output().stderr, /pk_test_/, 'the copy has the keys, so no development key is made');
  const copied = (await listAll(onCopy.url, key)) as { id: number }[];

  // A snapshot: the pets of one instant, ids 1..n with no gap, each exactly as it was answered.
  assert.deepEqual(copied.map((pet) => pet.id), Array.from({ length: copied.length }, (_, i) => i + 1));
  const answered = new Map(acknowledged.map((pet) => [pet.id, pet.body]));
  for (const pet of copied) assert.equal(JSON.stringify(pet), answered.get(pet.id), `pet ${pet.id}`);
  for (const pet of before) assert.ok(pet.id <= copied.length, `pet ${pet.id}, answered before the backup began, is in the copy`);
  assert.ok(copied.length < acknowledged.length, `the copy (${copied.length} pets) is older than the last creates (${acknowledged.length})`);

  onCopy.child.kill('SIGTERM');
  assert.deepEqual(await once(onCopy.child, 'exit'), [0, null]);
});
