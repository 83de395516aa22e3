/**
 * A database made by version 1.1 of the service is migrated at start, and every key it holds
 * keeps working as it did: each gets an account of its own and the pet scopes, all that a 1.1 key
 * could do, never an order scope. The 1.1 database is made the way 1.1 made it: its migrations
 * (they are append-only) and its own INSERT of a key. A database that 1.2 migrated already is
 * left as it is, but for the holds of its placed orders.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { generateApiKey, hashApiKey } from '../../../src/keys/api-keys.ts';
import { closeDatabase, migrate, openDatabase } from '../../../src/storage/sqlite/database.ts';
import { MIGRATIONS } from '../../../src/storage/sqlite/migrations.ts';
import { createKeysStore } from '../../../src/storage/sqlite/keys-store.ts';
import { createOrdersStore } from '../../../src/storage/sqlite/orders-store.ts';
import { createEventAppender } from '../../../src/storage/sqlite/event-log.ts';
import { runKeysCli } from '../../../src/cli/keys.ts';
import { tempDir } from '../../support/main-process.ts';
import { errorBody, startTestServer } from '../../support/test-server.ts';

/** The schema version of 1.1: its last migration added the pets' versions. */
const VERSION_1_1 = 4;
const T0 = Date.UTC(2026, 0, 1);

/** The keys of the 1.1 database: each kind a 1.1 key could be. */
const KEYS_1_1 = [
  { id: 'key_00112233445566aa', label: 'shop', plan: 'enterprise', perMinute: 1000, perDay: 100_000, expiresAt: null, revoked: false },
  { id: 'key_00112233445566bb', label: 'old', plan: 'free', perMinute: null, perDay: null, expiresAt: null, revoked: true },
  { id: 'key_00112233445566cc', label: 'catalogue page', plan: 'pro', perMinute: null, perDay: null, expiresAt: T0 + 365 * 86_400_000, revoked: false },
  { id: 'key_00112233445566dd', label: 'trial', plan: 'business', perMinute: null, perDay: null, expiresAt: T0 + 1, revoked: false },
] as const;

/** A 1.1 database file with its keys and a pet, as 1.1's own statements wrote them; the plain key of the first. */
function databaseOf11(path: string): string {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL');
  migrate(db, MIGRATIONS.slice(0, VERSION_1_1));
  const insert = db.prepare('INSERT INTO api_keys (id, key_hash, label, plan, per_minute, per_day, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
  const key = generateApiKey('development');
  for (const [index, each] of KEYS_1_1.entries()) {
    insert.run(each.id, hashApiKey(index === 0 ? key : generateApiKey('development')), each.label, each.plan, each.perMinute, each.perDay, T0, each.expiresAt);
    if (each.revoked) db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ?').run(T0 + 1, each.id);
  }
  db.prepare("INSERT INTO pets (name, category_id, status) VALUES ('Rex', 1, 'available')").run();
  db.close();
  return key;
}

/** Every key's id and stored scopes, read straight from the table. */
function storedScopes(db: DatabaseSync): { id: string; scopes: string }[] {
  return db.prepare('SELECT id, scopes FROM api_keys ORDER BY rowid').all().map((row) => ({ ...row }) as { id: string; scopes: string });
}

/** The keys command run on the file, as an operator runs it; its exit code and stdout. */
async function keysCommand(path: string, ...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const output = { stdout: '', stderr: '' };
  const code = await runKeysCli(argv, { APP_ENV: 'development', DATABASE_PATH: path }, {
    clock: () => T0 + 2,
    stdout: { write: (text: string) => (output.stdout += text) },
    stderr: { write: (text: string) => (output.stderr += text) },
  });
  return { code, ...output };
}

test('a 1.1 database is migrated: each key gets an account of its own and pets:read,pets:write, never an order scope, and keeps working on pets', async (t) => {
  const path = join(tempDir(t), 'v11.db');
  const key = databaseOf11(path);
  const db = openDatabase(path);
  t.after(() => closeDatabase(db));
  assert.equal((db.prepare('PRAGMA user_version').get() as { user_version: number }).user_version, MIGRATIONS.length);
  assert.deepEqual(storedScopes(db), KEYS_1_1.map(({ id }) => ({ id, scopes: 'pets:read pets:write' })), 'all 4 keys, the revoked and the expired too');
  const keys = createKeysStore(db, { appEnv: 'development' });
  const record = keys.findByKey(key, T0 + 2)!;
  assert.equal(record.id, KEYS_1_1[0].id);
  assert.equal(record.account, 'acct_00112233445566aa');
  assert.deepEqual(record.scopes, ['pets:read', 'pets:write']);
  assert.deepEqual([record.label, record.plan, record.perMinute, record.perDay], ['shop', 'enterprise', 1000, 100_000]);
  const listed = keys.list();
  assert.deepEqual(listed.map((each) => each.id), KEYS_1_1.map(({ id }) => id), 'in the order they were made');
  assert.equal(new Set(listed.map((each) => each.account)).size, KEYS_1_1.length, 'each key an account of its own');
  assert.equal(keys.get(KEYS_1_1[1].id)!.revokedAt, T0 + 1, 'a revoked key stays revoked');
  // A new key may join a migrated account.
  assert.equal(keys.create({ plan: 'free', account: record.account, scopes: ['orders:write'], now: T0 + 3 }).record.account, record.account);

  const server = await startTestServer(t, { db });
  server.clock.now = T0 + 2;
  const pets = await server.request('/v1/pets', { key });
  assert.equal(pets.status, 200);
  assert.equal((await pets.json() as unknown[]).length, 1, 'the 1.1 pet is there');
  assert.equal((await server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, { key })).status, 201, 'the old key may still write pets');
  const orders = await server.request('/v1/store/orders', { key });
  assert.equal(orders.status, 403, 'but it sees no order');
  assert.equal((await errorBody(orders)).code, 'insufficient_scope');
  assert.equal(orders.headers.get('www-authenticate'), 'Bearer realm="pets", error="insufficient_scope", scope="orders:write"');
  assert.equal((await server.post('/v1/store/orders', { petId: 1 }, { key })).status, 403, 'and may place none');
});

test('the keys command, the first to open a 1.1 file, migrates it the same way: no key holds orders:manage', async (t) => {
  const path = join(tempDir(t), 'v11.db');
  databaseOf11(path);
  const manage = await keysCommand(path, 'list', '--scope', 'orders:manage');
  assert.deepEqual(manage, { code: 0, stdout: 'No API key holds orders:manage.\n', stderr: '' });
  const all = JSON.parse((await keysCommand(path, 'list', '--json')).stdout) as { id: string; scopes: string[] }[];
  assert.deepEqual(all.map(({ id, scopes }) => ({ id, scopes })), KEYS_1_1.map(({ id }) => ({ id, scopes: ['pets:read', 'pets:write'] })));
});

/** 1.2's migrations as 1.2 shipped them: the accounts-and-scopes one gave every key all four scopes. */
const MIGRATIONS_1_2 = MIGRATIONS.map((sql, index) =>
  index === VERSION_1_1 ? sql.replace("'pets:read pets:write',", "'pets:read pets:write orders:write orders:manage',") : sql);

test('a database that 1.2 migrated already is left as it is: its keys keep the scopes 1.2 gave them, for the operator to find and narrow', async (t) => {
  assert.notEqual(MIGRATIONS_1_2[VERSION_1_1], MIGRATIONS[VERSION_1_1], 'the migration as 1.2 shipped it differs');
  const path = join(tempDir(t), 'v12.db');
  const key = databaseOf11(path);
  const by12 = new DatabaseSync(path);
  migrate(by12, MIGRATIONS_1_2);
  by12.close();
  const db = openDatabase(path);
  t.after(() => closeDatabase(db));
  assert.deepEqual(storedScopes(db), KEYS_1_1.map(({ id }) => ({ id, scopes: 'pets:read pets:write orders:write orders:manage' })), 'no migration ran again');
  const found = JSON.parse((await keysCommand(path, 'list', '--scope', 'orders:manage', '--json')).stdout) as { id: string }[];
  assert.deepEqual(found.map(({ id }) => id), KEYS_1_1.map(({ id }) => id));
  assert.deepEqual(await keysCommand(path, 'scopes', KEYS_1_1[0].id, 'pets:read,pets:write'), {
    code: 0, stdout: `${KEYS_1_1[0].id} now has the scopes pets:read,pets:write\n`, stderr: '',
  });
  assert.deepEqual(createKeysStore(db, { appEnv: 'development' }).findByKey(key, T0 + 2)!.scopes, ['pets:read', 'pets:write']);
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

/** The schema version of 1.2: its last migration added orders. */
const VERSION_1_2 = 6;
const HOLD_MS = 172_800_000;

test('a 1.2 database is migrated to holds: its placed orders get expiresAt = the migration\'s time + 48 h, the others none, and the sweep finds them then', (t) => {
  const dir = tempDir(t, 'pets-holds-');
  const path = join(dir, 'pets.db');
  const by12 = new DatabaseSync(path);
  migrate(by12, MIGRATIONS.slice(0, VERSION_1_2));
  by12.exec(`INSERT INTO accounts (id, created_at) VALUES ('acct_aa', 1);
    INSERT INTO pets (name, category_id, status) VALUES ('Rex', 1, 'pending'), ('Tom', 1, 'pending'), ('Kit', 1, 'available');
    INSERT INTO orders (pet_id, account, status, placed_at, updated_at) VALUES (1, 'acct_aa', 'placed', 1, 1), (2, 'acct_aa', 'approved', 1, 2), (3, 'acct_aa', 'cancelled', 1, 3);`);
  by12.close();
  const before = Date.now();
  const db = openDatabase(path);
  t.after(() => closeDatabase(db));
  const after = Date.now();
  const rows = db.prepare('SELECT status, expires_at FROM orders ORDER BY id').all() as { status: string; expires_at: number | null }[];
  assert.deepEqual(rows.map((row) => [row.status, row.expires_at === null ? null : 'set']), [['placed', 'set'], ['approved', null], ['cancelled', null]]);
  const end = rows[0]!.expires_at!;
  assert.ok(end >= before + HOLD_MS - 1 && end <= after + HOLD_MS, `${end - before - HOLD_MS} ms from the migration's time + 48 h`);
  const orders = createOrdersStore(db);
  assert.equal(orders.expireDue(end - 1, 10), 0);
  assert.equal(orders.expireDue(end, 10), 1);
  assert.deepEqual(db.prepare('SELECT status FROM pets ORDER BY id').all().map((row) => row.status), ['available', 'pending', 'available']);
});

/** The schema version whose event log gave ids by AUTOINCREMENT and checked types with IN (...). */
const VERSION_EVENTS_AUTOINCREMENT = 9;

/** A file at that version with `events` appended and waiting deliveries of a webhook, as that version's statements wrote them. */
function databaseOfEvents9(path: string, events: number): DatabaseSync {
  const db = new DatabaseSync(path);
  db.exec('PRAGMA journal_mode = WAL');
  migrate(db, MIGRATIONS.slice(0, VERSION_EVENTS_AUTOINCREMENT));
  db.exec(`INSERT INTO accounts (id, created_at) VALUES ('acct_aa', 1);
    INSERT INTO webhooks (account, url, types, orders, status, secret, created_at) VALUES ('acct_aa', 'https://example.com/hook', 'pet.created', 'own', 'enabled', 'whsec_x', 1);`);
  const append = db.prepare("INSERT INTO events (type, occurred_at, actor_account, actor_key_id, account, data) VALUES ('pet.created', ?, 'acct_aa', 'key_1', NULL, ?)");
  for (let index = 1; index <= events; index++) append.run(T0 + index, `{"kind":"pet","id":${index}}`);
  return db;
}

const eventIds = (db: DatabaseSync) => db.prepare('SELECT id FROM events ORDER BY id').all().map((row) => row.id);
const deliveries = (db: DatabaseSync) => db.prepare('SELECT webhook_id, event_id, attempt FROM webhook_deliveries ORDER BY event_id').all().map((row) => ({ ...row }));

test('the event log rebuilt without AUTOINCREMENT keeps every event and waiting delivery, and the ids go on above the highest ever given', (t) => {
  const path = join(tempDir(t, 'events-10-'), 'pets.db');
  const by9 = databaseOfEvents9(path, 5);
  // Retention deleted the first two (and recorded it); event 3's delivery was made.
  by9.exec("DELETE FROM events WHERE id <= 2; UPDATE event_log SET deleted_through = 2; DELETE FROM webhook_deliveries WHERE event_id = 3; UPDATE webhook_deliveries SET attempt = 2 WHERE event_id = 5;");
  const rowsBefore = by9.prepare('SELECT * FROM events ORDER BY id').all();
  by9.close();

  const db = openDatabase(path);
  t.after(() => closeDatabase(db));
  assert.deepEqual(db.prepare('SELECT * FROM events ORDER BY id').all(), rowsBefore, 'every row as it was');
  assert.deepEqual(deliveries(db), [{ webhook_id: 1, event_id: 4, attempt: 1 }, { webhook_id: 1, event_id: 5, attempt: 2 }], 'the waiting deliveries kept');
  const schema = (db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'events'").get() as { sql: string }).sql;
  assert.doesNotMatch(schema, /AUTOINCREMENT|\bIN\b/);
  assert.equal(db.prepare("SELECT count(*) AS n FROM sqlite_sequence WHERE name = 'events'").get()!.n, 0);
  // The previous version's append, without an id, still takes the next one, and its trigger still delivers.
  db.prepare("INSERT INTO events (type, occurred_at, account, data) VALUES ('pet.created', 1, NULL, '{}')").run();
  assert.deepEqual(eventIds(db), [3, 4, 5, 6]);
  assert.deepEqual(deliveries(db).map((row) => row.event_id), [4, 5, 6]);
  // The same types are refused as before.
  assert.throws(() => db.prepare("INSERT INTO events (type, occurred_at, data) VALUES ('pet.sold', 1, '{}')").run(), /CHECK constraint failed/);
  assert.throws(() => db.prepare("INSERT INTO events (type, occurred_at, data) VALUES ('PET.CREATED', 1, '{}')").run(), /CHECK constraint failed/);
  // Deleting an event still takes its deliveries with it.
  db.exec('DELETE FROM events WHERE id = 4');
  assert.deepEqual(deliveries(db).map((row) => row.event_id), [5, 6]);
});

test('a log that retention emptied under AUTOINCREMENT keeps its sequence: the next event after the rebuild is above every id ever given', (t) => {
  const path = join(tempDir(t, 'events-10-empty-'), 'pets.db');
  const by9 = databaseOfEvents9(path, 3);
  // Emptied without recording the highest id deleted: only sqlite_sequence still knows it.
  by9.exec('DELETE FROM events');
  by9.close();
  const db = openDatabase(path);
  t.after(() => closeDatabase(db));
  assert.equal(db.prepare('SELECT deleted_through FROM event_log').get()!.deleted_through, 3);
  const append = createEventAppender(db, () => T0);
  append([{ type: 'pet.deleted', actor: null, subject: { kind: 'pet_deleted', id: 1 } }]);
  assert.deepEqual(eventIds(db), [4]);
  append([{ type: 'pet.deleted', actor: null, subject: { kind: 'pet_deleted', id: 2 } }, { type: 'pet.deleted', actor: null, subject: { kind: 'pet_deleted', id: 3 } }]);
  assert.deepEqual(eventIds(db), [4, 5, 6]);
});
