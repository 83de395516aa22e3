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
import { runKeysCli } from '../../../src/cli/keys.ts';
import { allSucceeded } from '../../../src/lib/item-outcome.ts';
import { EVENT_TYPES } from '../../../src/storage/events.ts';
import { appendEvents, createEventsStore } from '../../../src/storage/postgres/event-log.ts';
import { createWebhooksStore } from '../../../src/storage/postgres/webhooks-store.ts';
import type { ClaimedDelivery } from '../../../src/storage/webhooks.ts';
import type { PostgresSql } from '../../../src/storage/postgres/driver.ts';
import { describeWithPostgres, openTestDatabase } from '../../support/postgres.ts';
import { startPostgresTestServer } from '../../support/test-server.ts';

describeWithPostgres('PostgreSQL schema migrations', (cluster) => {

  test('instances that start together migrate the schema once', async (t) => {
    const url = await cluster().createDatabase();
    const pools = [0, 1, 2, 3].map(() => connectPostgres(url, { poolSize: 1 }));
    const sqls = await Promise.all(pools);
    t.after(() => Promise.all(sqls.map((sql) => sql.end())));
    const applied = await Promise.all(sqls.map((sql) => migratePostgres(sql)));
    assert.deepEqual(applied.flat().sort((a, b) => a - b), MIGRATIONS.map((_, index) => index + 1), 'each version applied by exactly one instance');
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
  /** The schema of 1.1 is its migrations (they are append-only): 1.1 had the first. */
  const VERSION_1_1 = 1;
  /** 1.1's keys, each kind a 1.1 key could be, inserted by 1.1's own statement. */
  const KEYS_1_1 = [
    { id: 'key_00112233445566aa', label: 'shop', plan: 'free', perMinute: null, perDay: null, expiresAt: null },
    { id: 'key_00112233445566bb', label: 'partner', plan: 'enterprise', perMinute: '500', perDay: '50000', expiresAt: '4102444800000' },
    { id: 'key_00112233445566cc', label: 'old', plan: 'pro', perMinute: null, perDay: null, expiresAt: '2' },
  ] as const;

  async function schemaOf11(): Promise<{ sql: PostgresSql; url: string; key: string }> {
    const url = await cluster().createDatabase();
    const sql = await connectPostgres(url, { poolSize: 1 });
    await migratePostgres(sql, MIGRATIONS.slice(0, VERSION_1_1));
    const key = generateApiKey('development');
    for (const [index, each] of KEYS_1_1.entries()) {
      await sql`INSERT INTO api_keys (id, key_hash, label, plan, per_minute, per_day, created_at, expires_at)
                VALUES (${each.id}, ${hashApiKey(index === 0 ? key : generateApiKey('development'))}, ${each.label}, ${each.plan}, ${each.perMinute}, ${each.perDay}, 1, ${each.expiresAt})`;
    }
    return { sql, url, key };
  }

  const storedScopes = async (sql: PostgresSql) =>
    (await sql<{ id: string; scopes: string }[]>`SELECT id, scopes FROM api_keys ORDER BY seq`).map(({ id, scopes }) => ({ id, scopes }));

  test('each key of a 1.1 database gets an account of its own and pets:read,pets:write, never an order scope, and keeps working', async (t) => {
    const { sql, key } = await schemaOf11();
    t.after(() => sql.end());
    assert.deepEqual(await migratePostgres(sql), MIGRATIONS.slice(VERSION_1_1).map((_, index) => index + VERSION_1_1 + 1));
    assert.deepEqual(await storedScopes(sql), KEYS_1_1.map(({ id }) => ({ id, scopes: 'pets:read pets:write' })), 'all 3 keys, the expired one too');
    const keys = createKeysStore(sql, { appEnv: 'development' });
    const record = await keys.findByKey(key, 2);
    assert.equal(record?.account, 'acct_00112233445566aa');
    assert.deepEqual(record?.scopes, ['pets:read', 'pets:write']);
    assert.equal(new Set((await keys.list()).map((each) => each.account)).size, KEYS_1_1.length, 'each key an account of its own');
    const joined = await keys.create({ plan: 'pro', account: 'acct_00112233445566aa', scopes: ['pets:read'], now: 3 });
    assert.equal(joined.record.account, 'acct_00112233445566aa');
    await assert.rejects(Promise.resolve(keys.create({ plan: 'pro', account: 'acct_nobody', now: 3 })), UnknownAccountError);

    const server = await startPostgresTestServer(t, sql);
    assert.equal((await server.request('/v1/pets', { key })).status, 200);
    assert.equal((await server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, { key })).status, 201, 'the old key may still write pets');
    const orders = await server.request('/v1/store/orders', { key });
    assert.equal(orders.status, 403, 'but it sees no order');
    assert.equal(orders.headers.get('www-authenticate'), 'Bearer realm="pets", error="insufficient_scope", scope="orders:write"');
  });

  test('the keys command, the first of 1.3 to reach a 1.1 schema, migrates it the same way: no key holds orders:manage', async (t) => {
    const { sql, url } = await schemaOf11();
    t.after(() => sql.end());
    const run = async (...argv: string[]) => {
      let stdout = '';
      const code = await runKeysCli(argv, { APP_ENV: 'development', DATABASE_URL: url }, {
        clock: () => 3, stdout: { write: (text: string) => (stdout += text) }, stderr: { write: () => true },
      });
      return { code, stdout };
    };
    assert.deepEqual(await run('list', '--scope', 'orders:manage'), { code: 0, stdout: 'No API key holds orders:manage.\n' });
    const listed = JSON.parse((await run('list', '--json')).stdout) as { id: string; scopes: string[] }[];
    assert.deepEqual(listed.map(({ id, scopes }) => ({ id, scopes })), KEYS_1_1.map(({ id }) => ({ id, scopes: ['pets:read', 'pets:write'] })));
  });

  test('a schema that 1.2 migrated already is left as it is: its keys keep the scopes 1.2 gave them', async (t) => {
    const { sql } = await schemaOf11();
    t.after(() => sql.end());
    // The accounts-and-scopes migration as 1.2 shipped it: every key got all four scopes.
    const as12 = MIGRATIONS.map((text, index) => (index === 2 ? text.replace("DEFAULT 'pets:read pets:write'", "DEFAULT 'pets:read pets:write orders:write orders:manage'") : text));
    assert.notEqual(as12[2], MIGRATIONS[2]);
    await migratePostgres(sql, as12);
    assert.deepEqual(await migratePostgres(sql), [], 'no migration runs again');
    assert.deepEqual(await storedScopes(sql), KEYS_1_1.map(({ id }) => ({ id, scopes: 'pets:read pets:write orders:write orders:manage' })));
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
    const [placed] = await orders.placeMany([{ petId: 1n, account: owner.account, now: 2, expiresAt: 3_600_002, maxOpen: null, idempotency: {
      apiKeyId: 'key_a', key: 'k1', fingerprint: 'fp-order', createdAt: 2,
    } }]);
    assert.equal((placed as { kind: string }).kind, 'placed');
    await upsert('k1', '{"id":99}');
    const kept = await pets.findIdempotencyRecord('key_a', 'k1', 3);
    assert.ok(kept !== null && 'response' in kept && kept.response.body === '{"id":1}', 'the live record is kept, and read as the response 1.1 stored');
    const order = await orders.findIdempotencyRecord('key_a', 'k1', 3);
    assert.deepEqual(order !== null && 'made' in order ? order.made : null, (placed as { order: unknown }).order);
    const [old] = await sql<{ n: string }[]>`SELECT count(*)::text AS n FROM idempotency_keys WHERE api_key_id = 'key_a' AND idempotency_key = 'k1'`;
    assert.equal(old!.n, '1', '1.1 still finds exactly its own record');
    assert.deepEqual(await orders.inventory(), { available: 0, pending: 2, sold: 0 });
    assert.equal(await pets.purgeIdempotencyRecords(86_400_000 + 10, 10), 2, 'expired records of both operations are purged');
  });
});

describeWithPostgres('PostgreSQL: a 1.2 schema migrated to holds, and 1.2 instances beside 1.3 while instances are rolled', (cluster) => {
  /** The schema version of 1.2: its last migration was take_tokens' fifth. */
  const VERSION_1_2 = 5;
  const HOLD_MS = 172_800_000;

  test('placed orders get expiresAt = the migration\'s time + 48 h, the others none; an order a 1.2 instance places gets the same from the default; the sweep expires them then', async (t) => {
    const url = await cluster().createDatabase();
    const sql = await connectPostgres(url, { poolSize: 2 });
    t.after(() => sql.end({ timeout: 1 }));
    await migratePostgres(sql, MIGRATIONS.slice(0, VERSION_1_2));
    const owner = (await createKeysStore(sql, { appEnv: 'development' }).create({ plan: 'free', now: 1 })).record;
    await sql.unsafe(`INSERT INTO pets (name, category_id, status) VALUES ('Rex', 1, 'pending'), ('Tom', 1, 'pending'), ('Kit', 1, 'pending')`);
    // 1.2's INSERT of an order, as it sends it (no expires_at), and an approved one.
    const placeAs12 = (petId: string) => sql.unsafe(
      `INSERT INTO orders (pet_id, account, status, placed_at, updated_at) VALUES ($1::bigint, $2, 'placed', $3::bigint, $3::bigint) RETURNING id`, [petId, owner.account, 1]);
    await placeAs12('1');
    await sql.unsafe(`INSERT INTO orders (pet_id, account, status, placed_at, updated_at) VALUES (2, $1, 'approved', 1, 2)`, [owner.account]);
    const before = Date.now();
    await migratePostgres(sql);
    await placeAs12('3');
    const after = Date.now();
    const rows = await sql<{ status: string; expires_at: string | null }[]>`SELECT status, expires_at::text FROM orders ORDER BY id`;
    assert.deepEqual(rows.map((row) => [row.status, row.expires_at === null ? null : 'set']), [['placed', 'set'], ['approved', null], ['placed', 'set']]);
    for (const row of [rows[0]!, rows[2]!]) {
      const end = Number(row.expires_at);
      assert.ok(end >= before + HOLD_MS - 1 && end <= after + HOLD_MS, `${end - before - HOLD_MS} ms from the migration's time + 48 h`);
    }
    const orders = createOrdersStore(sql);
    assert.equal(await orders.expireDue(Number(rows[0]!.expires_at) - 1, 10), 0);
    assert.equal(await orders.expireDue(after + HOLD_MS, 10), 2);
    assert.deepEqual((await sql<{ status: string }[]>`SELECT status FROM pets ORDER BY id`).map((row) => row.status), ['available', 'pending', 'available']);
    assert.equal((await orders.get(2n))?.expiresAt, null);
  });
});

describeWithPostgres('PostgreSQL: an event log of schema version 8 migrated to the cheaper appends, then to ids by block', (cluster) => {
  /** The schema version before the event log's type became a domain and its index of ids partial. */
  const VERSION_8 = 8;
  // The sequencer of versions 8 and 9, which gave each event its id.
  const SEQUENCE_8 = `WITH pending AS (SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM events WHERE id IS NULL),
      block AS (SELECT count(*) AS total, CASE WHEN count(*) = 0 THEN 0
                  ELSE setval('event_ids', nextval('event_ids') + count(*) - 1) END AS last FROM pending)
    UPDATE events e SET id = block.last - block.total + pending.n FROM pending, block WHERE e.seq = pending.seq`;
  const sequence8 = (sql: PostgresSql) => sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtextextended('event log', 0))`;
    await tx.unsafe(SEQUENCE_8);
  });
  // The previous version's appends, as it sends them: a write's events, and a batch of creates with theirs.
  const APPEND_8 = `INSERT INTO events (seq, type, occurred_at, actor_account, actor_key_id, account, data) OVERRIDING SYSTEM VALUE
    SELECT nextval(pg_get_serial_sequence('events', 'seq')), t.type, floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
           t.actor_account, t.actor_key_id, t.account, t.data
      FROM (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS u(type, actor_account, actor_key_id, account, data, ord)
             ORDER BY u.ord) AS t`;
  const CREATE_8 = `WITH inserted AS (INSERT INTO pets (name, category_id, status)
       SELECT name, category_id::bigint, status FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(name, category_id, status, ord)
        ORDER BY ord RETURNING id, name, category_id, status, version),
    numbered AS (SELECT i.*, row_number() OVER (ORDER BY i.id) AS ord FROM inserted i),
    logged AS (
      INSERT INTO events (seq, type, occurred_at, actor_account, actor_key_id, account, data) OVERRIDING SYSTEM VALUE
      SELECT nextval(pg_get_serial_sequence('events', 'seq')), 'pet.created', floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
             c.actor_account, c.actor_key_id, NULL, c.data
        FROM (SELECT a.actor_account, a.actor_key_id, n.ord,
                     json_build_object('kind', 'pet', 'id', n.id, 'name', n.name, 'categoryId', n.category_id::text, 'status', n.status, 'version', n.version)::text AS data
                FROM numbered n JOIN unnest($4::text[], $5::text[]) WITH ORDINALITY AS a(actor_account, actor_key_id, ord) ON a.ord = n.ord
               ORDER BY n.ord) AS c)
    SELECT id FROM inserted`;
  const deletion = (id: number) => ['pet.deleted', null, null, null, JSON.stringify({ kind: 'pet_deleted', id })];
  const append8 = (sql: PostgresSql, rows: (string | null)[][]) => sql.unsafe(APPEND_8, rows[0]!.map((_, column) => rows.map((row) => row[column] ?? null)));

  const rowCount = async (sql: PostgresSql) => (await sql<{ n: number }[]>`SELECT count(*)::integer AS n FROM events`)[0]!.n;

  test('events with and without their ids are kept through both migrations, version 9 without a rewrite, and every append reads back in order', async (t) => {
    const url = await cluster().createDatabase();
    const sql = await connectPostgres(url, { poolSize: 2 });
    t.after(() => sql.end({ timeout: 1 }));
    await migratePostgres(sql, MIGRATIONS.slice(0, VERSION_8));
    // A webhook of pet deletions: each event below gets its delivery from the trigger.
    await sql`INSERT INTO accounts (id, created_at) VALUES ('acct_hooks', 0)`;
    await sql`INSERT INTO webhooks (account, url, types, orders, status, secret, created_at)
      VALUES ('acct_hooks', 'https://hooks.example.com/in', '{pet.deleted}', 'own', 'enabled', 'whsec_x', 0)`;
    await append8(sql, [deletion(1), deletion(2)]);
    await sequence8(sql);
    await append8(sql, [deletion(3)]);
    const [before] = await sql<{ file: string }[]>`SELECT pg_relation_filenode('events')::text AS file`;
    assert.deepEqual(await migratePostgres(sql, MIGRATIONS.slice(0, VERSION_8 + 1)), [VERSION_8 + 1]);
    const [after] = await sql<{ file: string }[]>`SELECT pg_relation_filenode('events')::text AS file`;
    assert.equal(after!.file, before!.file, 'the events stay where they were: the column became the domain without a rewrite');
    // Version 8's statements beside version 9: its appends, its creates and its sequencer.
    await append8(sql, [deletion(4)]);
    await sql.unsafe(CREATE_8, [['Rex'], ['7'], ['available'], ['acct_old'], ['key_old']]);
    await sequence8(sql);
    // Waits for its id when the log is numbered by block: it becomes a block of its own.
    await append8(sql, [deletion(5)]);
    assert.deepEqual(await migratePostgres(sql), [VERSION_8 + 2]);
    const [blocks] = await sql<{ file: string }[]>`SELECT pg_relation_filenode('events')::text AS file`;
    assert.equal(blocks!.file, before!.file, 'nor does numbering by block rewrite them');
    await sql.begin((tx) => appendEvents(tx as unknown as PostgresSql, [{ type: 'pet.deleted', actor: null, subject: { kind: 'pet_deleted', id: 6 } }]));
    const [created] = allSucceeded(await createPetsStore(sql).insertMany([{ name: 'Kit', categoryId: 7n, status: 'sold', actor: { account: 'acct_new', keyId: 'key_new' } }]));
    const events = createEventsStore(sql);
    const page = await events.page({ afterId: 0, limit: 100, types: EVENT_TYPES, account: null });
    assert.deepEqual(page.map((event) => [event.id, event.type, event.actor?.keyId ?? null, event.subject.kind === 'pet' ? event.subject.pet.name : (event.subject as { id: number }).id]),
      [[1, 'pet.deleted', null, 1], [2, 'pet.deleted', null, 2], [3, 'pet.deleted', null, 3], [4, 'pet.deleted', null, 4],
        [5, 'pet.created', 'key_old', 'Rex'], [6, 'pet.deleted', null, 5], [7, 'pet.deleted', null, 6], [8, 'pet.created', 'key_new', 'Kit']]);
    assert.deepEqual(page.at(-1)!.subject, { kind: 'pet', pet: created });
    assert.equal(await events.latestId(), 8);
    assert.deepEqual((await events.page({ afterId: 5, limit: 2, types: EVENT_TYPES, account: null })).map((event) => event.id), [6, 7]);
    // Every deletion's delivery, made before or after the migration, is claimed with its event and its id.
    // (A claim takes a few deliveries of one webhook at a time: claims until none is left.)
    const webhooks = createWebhooksStore(sql);
    const claimed: ClaimedDelivery[] = [];
    for (;;) {
      const got = await webhooks.claimDue('h', Date.now(), 30_000, 16, new Set());
      if (got.length === 0) break;
      claimed.push(...got);
    }
    assert.deepEqual(claimed.map((delivery) => [delivery.event.id, (delivery.event.subject as { id: number }).id]).sort((a, b) => a[0]! - b[0]!),
      [[1, 1], [2, 2], [3, 3], [4, 4], [6, 5], [7, 6]]);
  });

  test('once numbered by block, the previous version\'s appends, creates and sequencer fail and leave nothing', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    await sql.begin((tx) => appendEvents(tx as unknown as PostgresSql, [{ type: 'pet.deleted', actor: null, subject: { kind: 'pet_deleted', id: 1 } }]));
    const pets = (await sql<{ n: number }[]>`SELECT count(*)::integer AS n FROM pets`)[0]!.n;
    await assert.rejects(append8(sql, [deletion(2)]), { code: '23502' }, 'no row key to draw');
    await assert.rejects(sql.unsafe(CREATE_8, [['Rex'], ['7'], ['available'], ['acct_old'], ['key_old']]), { code: '23502' });
    await assert.rejects(sequence8(sql), { code: '42P01' }, 'its sequence is renamed');
    assert.equal(await rowCount(sql), 1);
    assert.equal((await sql<{ n: number }[]>`SELECT count(*)::integer AS n FROM pets`)[0]!.n, pets, 'the create went with its events');
    assert.equal(await createEventsStore(sql).latestId(), 1);
  });

  test('a type outside the list and an id given twice are still refused', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    const append = (type: string, id: number) => sql.begin((tx) => appendEvents(tx as unknown as PostgresSql, [{ type: type as 'pet.deleted', actor: null, subject: { kind: 'pet_deleted', id } }]));
    await assert.rejects(append('pet.adopted', 1), { code: '23514' });
    await append('pet.deleted', 1);
    await append('pet.deleted', 2);
    assert.equal(await createEventsStore(sql).latestId(), 2);
    await assert.rejects(sql`UPDATE events SET id = 1 WHERE id = 2`, { code: '23505' });
    assert.deepEqual((await sql<{ n: number }[]>`SELECT count(*)::integer AS n FROM events WHERE id IS NULL AND block_events IS NOT NULL`)[0]!.n, 0);
  });
});
