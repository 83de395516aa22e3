/**
 * A database made by version 1.1 of the service is migrated at start, and every key it holds
 * keeps working: each gets an account of its own and all four scopes. The 1.1 database is made the
 * way 1.1 made it: its migrations (they are append-only) and its own INSERT of a key.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { generateApiKey, hashApiKey } from '../../../src/keys/api-keys.ts';
import { closeDatabase, migrate, openDatabase } from '../../../src/storage/sqlite/database.ts';
import { MIGRATIONS } from '../../../src/storage/sqlite/migrations.ts';
import { createKeysStore } from '../../../src/storage/sqlite/keys-store.ts';
import { tempDir } from '../../support/main-process.ts';
import { startTestServer } from '../../support/test-server.ts';

/** The schema version of 1.1: its last migration added the pets' versions. */
const VERSION_1_1 = 4;
const T0 = Date.UTC(2026, 0, 1);

/** A 1.1 database file with two keys (one revoked) and a pet, as 1.1's own statements wrote them. */
function databaseOf11(path: string): { key: string; id: string; revokedId: string } {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL');
  migrate(db, MIGRATIONS.slice(0, VERSION_1_1));
  const insert = db.prepare('INSERT INTO api_keys (id, key_hash, label, plan, per_minute, per_day, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  const key = generateApiKey('development');
  insert.run('key_00112233445566aa', hashApiKey(key), 'shop', 'enterprise', 1000, 100_000, T0, null);
  insert.run('key_00112233445566bb', hashApiKey(generateApiKey('development')), 'old', 'free', null, null, T0, null);
  db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?').run(T0 + 1, 'key_00112233445566bb');
  db.prepare("INSERT INTO pets (name, category_id, status) VALUES ('Rex', 1, 'available')").run();
  db.close();
  return { key, id: 'key_00112233445566aa', revokedId: 'key_00112233445566bb' };
}

test('a 1.1 database is migrated: each key gets an account of its own and all four scopes, and keeps working', async (t) => {
  const path = join(tempDir(t), 'v11.db');
  const { key, id, revokedId } = databaseOf11(path);
  const db = openDatabase(path);
  t.after(() => closeDatabase(db));
  assert.equal((db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version, MIGRATIONS.length);
  const keys = createKeysStore(db, { appEnv: 'development' });
  const record = keys.findByKey(key, T0 + 2)!;
  assert.equal(record.id, id);
  assert.equal(record.account, 'acct_00112233445566aa');
  assert.deepEqual(record.scopes, ['pets:read', 'pets:write', 'orders:write', 'orders:manage']);
  assert.deepEqual([record.label, record.plan, record.perMinute, record.perDay], ['shop', 'enterprise', 1000, 100_000]);
  const revoked = keys.get(revokedId)!;
  assert.equal(revoked.revokedAt, T0 + 1, 'a revoked key stays revoked');
  assert.notEqual(revoked.account, record.account, 'each key an account of its own');
  assert.deepEqual(keys.list().map((each) => each.id), [id, revokedId], 'in the order they were made');
  // A new key may join a migrated account.
  assert.equal(keys.create({ plan: 'free', account: record.account, now: T0 + 3 }).record.account, record.account);

  const server = await startTestServer(t, { db });
  const listed = await server.request('/v1/pets', { key });
  assert.equal(listed.status, 200);
  assert.equal((await listed.json() as unknown[]).length, 1, 'the 1.1 pet is there');
  assert.equal((await server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, { key })).status, 201, 'the old key may still write');
});

test('1.1 still runs on a migrated file (its statements on pets and Idempotency-Key records), should it have to be restarted', (t) => {
  const dir = tempDir(t, 'pets-back-');
  const path = join(dir, 'pets.db');
  databaseOf11(path);
  const db = openDatabase(path);
  t.after(() => closeDatabase(db));
  assert.equal((db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version, MIGRATIONS.length);
  // 1.1's upsert of a record, on the key it declared, and its lookup.
  const upsert = db.prepare(`INSERT INTO idempotency_keys (api_key_id, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
    VALUES (?, ?, 'fp', 201, '{}', ?, ?) ON CONFLICT (api_key_id, idempotency_key) DO UPDATE SET response_body = excluded.response_body`);
  upsert.run('key_00112233445566aa', 'k1', '{"id":1}', T0);
  upsert.run('key_00112233445566aa', 'k1', '{"id":2}', T0);
  const row = db.prepare('SELECT response_body FROM idempotency_keys WHERE api_key_id = ? AND idempotency_key = ?').get('key_00112233445566aa', 'k1') as { response_body: string };
  assert.equal(row.response_body, '{"id":2}');
  // 1.1's pet writes are counted in the inventory.
  const before = db.prepare("SELECT pets FROM pet_counts WHERE status = 'sold'").get() as { pets: number };
  db.prepare("INSERT INTO pets (name, category_id, status) VALUES ('Tom', 1, 'sold')").run();
  assert.equal((db.prepare("SELECT pets FROM pet_counts WHERE status = 'sold'").get() as { pets: number }).pets, before.pets + 1);
});
