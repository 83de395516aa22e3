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
import { createOrdersStore } from '../../../src/storage/postgres/orders-store.ts';
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

  test('arrays sent as parameters arrive as they were, whatever their characters', async (t) => {
    const { sql } = await openTestDatabase(t, cluster(), { poolSize: 1 });
    const texts = ['plain', 'a "quoted" one', 'back\\slash', 'comma, {braces}', 'NULL', '', 'ünïcödé ✓', null];
    const rows = await sql.unsafe<{ value: string | null }[]>('SELECT value FROM unnest($1::text[]) WITH ORDINALITY AS t(value, ord) ORDER BY ord', [texts]);
    assert.deepEqual(rows.map((row) => row.value), texts);
    const numbers = await sql.unsafe<{ value: string }[]>('SELECT value::text FROM unnest($1::bigint[]) AS t(value)', [['9223372036854775807', '-1']]);
    assert.deepEqual(numbers.map((row) => row.value), ['9223372036854775807', '-1']);
    const counts = await sql`SELECT array_length(${sql.array([1, 2, 3])}::integer[], 1) AS n`;
    assert.equal(counts[0]!.n, 3);
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

describeWithPostgres('PostgreSQL: instances of 1.1 beside 1.2 while instances are rolled', (cluster) => {
  test('the statements a 1.1 instance sends still run on the migrated schema, and its writes are counted in the inventory', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    const orders = createOrdersStore(sql);
    const pets = createPetsStore(sql);
    const owner = (await createKeysStore(sql, { appEnv: 'development' }).create({ plan: 'free', now: 1 })).record;
    // 1.1's create, status change and deletion of pets, as it sends them.
    await sql.unsafe(`INSERT INTO pets (name, category_id, status) SELECT name, category_id::bigint, status
      FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(name, category_id, status, ord) ORDER BY ord`,
      [['Rex', 'Tom', 'Kit'], ['1', '1', '1'], ['available', 'available', 'sold']]);
    await sql.unsafe(`UPDATE pets SET name = coalesce($2, name), category_id = coalesce($3::bigint, category_id),
      status = coalesce($4, status), version = version + 1 WHERE id = $1::bigint AND version = coalesce($5::integer, version)`, ['2', null, null, 'pending', null]);
    await sql.unsafe('DELETE FROM pets WHERE id = $1::bigint AND version = coalesce($2::integer, version)', ['3', null]);
    // 1.1's Idempotency-Key record, looked up and upserted on the key it was declared with.
    const upsert = (key: string, body: string) => sql.unsafe(
      `INSERT INTO idempotency_keys AS k (api_key_id, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::text[], $6::text[], $7::bigint[])
       ON CONFLICT (api_key_id, idempotency_key) DO UPDATE SET response_body = excluded.response_body
       WHERE k.created_at <= excluded.created_at - 86400000`,
      [['key_a'], [key], ['fp'], [201], ['{}'], [body], [1]]);
    await upsert('k1', '{"id":1}');
    // A 1.2 instance places an order with the same Idempotency-Key: another request, another record.
    const [placed] = await orders.placeMany([{ petId: 1n, account: owner.account, now: 2, idempotency: {
      apiKeyId: 'key_a', key: 'k1', fingerprint: 'fp-order', createdAt: 2, respond: () => ({ status: 201, headers: {}, body: '{"order":1}' }),
    } }]);
    assert.equal((placed as { kind: string }).kind, 'placed');
    await upsert('k1', '{"id":99}');
    assert.equal((await pets.findIdempotencyRecord('key_a', 'k1', 3))?.response.body, '{"id":1}', 'the live record is kept');
    assert.equal((await orders.findIdempotencyRecord('key_a', 'k1', 3))?.response.body, '{"order":1}');
    const [old] = await sql<{ n: string }[]>`SELECT count(*)::text AS n FROM idempotency_keys WHERE api_key_id = 'key_a' AND idempotency_key = 'k1'`;
    assert.equal(old!.n, '1', '1.1 still finds exactly its own record');
    assert.deepEqual(await orders.inventory(), { available: 0, pending: 2, sold: 0 });
    assert.equal(await pets.purgeIdempotencyRecords(86_400_000 + 10, 10), 2, 'expired records of both operations are purged');
  });
});
