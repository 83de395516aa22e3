import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../../src/storage/sqlite/database.ts';
import { generateApiKey, hashApiKey, isWellFormedApiKey } from '../../../src/keys/api-keys.ts';
import type { AppEnv } from '../../../src/config.ts';
import { createKeysStore, type SqliteKeysStore } from '../../../src/storage/sqlite/keys-store.ts';
import { ensureDevelopmentKey } from '../../../src/storage/keys.ts';

const T0 = Date.UTC(2030, 0, 1);
const SECOND = 1000;

function newStore(appEnv: AppEnv = 'production') {
  const db = openDatabase(':memory:');
  return { db, store: createKeysStore(db, { appEnv }) };
}

test('create returns the record with the plan numbers and a key of the environment', () => {
  const { store } = newStore('production');
  const { record, key } = store.create({ plan: 'pro', scopes: ['pets:read', 'orders:write'], label: 'mobile app', now: T0 });
  assert.match(record.id, /^key_[0-9a-f]{16}$/);
  assert.match(record.account, /^acct_[0-9a-f]{16}$/);
  assert.deepEqual(record, {
    id: record.id,
    account: record.account,
    scopes: ['pets:read', 'orders:write'],
    label: 'mobile app',
    plan: 'pro',
    perMinute: 300,
    perDay: 10_000,
    createdAt: T0,
    expiresAt: null,
    revokedAt: null,
  });
  assert.ok(key.startsWith('pk_live_'));
  assert.ok(isWellFormedApiKey(key, 'production'));
});

test('a key without a label has an empty label', () => {
  const { store } = newStore();
  assert.equal(store.create({ plan: 'free', now: T0 }).record.label, '');
});

test('ids are unique', () => {
  const { store } = newStore();
  const ids = new Set(Array.from({ length: 200 }, () => store.create({ plan: 'free', now: T0 }).record.id));
  assert.equal(ids.size, 200);
});

test('an enterprise key carries its own numbers', () => {
  const { store } = newStore();
  const { record, key } = store.create({ plan: 'enterprise', perMinute: 5000, perDay: 2_000_000, now: T0 });
  assert.equal(record.perMinute, 5000);
  assert.equal(record.perDay, 2_000_000);
  assert.deepEqual(store.findByKey(key, T0), record);
});

test('numbers are required for enterprise and refused for the other plans', () => {
  const { store } = newStore();
  assert.throws(() => store.create({ plan: 'enterprise', now: T0 }), TypeError);
  assert.throws(() => store.create({ plan: 'enterprise', perMinute: 10, now: T0 }), TypeError);
  assert.throws(() => store.create({ plan: 'free', perMinute: 10, perDay: 100, now: T0 }), TypeError);
  assert.throws(() => store.create({ plan: 'enterprise', perMinute: 0, perDay: 100, now: T0 }), RangeError);
  assert.throws(() => store.create({ plan: 'enterprise', perMinute: 1.5, perDay: 100, now: T0 }), RangeError);
  assert.equal(store.count(), 0);
});

test('an expiry that is not in the future is a programmer error', () => {
  const { store } = newStore();
  assert.throws(() => store.create({ plan: 'free', expiresAt: T0, now: T0 }), RangeError);
  assert.throws(() => store.create({ plan: 'free', expiresAt: T0 - 1, now: T0 }), RangeError);
});

test('findByKey finds the key by its hash', () => {
  const { store } = newStore();
  const { record, key } = store.create({ plan: 'business', now: T0 });
  assert.deepEqual(store.findByKey(key, T0 + 1), record);
});

test('findByKey refuses unknown, malformed and other-environment keys', () => {
  const { db, store } = newStore('production');
  store.create({ plan: 'free', now: T0 });
  assert.equal(store.findByKey(generateApiKey('production'), T0), null, 'well-formed but unknown');
  assert.equal(store.findByKey('pk_live_nope', T0), null);
  assert.equal(store.findByKey('', T0), null);
  // A test key planted in a production database is still refused by its prefix.
  const testKey = createKeysStore(db, { appEnv: 'development' }).create({ plan: 'free', now: T0 }).key;
  assert.equal(store.findByKey(testKey, T0), null);
});

test('a key with a one-character typo is not found', () => {
  const { store } = newStore();
  const { key } = store.create({ plan: 'free', now: T0 });
  const typo = key.slice(0, 20) + (key[20] === 'A' ? 'B' : 'A') + key.slice(21);
  assert.equal(store.findByKey(typo, T0), null);
});

test('a key works until just before expiresAt and not from expiresAt on', () => {
  const { store } = newStore();
  const { record, key } = store.create({ plan: 'free', expiresAt: T0 + 60 * SECOND, now: T0 });
  assert.equal(record.expiresAt, T0 + 60 * SECOND);
  assert.deepEqual(store.findByKey(key, T0 + 60 * SECOND - 1), record);
  assert.equal(store.findByKey(key, T0 + 60 * SECOND), null);
  assert.equal(store.findByKey(key, T0 + 3600 * SECOND), null);
});

test('revocation takes effect on the next lookup', () => {
  const { store } = newStore();
  const { record, key } = store.create({ plan: 'free', now: T0 });
  assert.ok(store.findByKey(key, T0 + 1));
  assert.equal(store.revoke(record.id, T0 + 2), true);
  assert.equal(store.findByKey(key, T0 + 3), null);
  assert.equal(store.get(record.id)?.revokedAt, T0 + 2);
});

test('revoking an unknown id returns false', () => {
  const { store } = newStore();
  assert.equal(store.revoke('key_0000000000000000', T0), false);
});

test('revoking twice keeps the first revocation time', () => {
  const { store } = newStore();
  const { record } = store.create({ plan: 'free', now: T0 });
  assert.equal(store.revoke(record.id, T0 + 10), true);
  assert.equal(store.revoke(record.id, T0 + 20), true);
  assert.equal(store.get(record.id)?.revokedAt, T0 + 10);
});

/** The server's key store and the keys command's, on two connections to one file. */
async function withTwoConnections(body: (server: SqliteKeysStore, cli: SqliteKeysStore) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'keys-store-'));
  const path = join(dir, 'keys.db');
  const serverDb = openDatabase(path);
  const cliDb = openDatabase(path);
  try {
    await body(createKeysStore(serverDb, { appEnv: 'staging' }), createKeysStore(cliDb, { appEnv: 'staging' }));
  } finally {
    serverDb.close();
    cliDb.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A request that arrives after the other connection's commit is handled in a later turn of the event loop. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

test('a revocation through another connection is seen by the lookup of the next request (the next event-loop turn)', () =>
  withTwoConnections(async (server, cli) => {
    const { record, key } = cli.create({ plan: 'free', now: T0 });
    assert.ok(server.findByKey(key, T0 + 1));
    cli.revoke(record.id, T0 + 2);
    await nextTurn();
    assert.equal(server.findByKey(key, T0 + 3), null);
  }));

test('a change of scopes through another connection replaces the cached key for the lookup of the next request', () =>
  withTwoConnections(async (server, cli) => {
    const { record, key } = cli.create({ plan: 'free', scopes: ['pets:read', 'orders:manage'], now: T0 });
    assert.deepEqual(server.findByKey(key, T0 + 1)?.scopes, ['pets:read', 'orders:manage'], 'cached now');
    cli.setScopes(record.id, ['pets:read']);
    await nextTurn();
    assert.deepEqual(server.findByKey(key, T0 + 2)?.scopes, ['pets:read']);
  }));

test('list returns every key, revoked and expired included, in creation order, without secrets', () => {
  const { store } = newStore();
  const a = store.create({ plan: 'free', label: 'a', now: T0 });
  const b = store.create({ plan: 'pro', label: 'b', expiresAt: T0 + 2 * SECOND, now: T0 + SECOND });
  const c = store.create({ plan: 'enterprise', label: 'c', perMinute: 7, perDay: 70, now: T0 + 2 * SECOND });
  store.revoke(a.record.id, T0 + 3 * SECOND);
  const list = store.list();
  assert.deepEqual(
    list.map((record) => record.label),
    ['a', 'b', 'c'],
  );
  assert.deepEqual(list[0], { ...a.record, revokedAt: T0 + 3 * SECOND });
  assert.deepEqual(list[1], b.record);
  assert.deepEqual(list[2], c.record);
  const text = JSON.stringify(list);
  for (const { key } of [a, b, c]) {
    assert.ok(!text.includes(key));
    assert.ok(!text.includes(hashApiKey(key)));
  }
});

test('count counts every key', () => {
  const { store } = newStore();
  assert.equal(store.count(), 0);
  store.create({ plan: 'free', now: T0 });
  const { record } = store.create({ plan: 'free', now: T0 });
  store.revoke(record.id, T0);
  assert.equal(store.count(), 2);
});

test('rotate issues a new key with the same account, scopes, plan, numbers and label and a new id', () => {
  const { store } = newStore();
  const old = store.create({ plan: 'enterprise', label: 'partner', scopes: ['orders:write'], perMinute: 900, perDay: 90_000, now: T0 });
  const result = store.rotate(old.record.id, 86_400, T0 + SECOND);
  assert.equal(result.outcome, 'rotated');
  if (result.outcome !== 'rotated') return;
  assert.notEqual(result.record.id, old.record.id);
  assert.notEqual(result.key, old.key);
  assert.deepEqual(result.record, {
    id: result.record.id,
    account: old.record.account,
    scopes: ['orders:write'],
    label: 'partner',
    plan: 'enterprise',
    perMinute: 900,
    perDay: 90_000,
    createdAt: T0 + SECOND,
    expiresAt: null,
    revokedAt: null,
  });
  assert.deepEqual(store.findByKey(result.key, T0 + SECOND), result.record);
  assert.equal(result.previous.id, old.record.id);
  assert.equal(result.previous.expiresAt, T0 + SECOND + 86_400 * SECOND);
  assert.deepEqual(store.get(old.record.id), result.previous);
});

test('after rotation the old key works for the grace period and not after', () => {
  const { store } = newStore();
  const old = store.create({ plan: 'free', now: T0 });
  const rotatedAt = T0 + 5 * SECOND;
  const result = store.rotate(old.record.id, 60, rotatedAt);
  assert.equal(result.outcome, 'rotated');
  assert.ok(store.findByKey(old.key, rotatedAt + 60 * SECOND - 1));
  assert.equal(store.findByKey(old.key, rotatedAt + 60 * SECOND), null);
  if (result.outcome === 'rotated') assert.ok(store.findByKey(result.key, rotatedAt + 3600 * SECOND));
});

test('rotation never extends an earlier expiry of the old key, and the new key keeps that expiry', () => {
  const { store } = newStore();
  const old = store.create({ plan: 'pro', expiresAt: T0 + 10 * SECOND, now: T0 });
  const result = store.rotate(old.record.id, 86_400, T0 + SECOND);
  assert.equal(result.outcome, 'rotated');
  if (result.outcome !== 'rotated') return;
  assert.equal(result.previous.expiresAt, T0 + 10 * SECOND);
  assert.equal(result.record.expiresAt, T0 + 10 * SECOND);
});

test('a grace of 0 ends the old key at once', () => {
  const { store } = newStore();
  const old = store.create({ plan: 'free', now: T0 });
  store.rotate(old.record.id, 0, T0 + SECOND);
  assert.equal(store.findByKey(old.key, T0 + SECOND), null);
});

test('rotate says why it did not rotate an unknown, revoked or expired key', () => {
  const { store } = newStore();
  assert.deepEqual(store.rotate('key_0000000000000000', 60, T0), { outcome: 'not_found' });
  const revoked = store.create({ plan: 'free', now: T0 });
  store.revoke(revoked.record.id, T0);
  assert.equal(store.rotate(revoked.record.id, 60, T0 + 1).outcome, 'revoked');
  const expired = store.create({ plan: 'free', expiresAt: T0 + SECOND, now: T0 });
  assert.equal(store.rotate(expired.record.id, 60, T0 + SECOND).outcome, 'expired');
  assert.equal(store.count(), 2, 'no key was created');
});

test('rotate refuses a negative or fractional grace', () => {
  const { store } = newStore();
  const { record } = store.create({ plan: 'free', now: T0 });
  assert.throws(() => store.rotate(record.id, -1, T0), RangeError);
  assert.throws(() => store.rotate(record.id, 1.5, T0), RangeError);
  assert.throws(() => store.rotate(record.id, Number.MAX_SAFE_INTEGER, T0), RangeError);
  assert.equal(store.count(), 1);
});

test('ensureDevelopmentKey creates one free key with all six scopes in an empty development database', async () => {
  const { store } = newStore('development');
  const key = await ensureDevelopmentKey(store, 'development', T0);
  assert.ok(key !== null && isWellFormedApiKey(key, 'development'));
  const record = store.findByKey(key, T0);
  assert.equal(record?.plan, 'free');
  assert.equal(record?.label, 'development');
  assert.deepEqual(record?.scopes, ['pets:read', 'pets:write', 'orders:write', 'orders:manage', 'events:read', 'webhooks:manage']);
  assert.equal(await ensureDevelopmentKey(store, 'development', T0 + 1), null, 'only once');
  assert.equal(store.count(), 1);
});

test('ensureDevelopmentKey does nothing when keys exist, even all revoked', async () => {
  const { store } = newStore('development');
  const { record } = store.create({ plan: 'pro', now: T0 });
  store.revoke(record.id, T0);
  assert.equal(await ensureDevelopmentKey(store, 'development', T0), null);
  assert.equal(store.count(), 1);
});

test('staging and production never create keys', async () => {
  for (const appEnv of ['staging', 'production'] as const) {
    const { store } = newStore(appEnv);
    assert.equal(await ensureDevelopmentKey(store, appEnv, T0), null);
    assert.equal(store.count(), 0);
  }
});

test('only the SHA-256 hash is stored: the plain key is nowhere in the database files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'keys-store-'));
  try {
    const db = openDatabase(join(dir, 'keys.db'));
    const store = createKeysStore(db, { appEnv: 'production' });
    const keys = [store.create({ plan: 'free', now: T0 }).key];
    const rotated = store.rotate(store.list()[0]!.id, 60, T0);
    if (rotated.outcome === 'rotated') keys.push(rotated.key);
    const hashes = db.prepare('SELECT key_hash FROM api_keys ORDER BY created_at, rowid').all();
    assert.deepEqual(
      hashes.map((row) => row.key_hash),
      keys.map(hashApiKey),
    );
    // Read the files while the connection is open (WAL included), then again after close.
    const scan = () => Buffer.concat(readdirSync(dir).map((name) => readFileSync(join(dir, name)))).toString('latin1');
    const whileOpen = scan();
    db.close();
    for (const bytes of [whileOpen, scan()]) {
      for (const key of keys) {
        assert.ok(!bytes.includes(key), 'plain key found');
        assert.ok(!bytes.includes(key.slice(8, 51)), 'random part found');
      }
      assert.ok(bytes.includes(hashApiKey(keys[0]!)), 'the hash is there: the scan reads the right files');
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an injected random source makes ids and keys reproducible', () => {
  const db = openDatabase(':memory:');
  const randomBytes = (size: number) => Buffer.alloc(size, 7);
  const store = createKeysStore(db, { appEnv: 'development', randomBytes });
  const { record, key } = store.create({ plan: 'free', now: T0 });
  assert.equal(record.id, 'key_0707070707070707');
  assert.equal(key, generateApiKey('development', randomBytes));
});
