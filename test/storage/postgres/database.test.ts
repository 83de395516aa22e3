/** Connecting and migrating PostgreSQL, on a real cluster. */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { classifyError, connectPostgres, migratePostgres } from '../../../src/storage/postgres/database.ts';
import { MIGRATIONS } from '../../../src/storage/postgres/migrations.ts';
import { createPetsStore } from '../../../src/storage/postgres/pets-store.ts';
import { DatabaseUnavailableError } from '../../../src/storage/errors.ts';
import { createKeysStore } from '../../../src/storage/postgres/keys-store.ts';
import { UnknownAccountError } from '../../../src/storage/keys.ts';
import { generateApiKey, hashApiKey } from '../../../src/keys/api-keys.ts';
import { describeWithPostgres, openTestDatabase } from '../../support/postgres.ts';

describeWithPostgres('PostgreSQL schema migrations', (cluster) => {

  test('instances that start together migrate the schema once', async (t) => {
    const url = await cluster().createDatabase();
    const pools = [0, 1, 2, 3].map(() => connectPostgres(url, { poolSize: 1 }));
    const sqls = await Promise.all(pools);
    t.after(() => Promise.all(sqls.map((sql) => sql.end())));
    const applied = await Promise.all(sqls.map((sql) => migratePostgres(sql)));
    assert.deepEqual(applied.flat().sort(), MIGRATIONS.map((_, index) => index + 1), 'each version applied by exactly one instance');
    assert.equal(applied.filter((versions) => versions.length > 0).length, 1);
    const rows = await sqls[0]!<{ version: number }[]>`SELECT version FROM schema_migrations ORDER BY version`;
    assert.deepEqual(rows.map((row) => row.version), MIGRATIONS.map((_, index) => index + 1));
  });

  test('a later start applies only the new versions, in order, and a failed one applies nothing', async (t) => {
    const url = await cluster().createDatabase();
    const sql = await connectPostgres(url, { poolSize: 1 });
    t.after(() => sql.end());
    const first = ['CREATE TABLE a (x integer)'];
    assert.deepEqual(await migratePostgres(sql, first), [1]);
    assert.deepEqual(await migratePostgres(sql, first), []);
    await assert.rejects(migratePostgres(sql, [...first, 'CREATE TABLE b (y integer)', 'CREATE TABLE broken (']));
    const tables = await sql<{ name: string }[]>`SELECT tablename AS name FROM pg_tables WHERE tablename IN ('a', 'b') ORDER BY 1`;
    assert.deepEqual(tables.map((row) => row.name), ['a'], 'version 2 rolled back with the broken version 3');
    assert.deepEqual(await migratePostgres(sql, [...first, 'CREATE TABLE b (y integer)']), [2]);
  });

  test('an unreachable database is "unavailable", a broken statement is not', async (t) => {
    const sql = await connectPostgres('postgres://tests@127.0.0.1:1/none', { poolSize: 1, connectTimeoutSeconds: 2 });
    t.after(() => sql.end());
    await assert.rejects(migratePostgres(sql), (error: unknown) => error instanceof DatabaseUnavailableError && error.reason === 'ECONNREFUSED');
    assert.ok(classifyError(Object.assign(new Error('x'), { code: '57P01' })) instanceof DatabaseUnavailableError, 'admin shutdown');
    assert.ok(classifyError(Object.assign(new Error('x'), { code: '08006' })) instanceof DatabaseUnavailableError, 'connection failure');
    assert.ok(classifyError(Object.assign(new Error('x'), { code: '57014' })) instanceof DatabaseUnavailableError, 'statement timeout');
    const duplicate = Object.assign(new Error('x'), { code: '23505' });
    assert.equal(classifyError(duplicate), duplicate);
  });

  test('after PostgreSQL restarts, a read on a pooled connection is answered, not refused', async (t) => {
    const { sql } = await openTestDatabase(t, cluster(), { poolSize: 1 });
    const pets = createPetsStore(sql);
    assert.equal(await pets.get(1n), null);
    cluster().stop();
    try {
      await assert.rejects(async () => pets.get(1n), DatabaseUnavailableError);
    } finally {
      cluster().start();
    }
    assert.equal(await pets.get(1n), null, 'the stale connection is replaced and the read sent again');
  });
});

describeWithPostgres('PostgreSQL: a 1.1 schema migrated to accounts and scopes', (cluster) => {
  test('each key of a 1.1 database gets an account of its own and all four scopes, and keeps working', async (t) => {
    const url = await cluster().createDatabase();
    const sql = await connectPostgres(url, { poolSize: 1 });
    t.after(() => sql.end());
    // The schema of 1.1 is its migrations (they are append-only), and its keys its own INSERT.
    await migratePostgres(sql, MIGRATIONS.slice(0, 1));
    const key = generateApiKey('development');
    await sql`INSERT INTO api_keys (id, key_hash, label, plan, per_minute, per_day, created_at, expires_at)
              VALUES ('key_00112233445566aa', ${hashApiKey(key)}, 'shop', 'free', NULL, NULL, 1, NULL)`;
    assert.deepEqual(await migratePostgres(sql), MIGRATIONS.slice(1).map((_, index) => index + 2));
    const keys = createKeysStore(sql, { appEnv: 'development' });
    const record = await keys.findByKey(key, 2);
    assert.equal(record?.account, 'acct_00112233445566aa');
    assert.deepEqual(record?.scopes, ['pets:read', 'pets:write', 'orders:write', 'orders:manage']);
    const joined = await keys.create({ plan: 'pro', account: 'acct_00112233445566aa', scopes: ['pets:read'], now: 3 });
    assert.equal(joined.record.account, 'acct_00112233445566aa');
    await assert.rejects(Promise.resolve(keys.create({ plan: 'pro', account: 'acct_nobody', now: 3 })), UnknownAccountError);
  });
});
