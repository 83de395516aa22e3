/**
 * The plans of the service's statements on PostgreSQL: each finds its rows through an index,
 * whatever the statistics say. PostgreSQL keeps a plan per connection (a generic plan, after
 * five executions of a prepared statement or of a statement in a function); one made while a
 * table was small, or seen as small by its last ANALYZE, can be a sequential scan, and stays one
 * as the table grows until the table is analysed again (src/storage/postgres/database.ts,
 * SESSION_SETTINGS, has the figures).
 *
 * Each test makes that happen on purpose: statistics taken on a handful of rows, autovacuum off,
 * the plan made then, a few thousand rows added, and the kept plan read with EXPLAIN. Each also
 * shows that without the settings the service gives its role (SESSION_SETTINGS; a connection's
 * own start-up parameters override them) the same steps give a sequential scan, so that the test
 * would see the problem come back.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectPostgres, migratePostgres } from '../../../src/storage/postgres/database.ts';
import { loadDriver, type PostgresSql } from '../../../src/storage/postgres/driver.ts';
import { EVENT_BLOCK_SPAN, EVENT_PAGE, LATEST_EVENT_ID } from '../../../src/storage/postgres/event-log.ts';
import { KEYS_BY_HASH } from '../../../src/storage/postgres/keys-store.ts';
import { PAGES, PETS_BY_ID } from '../../../src/storage/postgres/pet-reads.ts';
import { describeWithPostgres, type PostgresCluster } from '../../support/postgres.ts';

/** Rows when the statistics are taken, and rows added after the plan is made. */
const FEW = 20;
const MANY = 3_000;

/**
 * A migrated database with one connection that prepares its statements, with the settings of the
 * service's role or, for the control, without them.
 */
async function database(t: { after(fn: () => Promise<void>): void }, cluster: PostgresCluster, indexesOnly: boolean, notices: string[] = []): Promise<PostgresSql> {
  const url = await cluster.createDatabase();
  const setup = await connectPostgres(url, { poolSize: 1 });
  await migratePostgres(setup);
  await setup.end({ timeout: 1 });
  const postgres = await loadDriver();
  const sql = postgres(url, {
    max: 1,
    prepare: true,
    onnotice: (notice) => notices.push(String(notice.message)),
    connection: { ...(indexesOnly ? {} : { enable_seqscan: 'on', jit: 'on' }), plan_cache_mode: 'force_generic_plan' },
  }) as unknown as PostgresSql;
  t.after(() => sql.end({ timeout: 1 }));
  return sql;
}

/** Adds pets; `analyse` takes the statistics afterwards, with autovacuum off so nothing else does. */
async function addPets(sql: PostgresSql, from: number, count: number, analyse: boolean): Promise<void> {
  await sql.unsafe(`INSERT INTO pets (name, category_id, status) SELECT 'Pet ' || n, 1 + n % 40, (ARRAY['available', 'pending', 'sold'])[1 + n % 3]
                      FROM generate_series(${from}, ${from + count - 1}) AS n`);
  if (analyse) await sql.unsafe('ALTER TABLE pets SET (autovacuum_enabled = false); ANALYZE pets');
}

/** `EXECUTE kept` with `parameters`, none when empty. */
const executeKept = (parameters: string) => (parameters === '' ? 'EXECUTE kept' : `EXECUTE kept(${parameters})`);

/** The kept (generic) plan of the statement prepared as `kept`, for `parameters`, as text. */
async function keptPlan(sql: PostgresSql, parameters: string): Promise<string> {
  const rows = await sql.unsafe<{ 'QUERY PLAN': string }[]>(`EXPLAIN ${executeKept(parameters)}`);
  return rows.map((row) => row['QUERY PLAN']).join('\n');
}

/** Prepares `statement` as `kept` and makes its plan now, while the table is small. */
async function prepareNow(sql: PostgresSql, statement: string, parameters: string): Promise<void> {
  await sql.unsafe(`PREPARE kept AS ${statement}`);
  await sql.unsafe(`EXPLAIN ${executeKept(parameters)}`);
}

describeWithPostgres('the plans of the PostgreSQL statements', (cluster) => {
  const lookups: [name: string, statement: string, parameters: string, index: RegExp][] = [
    ['a batch of pets by id', PETS_BY_ID, `'{1,2,3,2500}'`, /Index Scan using pets_pkey/],
    ['a batch of pages, with and without a status', PAGES, `'{0,1000}', '{NULL,sold}', '{21,21}'`, /Index Scan using pets_pkey[\s\S]*Index Scan using pets_status_id/],
  ];
  for (const [name, statement, parameters, index] of lookups) {
    test(`${name}: the index, on a table of a few thousand pets last analysed with ${FEW}`, async (t) => {
      for (const indexesOnly of [true, false]) {
        const sql = await database(t, cluster(), indexesOnly);
        await addPets(sql, 1, FEW, true);
        await prepareNow(sql, statement, parameters);
        await addPets(sql, FEW + 1, MANY, false);
        const plan = await keptPlan(sql, parameters);
        if (indexesOnly) {
          assert.match(plan, index, plan);
          assert.doesNotMatch(plan, /Seq Scan/, plan);
        } else {
          assert.match(plan, /Seq Scan on pets/, `the control should scan the table:\n${plan}`);
        }
      }
    });
  }

  test(`a batch of key lookups: the index, on a few thousand keys last analysed with ${FEW}`, async (t) => {
    for (const indexesOnly of [true, false]) {
      const sql = await database(t, cluster(), indexesOnly);
      const addKeys = (from: number, count: number) => sql.unsafe(`
        INSERT INTO accounts (id, created_at) SELECT 'acct_' || n, 0 FROM generate_series(${from}, ${from + count - 1}) AS n;
        INSERT INTO api_keys (id, key_hash, account, scopes, plan, created_at)
          SELECT 'key_' || n, md5(n::text), 'acct_' || n, 'pets:read', 'free', 0 FROM generate_series(${from}, ${from + count - 1}) AS n`);
      await addKeys(1, FEW);
      await sql.unsafe('ALTER TABLE api_keys SET (autovacuum_enabled = false); ANALYZE api_keys');
      await prepareNow(sql, KEYS_BY_HASH, `ARRAY[md5('1')]`);
      await addKeys(FEW + 1, MANY);
      const plan = await keptPlan(sql, `ARRAY[md5('1')]`);
      if (indexesOnly) assert.doesNotMatch(plan, /Seq Scan/, plan);
      else assert.match(plan, /Seq Scan on api_keys/, `the control should scan the table:\n${plan}`);
    }
  });

  test(`take_tokens: every statement in it uses an index, on a few thousand callers last analysed with ${FEW}`, async (t) => {
    for (const indexesOnly of [true, false]) {
      const notices: string[] = [];
      const sql = await database(t, cluster(), indexesOnly, notices);
      const addCallers = (from: number, count: number) => sql.unsafe(`
        INSERT INTO rate_limit_callers (caller, per_minute, per_day, minute_units, day_units, updated_at)
          SELECT 'key:' || n, 60, 1000, 60 * 60000, 1000 * 86400000::bigint, 0 FROM generate_series(${from}, ${from + count - 1}) AS n`);
      await addCallers(1, FEW);
      await sql.unsafe('ALTER TABLE rate_limit_callers SET (autovacuum_enabled = false); ANALYZE rate_limit_callers');
      // A key and a new address (whose row the address count's trigger counts).
      const take = (now: number, address: string) => sql.unsafe(`SELECT * FROM take_tokens(ARRAY['key:1', 'key:1', '${address}'], ARRAY[60, 60, 60]::bigint[], ARRAY[1000, 1000, 1000]::bigint[], ${now}, 30, 900000, 100000)`);
      await take(1_000, 'ip:192.0.2.1');
      await addCallers(FEW + 1, MANY);
      await sql.unsafe(`LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice`);
      await take(2_000, 'ip:192.0.2.2');
      const plans = notices.filter((notice) => notice.includes('rate_limit_callers')).join('\n---\n');
      assert.match(plans, /rate_limit_callers/);
      if (indexesOnly) {
        assert.doesNotMatch(plans, /Seq Scan on rate_limit_callers/, plans);
        // The count of addresses has one row and no index to read it by: its scan stays, and is
        // not compiled (JIT took 50 ms a call once the disabled scan's cost passed its threshold).
        assert.doesNotMatch(notices.join('\n'), /JIT:/, notices.join('\n---\n'));
      } else {
        assert.match(plans, /Seq Scan on rate_limit_callers/, `the control should scan the table:\n${plans}`);
      }
    }
  });

  const feedReads: [name: string, statement: string, parameters: string, index: RegExp][] = [
    ['a page of the feed', EVENT_PAGE, `1000, NULL, '{pet.created,pet.deleted}', 101`, /Index Only Scan Backward using events_id on events s[\s\S]*Index Scan using events_id on events f[\s\S]*Index Scan using events_pkey on events e/],
    ['the feed\'s highest id', LATEST_EVENT_ID, '', /Index Scan Backward using events_id on events/],
  ];
  for (const [name, statement, parameters, index] of feedReads) {
    test(`${name}: the index of ids, which holds only the first events of blocks that have one, on a log of a few thousand events last analysed with ${FEW}`, async (t) => {
      for (const indexesOnly of [true, false]) {
        const sql = await database(t, cluster(), indexesOnly);
        // Events in blocks of ten, the blocks with their first ids (as the sequencer leaves them),
        // and the last ones still without.
        const addEvents = (from: number, count: number, withIds: number) => sql.unsafe(`
          INSERT INTO events (seq, id, block_events, type, occurred_at, data)
            SELECT ((n - 1) / 10 + 1) * ${EVENT_BLOCK_SPAN} + (n - 1) % 10, CASE WHEN n < ${from + withIds} AND (n - 1) % 10 = 0 THEN n END,
                   CASE WHEN (n - 1) % 10 = 0 THEN 10 END, 'pet.deleted', n, '{"kind":"pet_deleted","id":' || n || '}'
              FROM generate_series(${from}, ${from + count - 1}) AS n ORDER BY n`);
        await addEvents(1, FEW, FEW);
        await sql.unsafe('ALTER TABLE events SET (autovacuum_enabled = false); ANALYZE events');
        await prepareNow(sql, statement, parameters);
        await addEvents(FEW + 1, MANY, MANY - 50);
        // The index is partial, and the kept plan still proves that the rows it reads have an id.
        const plan = await keptPlan(sql, parameters);
        if (indexesOnly) {
          assert.match(plan, index, plan);
          assert.doesNotMatch(plan, /Seq Scan/, plan);
        } else {
          assert.match(plan, /Seq Scan on events/, `the control should scan the table:\n${plan}`);
        }
      }
    });
  }
});
