import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hashApiKey, isWellFormedApiKey } from '../../src/keys/api-keys.ts';
import type { AppEnv } from '../../src/config.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from '../../src/cli/exit-codes.ts';
import { parseIsoTime } from '../../src/cli/keys/arguments.ts';
import { runKeysCli, runKeysCommand } from '../../src/cli/keys.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';

const T0 = Date.UTC(2030, 0, 1);
const SECOND = 1000;
const KEY_LINE = /^pk_test_[A-Za-z0-9_-]{49}\n$/;

/** An in-memory database, a movable clock and captured output around `runKeysCommand`. */
function harness(appEnv: AppEnv = 'development') {
  const db = openDatabase(':memory:');
  const store = createKeysStore(db, { appEnv });
  const clock = { now: T0 };
  async function run(...argv: string[]) {
    let stdout = '';
    let stderr = '';
    const code = await runKeysCommand(argv, {
      keys: store,
      clock: () => clock.now,
      stdout: { write: (text: string) => (stdout += text) },
      stderr: { write: (text: string) => (stderr += text) },
    });
    return { code, stdout, stderr };
  }
  /** Runs a command that must succeed and returns its stdout. */
  async function ok(...argv: string[]): Promise<string> {
    const result = await run(...argv);
    assert.equal(result.code, EXIT_OK, result.stderr);
    return result.stdout;
  }
  return { db, store, clock, run, ok };
}

/** One line on stderr, prefixed with the command's name. */
function assertOneLineError(stderr: string): void {
  assert.match(stderr, /^keys: [^\n]+\n$/);
}

// create

test('create prints the key alone on stdout and a note with the id on stderr', async () => {
  const { run, store } = harness();
  const { code, stdout, stderr } = await run('create', '--plan', 'free', '--scopes', 'pets:read');
  assert.equal(code, EXIT_OK);
  assert.match(stdout, KEY_LINE);
  const record = store.findByKey(stdout.trim(), T0);
  assert.equal(record?.plan, 'free');
  assert.equal(record?.label, '');
  assert.equal(record?.expiresAt, null);
  assert.ok(stderr.includes(record.id));
  assert.ok(!stderr.includes(stdout.trim()), 'the key is printed once');
});

test('create uses the live prefix in production', async () => {
  const { ok } = harness('production');
  assert.match(await ok('create', '--plan', 'pro', '--scopes', 'pets:read'), /^pk_live_[A-Za-z0-9_-]{49}\n$/);
});

test('create stores the label and the expiry', async () => {
  const { ok, store } = harness();
  const key = (await ok('create', '--plan', 'business', '--scopes', 'pets:read', '--label', 'partner portal', '--expires', '2030-06-01T12:00:00+02:00')).trim();
  const record = store.findByKey(key, T0);
  assert.equal(record?.label, 'partner portal');
  assert.equal(record?.plan, 'business');
  assert.equal(record?.perMinute, 1000);
  assert.equal(record?.expiresAt, Date.UTC(2030, 5, 1, 10));
});

test('create accepts --option=value and a date-only expiry (midnight UTC)', async () => {
  const { ok, store } = harness();
  const key = (await ok('create', '--plan=pro', '--scopes=pets:read', '--label=', '--expires=2031-01-01')).trim();
  assert.equal(store.findByKey(key, T0)?.expiresAt, Date.UTC(2031, 0, 1));
});

test('create of an enterprise key takes its numbers', async () => {
  const { ok, store } = harness();
  const key = (await ok('create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-minute', '5000', '--per-day=2000000')).trim();
  const record = store.findByKey(key, T0);
  assert.equal(record?.perMinute, 5000);
  assert.equal(record?.perDay, 2_000_000);
});

test('create --json prints one JSON object and nothing on stderr', async () => {
  const { run, store } = harness();
  const { code, stdout, stderr } = await run('create', '--plan', 'enterprise', '--scopes', 'pets:read,events:read', '--per-minute', '7', '--per-day', '70', '--label', 'x', '--json');
  assert.equal(code, EXIT_OK);
  assert.equal(stderr, '');
  assert.equal(stdout.split('\n').length, 2, 'one line');
  const body = JSON.parse(stdout);
  assert.ok(isWellFormedApiKey(body.key, 'development'));
  const record = store.findByKey(body.key, T0)!;
  assert.deepEqual(body, {
    id: record.id,
    key: body.key,
    account: record.account,
    scopes: ['pets:read', 'events:read'],
    label: 'x',
    plan: 'enterprise',
    perMinute: 7,
    perDay: 70,
    createdAt: '2030-01-01T00:00:00.000Z',
    expiresAt: null,
  });
});

test('create --scopes gives the key those scopes, in the order of the scopes table, each once; all six may be given', async () => {
  const { ok, store } = harness();
  const adopter = (await ok('create', '--plan', 'free', '--scopes', 'orders:write,pets:read,orders:write')).trim();
  assert.deepEqual(store.findByKey(adopter, T0)!.scopes, ['pets:read', 'orders:write']);
  const all = 'webhooks:manage,events:read,orders:manage,orders:write,pets:write,pets:read';
  const staff = (await ok('create', '--plan', 'pro', '--scopes', all)).trim();
  assert.deepEqual(store.findByKey(staff, T0)!.scopes, ['pets:read', 'pets:write', 'orders:write', 'orders:manage', 'events:read', 'webhooks:manage']);
});

test('create without --scopes is refused: one line naming the option and every scope, exit code 2, and no key', async () => {
  const { run, store } = harness();
  for (const argv of [['create', '--plan', 'free'], ['create', '--plan', 'enterprise', '--per-minute', '5', '--per-day', '9', '--json']]) {
    const { code, stdout, stderr } = await run(...argv);
    assert.equal(code, EXIT_USAGE);
    assert.equal(stdout, '');
    assert.equal(stderr, 'keys: create needs --scopes, a comma-separated list of pets:read, pets:write, orders:write, orders:manage, events:read, webhooks:manage\n');
  }
  assert.equal(store.count(), 0);
});

test('create --account joins an existing account; an unknown one is one line on stderr, exit code 1, and no key', async () => {
  const { run, ok, store } = harness();
  const first = store.findByKey((await ok('create', '--plan', 'pro', '--scopes', 'pets:read')).trim(), T0)!;
  const second = store.findByKey((await ok('create', '--plan', 'free', '--scopes', 'pets:read', '--account', first.account)).trim(), T0)!;
  assert.equal(second.account, first.account);
  const refused = await run('create', '--plan', 'free', '--scopes', 'pets:read', '--account', 'acct_0000000000000000');
  assert.equal(refused.code, EXIT_FAILURE);
  assert.equal(refused.stdout, '');
  assert.match(refused.stderr, /^keys: no account "acct_0000000000000000"[^\n]*\n$/);
  assert.equal(store.list().length, 2);
});

// list

test('list says so when there are no keys', async () => {
  const { ok } = harness();
  assert.equal(await ok('list'), 'No API keys.\n');
  assert.equal(await ok('list', '--json'), '[]\n');
});

test('list prints a table with the status of each key and never a key or hash', async () => {
  const { ok, clock, store } = harness();
  const all = 'pets:read,pets:write,orders:write,orders:manage,events:read,webhooks:manage';
  const active = (await ok('create', '--plan', 'free', '--scopes', all, '--label', 'active one')).trim();
  const revoked = (await ok('create', '--plan', 'pro', '--scopes', 'pets:read')).trim();
  const expiring = (await ok('create', '--plan', 'business', '--scopes', 'orders:write,pets:read', '--expires', '2030-01-01T00:00:10Z')).trim();
  await ok('revoke', store.findByKey(revoked, T0)!.id);
  clock.now = T0 + 10 * SECOND;
  const table = await ok('list');
  const lines = table.trimEnd().split('\n');
  assert.equal(lines.length, 4);
  assert.match(lines[0]!, /^ID\s+ACCOUNT\s+SCOPES\s+PLAN\s+PER MIN\s+PER DAY\s+STATUS\s+CREATED\s+EXPIRES\s+REVOKED\s+LABEL$/);
  assert.match(lines[1]!, new RegExp(`^key_[0-9a-f]{16}\\s+acct_[0-9a-f]{16}\\s+${all}\\s+free\\s+60\\s+1000\\s+active\\s+2030-01-01T00:00:00Z\\s+-\\s+-\\s+active one$`));
  assert.match(lines[2]!, new RegExp(`^key_[0-9a-f]{16}\\s+acct_[0-9a-f]{16}\\s+pets:read\\s+pro\\s+300\\s+10000\\s+revoked\\s+2030-01-01T00:00:00Z\\s+-\\s+2030-01-01T00:00:00Z$`));
  assert.match(lines[3]!, new RegExp(`^key_[0-9a-f]{16}\\s+acct_[0-9a-f]{16}\\s+pets:read,orders:write\\s+business\\s+1000\\s+100000\\s+expired\\s+2030-01-01T00:00:00Z\\s+2030-01-01T00:00:10Z\\s+-$`));
  for (const key of [active, revoked, expiring]) {
    assert.ok(!table.includes(key));
    assert.ok(!table.includes(hashApiKey(key)));
  }
});

test('list --json gives every field with ISO 8601 UTC times or null, and never a key or hash', async () => {
  const { ok, clock, store } = harness();
  const key = (await ok('create', '--plan', 'enterprise', '--scopes', 'orders:manage', '--per-minute', '9', '--per-day', '99', '--label', 'e', '--expires', '2030-02-01T00:00:00Z')).trim();
  const { id, account } = store.findByKey(key, T0)!;
  clock.now = T0 + 1500;
  await ok('revoke', id);
  const output = await ok('list', '--json');
  assert.deepEqual(JSON.parse(output), [
    {
      id,
      account,
      scopes: ['orders:manage'],
      label: 'e',
      plan: 'enterprise',
      perMinute: 9,
      perDay: 99,
      createdAt: '2030-01-01T00:00:00.000Z',
      expiresAt: '2030-02-01T00:00:00.000Z',
      revokedAt: '2030-01-01T00:00:01.500Z',
    },
  ]);
  assert.ok(!output.includes(key));
  assert.ok(!output.includes(hashApiKey(key)));
  assert.ok(!/"(key|hash|keyHash|key_hash)"/.test(output));
});

test('list --scope lists only the keys that hold the scope (orders:manage does not hold orders:write), in the table or as JSON', async () => {
  const { ok, store } = harness();
  const id = async (scopes: string) => store.findByKey((await ok('create', '--plan', 'free', '--scopes', scopes)).trim(), T0)!.id;
  const staff = await id('pets:read,pets:write,orders:manage');
  const adopter = await id('pets:read,orders:write');
  const page = await id('pets:read');
  const listed = async (scope: string) => (JSON.parse(await ok('list', '--scope', scope, '--json')) as { id: string }[]).map((each) => each.id);
  assert.deepEqual(await listed('orders:manage'), [staff]);
  assert.deepEqual(await listed('orders:write'), [adopter]);
  assert.deepEqual(await listed('pets:read'), [staff, adopter, page]);
  assert.deepEqual(await listed('webhooks:manage'), []);
  const table = (await ok('list', '--scope', 'orders:manage')).trimEnd().split('\n');
  assert.equal(table.length, 2);
  assert.match(table[0]!, /^ID\s+ACCOUNT\s+SCOPES/);
  assert.ok(table[1]!.startsWith(`${staff} `));
  assert.equal(await ok('list', '--scope=events:read'), 'No API key holds events:read.\n');
});

// scopes

test('scopes ID LIST replaces the key\'s scopes at once, in the order of the scopes table; the key and its account stay', async () => {
  const { ok, store } = harness();
  const key = (await ok('create', '--plan', 'free', '--scopes', 'pets:read,pets:write,orders:manage')).trim();
  const before = store.findByKey(key, T0)!;
  assert.equal(await ok('scopes', before.id, 'orders:write,pets:read'), `${before.id} now has the scopes pets:read,orders:write\n`);
  const after = store.findByKey(key, T0)!;
  assert.deepEqual(after.scopes, ['pets:read', 'orders:write'], 'the next lookup sees them');
  assert.deepEqual({ ...after, scopes: before.scopes }, before, 'nothing else changed');
  assert.deepEqual((JSON.parse(await ok('list', '--scope', 'orders:manage', '--json')) as unknown[]).length, 0);
  await ok('scopes', before.id, 'webhooks:manage,events:read');
  assert.deepEqual(store.get(before.id)!.scopes, ['events:read', 'webhooks:manage']);
});

test('scopes of an unknown id fails with exit code 1; a bad LIST with exit code 2, before the id is looked up, changing nothing', async () => {
  const { run, ok, store } = harness();
  const { id } = store.findByKey((await ok('create', '--plan', 'free', '--scopes', 'pets:read')).trim(), T0)!;
  const unknown = await run('scopes', 'key_0123456789abcdef', 'pets:read');
  assert.equal(unknown.code, EXIT_FAILURE);
  assert.equal(unknown.stdout, '');
  assert.equal(unknown.stderr, 'keys: no key with id "key_0123456789abcdef"\n');
  for (const list of ['', 'pets:read,', 'orders:admin', 'pets:read orders:write']) {
    const refused = await run('scopes', id, list);
    assert.equal(refused.code, EXIT_USAGE, list);
    assertOneLineError(refused.stderr);
    assert.match(refused.stderr, /pets:read, pets:write, orders:write, orders:manage, events:read, webhooks:manage\)\n$/, 'it names the scopes');
  }
  assert.deepEqual(store.get(id)!.scopes, ['pets:read']);
});

// revoke

test('revoke stops the key at once', async () => {
  const { ok, store } = harness();
  const key = (await ok('create', '--plan', 'free', '--scopes', 'pets:read')).trim();
  const id = store.findByKey(key, T0)!.id;
  assert.equal(await ok('revoke', id), `Revoked ${id}\n`);
  assert.equal(store.findByKey(key, T0), null);
});

test('revoking a revoked key succeeds and keeps the first revocation time', async () => {
  const { ok, clock, store } = harness();
  const key = (await ok('create', '--plan', 'free', '--scopes', 'pets:read')).trim();
  const id = store.findByKey(key, T0)!.id;
  await ok('revoke', id);
  clock.now = T0 + 60 * SECOND;
  assert.equal(await ok('revoke', id), `${id} was already revoked at 2030-01-01T00:00:00.000Z\n`);
  assert.equal(store.get(id)?.revokedAt, T0);
});

test('revoke of an unknown id fails with exit code 1', async () => {
  const { run } = harness();
  const { code, stdout, stderr } = await run('revoke', 'key_0123456789abcdef');
  assert.equal(code, EXIT_FAILURE);
  assert.equal(stdout, '');
  assertOneLineError(stderr);
  assert.ok(stderr.includes('key_0123456789abcdef'));
});

// rotate

test('rotate prints a new key with the same plan, numbers and label; the old one lasts 86400 s by default', async () => {
  const { run, ok, store, clock } = harness();
  const oldKey = (await ok('create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-minute', '50', '--per-day', '500', '--label', 'svc')).trim();
  const old = store.findByKey(oldKey, T0)!;
  clock.now = T0 + SECOND;
  const { code, stdout, stderr } = await run('rotate', old.id);
  assert.equal(code, EXIT_OK);
  assert.match(stdout, KEY_LINE);
  const fresh = store.findByKey(stdout.trim(), clock.now)!;
  assert.notEqual(fresh.id, old.id);
  assert.deepEqual(
    { plan: fresh.plan, perMinute: fresh.perMinute, perDay: fresh.perDay, label: fresh.label },
    { plan: 'enterprise', perMinute: 50, perDay: 500, label: 'svc' },
  );
  assert.ok(stderr.includes(fresh.id) && stderr.includes(old.id));
  assert.ok(store.findByKey(oldKey, T0 + SECOND + 86_400 * SECOND - 1));
  assert.equal(store.findByKey(oldKey, T0 + SECOND + 86_400 * SECOND), null);
});

test('rotate --grace --json prints the new key as create does, with the replaced key', async () => {
  const { run, ok, store } = harness();
  const oldKey = (await ok('create', '--plan', 'pro', '--scopes', 'orders:write,pets:read')).trim();
  const oldId = store.findByKey(oldKey, T0)!.id;
  const { code, stdout, stderr } = await run('rotate', oldId, '--grace', '60', '--json');
  assert.equal(code, EXIT_OK);
  assert.equal(stderr, '');
  const body = JSON.parse(stdout);
  const replacement = store.findByKey(body.key, T0)!;
  assert.equal(replacement.account, store.findByKey(oldKey, T0)!.account, 'the same account');
  assert.deepEqual(body, {
    id: replacement.id,
    key: body.key,
    account: replacement.account,
    scopes: ['pets:read', 'orders:write'],
    label: '',
    plan: 'pro',
    perMinute: 300,
    perDay: 10_000,
    createdAt: '2030-01-01T00:00:00.000Z',
    expiresAt: null,
    replacedId: oldId,
    replacedExpiresAt: '2030-01-01T00:01:00.000Z',
  });
  assert.ok(store.findByKey(oldKey, T0 + 60 * SECOND - 1));
  assert.equal(store.findByKey(oldKey, T0 + 60 * SECOND), null);
});

test('rotate of an unknown, revoked or expired key fails with exit code 1 and creates nothing', async () => {
  const { run, ok, store, clock } = harness();
  const revokedId = store.findByKey((await ok('create', '--plan', 'free', '--scopes', 'pets:read')).trim(), T0)!.id;
  await ok('revoke', revokedId);
  const expiredId = store.findByKey((await ok('create', '--plan', 'free', '--scopes', 'pets:read', '--expires', '2030-01-01T00:00:01Z')).trim(), T0)!.id;
  clock.now = T0 + SECOND;
  for (const id of ['key_0123456789abcdef', revokedId, expiredId]) {
    const { code, stdout, stderr } = await run('rotate', id);
    assert.equal(code, EXIT_FAILURE, id);
    assert.equal(stdout, '');
    assertOneLineError(stderr);
    assert.ok(stderr.includes(id));
  }
  assert.equal(store.count(), 2);
});

// help

test('help prints the usage on stdout', async () => {
  const { run } = harness();
  for (const argv of [['help'], ['--help'], ['-h'], ['create', '--help']]) {
    const { code, stdout, stderr } = await run(...argv);
    assert.equal(code, EXIT_OK);
    assert.match(stdout, /^Usage: npm run --silent keys -- <command>/);
    assert.equal(stderr, '');
  }
});

// bad arguments

const LONG_LABEL = 'x'.repeat(101);
const BAD_ARGUMENTS: readonly (readonly string[])[] = [
  [],
  ['frob'],
  ['CREATE', '--plan', 'free'],
  ['help', 'create'],
  // create: plan
  ['create'],
  ['create', '--plan'],
  ['create', '--plan', 'gold', '--scopes', 'pets:read'],
  ['create', '--plan', 'Free', '--scopes', 'pets:read'],
  ['create', '--plan='],
  // create: enterprise numbers
  ['create', '--plan', 'enterprise', '--scopes', 'pets:read'],
  ['create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-minute', '5'],
  ['create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-day', '5'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--per-minute', '5', '--per-day', '6'],
  ['create', '--plan', 'pro', '--scopes', 'pets:read', '--per-day', '6'],
  // create: numbers that are not positive integers
  ['create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-minute', '0', '--per-day', '6'],
  ['create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-minute', '-5', '--per-day', '6'],
  ['create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-minute', '1.5', '--per-day', '6'],
  ['create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-minute', 'abc', '--per-day', '6'],
  ['create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-minute', '1e3', '--per-day', '6'],
  ['create', '--plan', 'enterprise', '--scopes', 'pets:read', '--per-minute', '5', '--per-day', '99999999999999999'],
  // create: expiry
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--expires', '2020-01-01T00:00:00Z'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--expires', '2030-01-01T00:00:00Z'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--expires', 'tomorrow'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--expires', '2030-02-30'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--expires', '2030-13-01'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--expires', '2030-12-31T23:59:59'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--expires', '2030-12-31T24:00:00Z'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--expires', '1893456000000'],
  // create: label
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--label'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--label', '--json'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--label', 'two\nlines'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--label', LONG_LABEL],
  // create: scopes and account
  ['create', '--plan', 'free', '--scopes'],
  ['create', '--plan', 'free', '--scopes', ''],
  ['create', '--plan', 'free', '--scopes', 'pets:read,'],
  ['create', '--plan', 'free', '--scopes', 'pets:read,,orders:write'],
  ['create', '--plan', 'free', '--scopes', 'pets:admin'],
  ['create', '--plan', 'free', '--scopes', 'PETS:READ'],
  ['create', '--plan', 'free', '--scopes', 'pets:read orders:write'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--account', ''],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--account', 'acct_\u0007'],
  // options in general
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--plan', 'pro'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--json', '--json'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--json=yes'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--bogus'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '--bo\ngus'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', '-x'],
  ['create', '--plan', 'free', '--scopes', 'pets:read', 'extra'],
  // create: no scopes
  ['create', '--plan', 'free'],
  ['create', '--plan', 'pro', '--label', 'staff', '--json'],
  // list
  ['list', '--all'],
  ['list', 'everything'],
  ['list', '--scope'],
  ['list', '--scope', ''],
  ['list', '--scope', 'orders'],
  ['list', '--scope', 'pets:read,orders:write'],
  ['list', '--scope', 'pets:read', '--scope', 'pets:write'],
  // scopes
  ['scopes'],
  ['scopes', 'key_0123456789abcdef'],
  ['scopes', 'key_0123456789abcdef', 'pets:read', 'pets:write'],
  ['scopes', 'key_0123456789abcdef', 'pets:read', '--json'],
  ['scopes', 'key_0123456789abcdef', ''],
  ['scopes', 'key_0123456789abcdef', 'all'],
  // revoke
  ['revoke'],
  ['revoke', 'key_0123456789abcdef', 'key_fedcba9876543210'],
  ['revoke', 'key_0123456789abcdef', '--json'],
  // rotate
  ['rotate'],
  ['rotate', '--grace', '60'],
  ['rotate', 'key_0123456789abcdef', '--grace'],
  ['rotate', 'key_0123456789abcdef', '--grace', '0'],
  ['rotate', 'key_0123456789abcdef', '--grace', '-1'],
  ['rotate', 'key_0123456789abcdef', '--grace', '1.5'],
  ['rotate', 'key_0123456789abcdef', '--grace', '99999999999'],
  ['rotate', 'key_0123456789abcdef', '--grace', '5', '--grace', '6'],
];

for (const argv of BAD_ARGUMENTS) {
  test(`bad arguments exit 2 with one line on stderr: keys ${JSON.stringify(argv)}`, async () => {
    const { run, store } = harness();
    const { code, stdout, stderr } = await run(...argv);
    assert.equal(code, EXIT_USAGE);
    assert.equal(stdout, '');
    assertOneLineError(stderr);
    assert.equal(store.count(), 0, 'nothing was created');
  });
}

test('a bad argument is reported before the id is looked up', async () => {
  const { ok, run, store } = harness();
  const id = store.findByKey((await ok('create', '--plan', 'free', '--scopes', 'pets:read')).trim(), T0)!.id;
  assert.equal((await run('rotate', id, '--grace', '0')).code, EXIT_USAGE);
  assert.equal(store.count(), 1);
});

test('an argument after -- is a positional, even if it looks like an option', async () => {
  const { run } = harness();
  const { code, stderr } = await run('revoke', '--', '--json');
  assert.equal(code, EXIT_FAILURE, 'no key with id "--json"');
  assert.ok(stderr.includes('"--json"'));
});

// ISO times

test('parseIsoTime reads dates, UTC times and offsets, and refuses the rest', async () => {
  assert.equal(parseIsoTime('2030-12-31'), Date.UTC(2030, 11, 31));
  assert.equal(parseIsoTime('2030-12-31T23:59Z'), Date.UTC(2030, 11, 31, 23, 59));
  assert.equal(parseIsoTime('2030-12-31T23:59:59.5Z'), Date.UTC(2030, 11, 31, 23, 59, 59, 500));
  assert.equal(parseIsoTime('2030-12-31T23:59:59.123456Z'), Date.UTC(2030, 11, 31, 23, 59, 59, 123));
  assert.equal(parseIsoTime('2030-01-01T01:30:00+01:30'), Date.UTC(2030, 0, 1));
  assert.equal(parseIsoTime('2029-12-31T19:00:00-05:00'), Date.UTC(2030, 0, 1));
  assert.equal(parseIsoTime('2032-02-29'), Date.UTC(2032, 1, 29));
  for (const text of ['2031-02-29', '2100-02-29', '2030-04-31', '2030-00-10', '2030-1-1', '2030-01-01T00:00:00', '2030-01-01 00:00:00Z', '2030-01-01T00:60:00Z', '2030-01-01T00:00:00+24:00', 'now', '']) {
    assert.ok(Number.isNaN(parseIsoTime(text)), text);
  }
});

// the whole command line: environment and database file

function cliIo(now = Date.now()) {
  const output = { stdout: '', stderr: '' };
  return {
    output,
    io: {
      clock: () => now,
      stdout: { write: (text: string) => (output.stdout += text) },
      stderr: { write: (text: string) => (output.stderr += text) },
    },
  };
}

async function withTempDir(body: (dir: string) => Promise<void> | void): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'keys-cli-'));
  try {
    await body(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test('runKeysCli refuses a database that does not exist, creating nothing, unless create is told --create-database', async () => {
  // A mistyped DATABASE_PATH used to create an empty database, print "No API keys." and exit 0.
  await withTempDir(async (dir) => {
    const path = join(dir, 'typo', 'prodution.db');
    for (const args of [['list'], ['create', '--plan', 'free', '--scopes', 'pets:read'], ['revoke', 'key_0123456789abcdef'], ['rotate', 'key_0123456789abcdef']]) {
      const { io, output } = cliIo();
      assert.equal(await runKeysCli(args, { APP_ENV: 'staging', DATABASE_PATH: path }, io), EXIT_FAILURE, args.join(' '));
      assert.equal(output.stderr, `keys: no database at ${path} (DATABASE_PATH); set the server's APP_ENV and DATABASE_PATH (or DATABASE_URL), or pass --create-database to create keys for a new database\n`);
      assert.equal(output.stdout, '');
    }
    assert.ok(!existsSync(join(dir, 'typo')), 'nothing was created');
    const { io } = cliIo();
    assert.equal(await runKeysCli(['list', '--create-database'], { APP_ENV: 'staging', DATABASE_PATH: path }, io), EXIT_USAGE, 'only create creates');
  });
});

test('runKeysCli creates the database directory and works on the file', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'data', 'staging.db');
    const { output, io } = cliIo();
    assert.equal(await runKeysCli(['create', '--plan', 'free', '--scopes', 'pets:read', '--create-database'], { APP_ENV: 'staging', DATABASE_PATH: path }, io), EXIT_OK);
    assert.ok(existsSync(path));
    const db = openDatabase(path);
    assert.ok(createKeysStore(db, { appEnv: 'staging' }).findByKey(output.stdout.trim(), Date.now()));
    db.close();
  });
});

test('runKeysCli creates the database folder 0700 and the file 0600, as the server does', async () => {
  const previous = process.umask(0o022);
  try {
    await withTempDir(async (dir) => {
      const path = join(dir, 'data', 'staging.db');
      assert.equal(await runKeysCli(['create', '--plan', 'free', '--scopes', 'pets:read', '--create-database'], { APP_ENV: 'staging', DATABASE_PATH: path }, cliIo().io), EXIT_OK);
      assert.equal((statSync(join(dir, 'data')).mode & 0o777).toString(8), '700');
      assert.equal((statSync(path).mode & 0o777).toString(8), '600');
    });
  } finally {
    process.umask(previous);
  }
});

test('runKeysCli refuses a bad environment variable with one line naming it, exit 1', async () => {
  await withTempDir(async (dir) => {
    for (const [name, value] of [['APP_ENV', 'qa'], ['PORT', 'abc'], ['LOG_LEVEL', 'loud']] as const) {
      const { output, io } = cliIo();
      const path = join(dir, 'data', 'x.db');
      assert.equal(await runKeysCli(['list'], { DATABASE_PATH: path, [name]: value }, io), EXIT_FAILURE);
      assertOneLineError(output.stderr);
      assert.ok(output.stderr.startsWith(`keys: ${name} `), output.stderr);
      assert.ok(!existsSync(join(dir, 'data')), 'no database was created');
    }
  });
});

test('runKeysCli refuses an in-memory database, where keys would vanish', async () => {
  const { output, io } = cliIo();
  assert.equal(await runKeysCli(['create', '--plan', 'free', '--scopes', 'pets:read'], { DATABASE_PATH: ':memory:' }, io), EXIT_FAILURE);
  assert.equal(output.stdout, '');
  assert.match(output.stderr, /^keys: DATABASE_PATH [^\n]+\n$/);
});

test('runKeysCli checks the arguments before touching the environment or the file system', async () => {
  await withTempDir(async (dir) => {
    const { output, io } = cliIo();
    const path = join(dir, 'data', 'x.db');
    assert.equal(await runKeysCli(['create', '--plan', 'gold', '--scopes', 'pets:read'], { APP_ENV: 'qa', DATABASE_PATH: path }, io), EXIT_USAGE);
    assertOneLineError(output.stderr);
    assert.ok(!existsSync(join(dir, 'data')));
  });
});

test('runKeysCli reports a database it cannot open in one line, exit 1', async () => {
  await withTempDir(async (dir) => {
    mkdirSync(join(dir, 'taken.db'));
    const { output, io } = cliIo();
    assert.equal(await runKeysCli(['list'], { DATABASE_PATH: join(dir, 'taken.db') }, io), EXIT_FAILURE);
    assertOneLineError(output.stderr);
  });
});

// the real process

test('the real CLI creates, lists and revokes keys in a database file, with the contract exit codes', async () => {
  await withTempDir(async (dir) => {
    const env = { PATH: process.env.PATH, APP_ENV: 'staging', DATABASE_PATH: join(dir, 'keys.db') };
    const keys = (...args: string[]) =>
      spawnSync(process.execPath, ['src/cli/keys.ts', ...args], { cwd: join(import.meta.dirname, '..', '..'), env, encoding: 'utf8' });

    const created = keys('create', '--plan', 'pro', '--scopes', 'pets:read', '--label', 'e2e', '--create-database');
    assert.equal(created.status, 0, created.stderr);
    assert.match(created.stdout, KEY_LINE);
    const key = created.stdout.trim();

    const listed = keys('list', '--json');
    assert.equal(listed.status, 0, listed.stderr);
    const [record, ...others] = JSON.parse(listed.stdout);
    assert.equal(others.length, 0);
    assert.equal(record.label, 'e2e');
    assert.equal(record.plan, 'pro');
    assert.equal(record.revokedAt, null);

    const revoked = keys('revoke', record.id);
    assert.equal(revoked.status, 0, revoked.stderr);
    assert.equal(revoked.stdout, `Revoked ${record.id}\n`);
    const db = openDatabase(env.DATABASE_PATH);
    assert.equal(createKeysStore(db, { appEnv: 'staging' }).findByKey(key, Date.now()), null, 'the server sees the revocation');
    db.close();

    const unknown = keys('revoke', 'key_0123456789abcdef');
    assert.equal(unknown.status, 1);
    assertOneLineError(unknown.stderr);

    const bad = keys('create', '--plan', 'gold', '--scopes', 'pets:read');
    assert.equal(bad.status, 2);
    assertOneLineError(bad.stderr);

    const badEnv = spawnSync(process.execPath, ['src/cli/keys.ts', 'list'], {
      cwd: join(import.meta.dirname, '..', '..'),
      env: { ...env, APP_ENV: 'prod' },
      encoding: 'utf8',
    });
    assert.equal(badEnv.status, 1);
    assert.match(badEnv.stderr, /^keys: APP_ENV [^\n]+\n$/);
  });
});

test('the real CLI ends quietly, exit code 0 and nothing on stderr, when its reader closes the pipe early (keys list | head -c1)', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'keys.db');
    const db = openDatabase(path);
    db.exec('PRAGMA synchronous = OFF'); // 600 commits without 600 fsyncs
    const store = createKeysStore(db, { appEnv: 'staging' });
    // About 300 KB: more than a pipe holds (64 KiB) and than the reader's first read, so that
    // the command is still writing when the reader goes.
    for (let i = 0; i < 1000; i++) store.create({ plan: 'free', scopes: ['pets:read'], label: `page ${i} `.padEnd(100, 'x'), now: T0 });
    db.close();
    for (const args of [['list', '--json'], ['list'], ['list', '--scope', 'pets:read', '--json']]) {
      const child = spawn(process.execPath, ['src/cli/keys.ts', ...args], {
        cwd: join(import.meta.dirname, '..', '..'),
        env: { PATH: process.env.PATH, APP_ENV: 'staging', DATABASE_PATH: path },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
      // The reader takes one chunk and closes its end, as `head -c1` does.
      child.stdout.once('data', () => child.stdout.destroy());
      const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
      assert.deepEqual({ code, signal, stderr }, { code: 0, signal: null, stderr: '' }, args.join(' '));
    }
  });
});
