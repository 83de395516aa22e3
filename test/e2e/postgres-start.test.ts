/**
 * The process edge on PostgreSQL, run for real: the server and the keys command choose the engine
 * by DATABASE_URL, refuse a missing driver or an unreachable database in one line, and the keys
 * command works the same on PostgreSQL as on SQLite.
 */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { connectPostgres } from '../../src/storage/postgres/database.ts';
import { createKeysStore } from '../../src/storage/postgres/keys-store.ts';
import { describeWithPostgres } from '../support/postgres.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WITHOUT_DRIVER = fileURLToPath(new URL('../support/without-postgres-driver.ts', import.meta.url));

function run(script: string, args: string[], env: Record<string, string>, nodeOptions: string[] = []) {
  return spawnSync(process.execPath, [...nodeOptions, script, ...args], {
    cwd: ROOT, env: { PATH: process.env.PATH ?? '', PORT: '0', ...env }, encoding: 'utf8', timeout: 20_000,
  });
}

test('without the driver, the server and the keys command exit 1 with one line saying what to install', () => {
  for (const [script, args] of [['src/main.ts', []], ['src/cli/keys.ts', ['list']]] as const) {
    const result = run(script, [...args], { DATABASE_URL: 'postgres://pets@127.0.0.1:1/pets' }, ['--import', WITHOUT_DRIVER]);
    assert.equal(result.status, 1, result.stderr);
    const lines = result.stderr.trim().split('\n');
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0]!, /"npm install --no-save --save-prod --omit=dev postgres@3"/);
  }
});

test('without the driver, a SQLite server starts as before: nothing loads it', () => {
  const result = run('src/main.ts', [], { DATABASE_PATH: ':memory:', PORT: 'x' }, ['--import', WITHOUT_DRIVER]);
  assert.match(result.stderr, /^PORT /, 'the config error comes first; the driver was never asked for');
});

test('DATABASE_URL with DATABASE_PATH stops the server and the keys command, naming both', () => {
  for (const [script, args] of [['src/main.ts', []], ['src/cli/keys.ts', ['list']]] as const) {
    const result = run(script, [...args], { DATABASE_URL: 'postgres://pets@127.0.0.1:1/pets', DATABASE_PATH: 'data/x.db' });
    assert.equal(result.status, 1);
    assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
    assert.match(result.stderr, /DATABASE_URL.*DATABASE_PATH/);
  }
});

test('an unreachable database stops the server at start with one line, exit 1', () => {
  const result = run('src/main.ts', [], { DATABASE_URL: 'postgres://pets@127.0.0.1:1/pets' });
  assert.equal(result.status, 1);
  assert.equal(result.stderr.trim().split('\n').length, 1, result.stderr);
  assert.match(result.stderr, /PostgreSQL.*ECONNREFUSED/);
});

describeWithPostgres('the keys command on DATABASE_URL', (cluster) => {

  test('creates, lists, changes the scopes of, rotates and revokes keys with the same output and exit codes', async (t) => {
    const url = await cluster().createDatabase();
    const env = { DATABASE_URL: url, APP_ENV: 'staging' };
    const keys = (...args: string[]) => run('src/cli/keys.ts', args, env);

    // A database no server has started on yet has no schema: refused unless told to create it.
    const refused = keys('list');
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /^keys: the PostgreSQL database of DATABASE_URL has no schema yet[^\n]*--create-database[^\n]*\n$/);
    const created = keys('create', '--plan', 'enterprise', '--per-minute', '5', '--per-day', '9', '--scopes', 'pets:read', '--label', 'pg', '--json', '--create-database');
    assert.equal(created.status, 0, created.stderr);
    const issued = JSON.parse(created.stdout);
    assert.deepEqual([issued.plan, issued.perMinute, issued.perDay, issued.label], ['enterprise', 5, 9, 'pg']);
    assert.match(issued.key, /^pk_test_/);

    const listed = keys('list', '--json');
    assert.equal(listed.status, 0, listed.stderr);
    const [record, ...others] = JSON.parse(listed.stdout);
    assert.equal(others.length, 0);
    assert.deepEqual(record, { ...record, id: issued.id, revokedAt: null, expiresAt: null });
    assert.match(keys('list').stdout, new RegExp(`${issued.id}\\s+${issued.account}\\s+\\S+\\s+enterprise\\s+5\\s+9\\s+active`));
    assert.equal(keys('list', '--scope', 'orders:manage').stdout, 'No API key holds orders:manage.\n');
    const widened = keys('scopes', issued.id, 'orders:manage,pets:read');
    assert.deepEqual([widened.status, widened.stdout], [0, `${issued.id} now has the scopes pets:read,orders:manage\n`]);
    assert.deepEqual((JSON.parse(keys('list', '--scope', 'orders:manage', '--json').stdout) as { id: string }[]).map((each) => each.id), [issued.id]);

    const rotated = keys('rotate', issued.id, '--grace', '60');
    assert.equal(rotated.status, 0, rotated.stderr);
    const replacement = rotated.stdout.trim();

    const revoked = keys('revoke', issued.id);
    assert.deepEqual([revoked.status, revoked.stdout], [0, `Revoked ${issued.id}\n`]);
    const again = keys('revoke', issued.id);
    assert.equal(again.status, 0);
    assert.match(again.stdout, /already revoked/);

    const sql = await connectPostgres(url, { poolSize: 1 });
    t.after(() => sql.end());
    const store = createKeysStore(sql, { appEnv: 'staging' });
    assert.equal(await store.findByKey(issued.key, Date.now()), null, 'the server sees the revocation');
    assert.ok(await store.findByKey(replacement, Date.now()));

    const failures = [
      [['revoke', 'key_0123456789abcdef'], 1], [['rotate', issued.id], 1], [['scopes', 'key_0123456789abcdef', 'pets:read'], 1],
      [['create', '--plan', 'gold', '--scopes', 'pets:read'], 2], [['create', '--plan', 'free'], 2], [['scopes', issued.id, 'pets:admin'], 2],
    ] as const;
    for (const [args, status] of failures) {
      const result = keys(...args);
      assert.equal(result.status, status, args.join(' '));
      assert.match(result.stderr, /^keys: [^\n]+\n$/);
    }
  });

  test('an unreachable database is one line on stderr, exit 1', () => {
    const result = run('src/cli/keys.ts', ['list'], { DATABASE_URL: 'postgres://tests@127.0.0.1:1/none' });
    assert.equal(result.status, 1);
    assert.match(result.stderr, /^keys: [^\n]*ECONNREFUSED[^\n]*\n$/);
  });
});
