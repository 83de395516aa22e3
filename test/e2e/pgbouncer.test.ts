/**
 * The service through PgBouncer in transaction pooling mode, run for real: Debian's PgBouncer with
 * its default settings (startPgbouncer) in front of a throwaway cluster, and two instances whose
 * DATABASE_URL names PgBouncer. Each transaction, and each statement outside one, may be given
 * another server connection, so nothing may depend on a session: no start-up parameter (PgBouncer
 * refuses them), no named prepared statement, no session setting, no session-level lock.
 *
 * Before, the service did not start through PgBouncer; with the start-up parameters ignored, 2 of
 * 200 chained PATCHes were answered 200 and never committed, and 200 concurrent requests on two
 * instances met 151 x 500 and 361 x 503. The counts are printed as diagnostics; docs/deployment.md
 * quotes them.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createKeysStore } from '../../src/storage/postgres/keys-store.ts';
import { connectPostgres, SESSION_SETTINGS } from '../../src/storage/postgres/database.ts';
import type { PostgresSql } from '../../src/storage/postgres/driver.ts';
import type { KeysStore } from '../../src/storage/keys.ts';
import { killAll, startInstance, type Instance } from '../support/instances.ts';
import { openTestDatabase, pgbouncerSkip, startPgbouncer, startPostgres, type Pgbouncer, type PostgresCluster } from '../support/postgres.ts';

interface Answer {
  status: number;
  etag: string | null;
  body: string;
}

describe('two instances through PgBouncer in transaction pooling mode', { skip: pgbouncerSkip }, () => {
  let cluster: PostgresCluster;
  let pgbouncer: Pgbouncer;
  let sql: PostgresSql;
  let keys: KeysStore;
  let staff: string;
  let throughPgbouncer: string;
  const instances: Instance[] = [];

  before(async () => {
    cluster = await startPostgres();
    pgbouncer = await startPgbouncer(cluster);
    // The test reads the database directly; the instances go through PgBouncer.
    const opened = await openTestDatabase({ after: () => {} }, cluster, { poolSize: 2 });
    sql = opened.sql;
    keys = createKeysStore(sql, { appEnv: 'staging' });
    staff = (await keys.create({ plan: 'enterprise', perMinute: 10_000_000, perDay: 100_000_000, now: Date.now() })).key;
    throughPgbouncer = pgbouncer.url(opened.url);
    // Every client of the test comes from 127.0.0.1: the per-address cap must let 200 through.
    const env = { DATABASE_URL: throughPgbouncer, DATABASE_POOLER: 'transaction', APP_ENV: 'staging', MAX_CONNECTIONS_PER_ADDRESS: '512' };
    instances.push(...(await Promise.all([0, 1].map(() => startInstance(env)))));
  });
  after(async () => {
    killAll(instances);
    await sql?.end({ timeout: 1 });
    pgbouncer?.remove();
    cluster?.remove();
  });

  const send = async (i: number, method: string, path: string, body?: unknown, headers: Record<string, string> = {}, key = staff): Promise<Answer> => {
    const response = await fetch(instances[i % instances.length]!.url + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: response.status, etag: response.headers.get('etag'), body: await response.text() };
  };
  const versionOf = async (id: number) => Number((await sql<{ version: number }[]>`SELECT version FROM pets WHERE id = ${id}`)[0]?.version);

  test('every session through PgBouncer has the service\'s settings, from its role', async (t) => {
    const pool = await connectPostgres(throughPgbouncer, { poolSize: 4, transactionPooler: true });
    t.after(() => pool.end({ timeout: 1 }));
    const rows = await Promise.all(Array.from({ length: 8 }, () => pool<{ statement_timeout: string; enable_seqscan: string; jit: string }[]>`
      SELECT current_setting('statement_timeout') AS statement_timeout, current_setting('enable_seqscan') AS enable_seqscan, current_setting('jit') AS jit`));
    for (const [row] of rows) assert.deepEqual(row, { statement_timeout: `${Number(SESSION_SETTINGS.statement_timeout) / 1000}s`, enable_seqscan: 'off', jit: 'off' });
  });

  test('200 chained PATCHes of one pet with If-Match, alternating instances: every one 200 and committed, the final version 201', async (t) => {
    const created = await send(0, 'POST', '/v1/pets', { name: 'Chained', categoryId: 1 });
    assert.equal(created.status, 201);
    const { id } = JSON.parse(created.body) as { id: number };
    let etag = created.etag!;
    const statuses: Record<number, number> = {};
    for (let i = 0; i < 200; i++) {
      const answer = await send(i, 'PATCH', `/v1/pets/${id}`, { name: `chained ${i}` }, { 'if-match': etag });
      statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
      assert.equal(answer.status, 200, `PATCH ${i}: ${answer.body}`);
      assert.equal(answer.etag, `"${id}.${i + 2}"`, `PATCH ${i} answered the next version`);
      // Committed: the database has it before the next request is sent.
      assert.equal(await versionOf(id), i + 2, `PATCH ${i} is committed`);
      etag = answer.etag!;
    }
    const final = await versionOf(id);
    t.diagnostic(`200 chained PATCHes through PgBouncer: ${JSON.stringify(statuses)}, final version ${final}`);
    assert.equal(final, 201);
  });

  test('200 concurrent clients on two instances: 0 x 500, 0 x 503, every acknowledged write stored, limits exact', async (t) => {
    const tally: Record<number, number> = {};
    const count = (answer: Answer) => {
      tally[answer.status] = (tally[answer.status] ?? 0) + 1;
      return answer;
    };
    /** Per client: its pet, the version of its last acknowledged change, and its order if one was acknowledged. */
    const acknowledged: { pet: number; version: number; order: number | null; plain: number }[] = [];
    await Promise.all(Array.from({ length: 200 }, async (_, client) => {
      const made = count(await send(client, 'POST', '/v1/pets', { name: `busy ${client}`, categoryId: 1 }, { 'idempotency-key': `busy-${client}` }));
      if (made.status !== 201) return;
      const { id } = JSON.parse(made.body) as { id: number };
      let etag = made.etag!;
      let version = 1;
      for (let step = 0; step < 3; step++) {
        const changed = count(await send(client + step + 1, 'PATCH', `/v1/pets/${id}`, { name: `busy ${client}.${step}` }, { 'if-match': etag }));
        if (changed.status !== 200) break;
        etag = changed.etag!;
        version++;
      }
      count(await send(client, 'GET', `/v1/pets?limit=5`));
      const replayed = count(await send(client + 1, 'POST', '/v1/pets', { name: `busy ${client}`, categoryId: 1 }, { 'idempotency-key': `busy-${client}` }));
      assert.equal(replayed.body, made.body, 'a retry replays the first answer');
      const ordered = client % 2 === 0 ? count(await send(client + 1, 'POST', '/v1/store/orders', { petId: id })) : null;
      const plain = count(await send(client, 'POST', '/v1/pets', { name: `plain ${client}`, categoryId: 2 }));
      acknowledged.push({
        pet: id,
        // Placing the order moved the pet to pending: one more version.
        version: version + (ordered?.status === 201 ? 1 : 0),
        order: ordered?.status === 201 ? (JSON.parse(ordered.body) as { id: number }).id : null,
        plain: plain.status === 201 ? (JSON.parse(plain.body) as { id: number }).id : 0,
      });
    }));
    // Limits stay exact: a day quota of 100, asked 300 times at once over the two instances.
    const limited = (await keys.create({ plan: 'enterprise', perMinute: 10_000_000, perDay: 100, now: Date.now() })).key;
    const limitedAnswers = await Promise.all(Array.from({ length: 300 }, (_, i) => send(i, 'GET', '/v1/store/inventory', undefined, {}, limited)));
    const limitedCounts = { ok: limitedAnswers.filter((a) => a.status === 200).length, refused: limitedAnswers.filter((a) => a.status === 429).length };
    t.diagnostic(`200 concurrent clients through PgBouncer, two instances: ${JSON.stringify(tally)}; a quota of 100 asked 300 times: ${JSON.stringify(limitedCounts)}`);

    assert.equal(tally[500] ?? 0, 0, JSON.stringify(tally));
    const unavailable = instances.flatMap((instance) => instance.stdout.filter((line) => /"level":"error"/.test(line)));
    assert.equal(tally[503] ?? 0, 0, `${JSON.stringify(tally)}: ${unavailable.slice(0, 5).join('\n')}`);
    assert.deepEqual(Object.keys(tally).sort(), ['200', '201'], JSON.stringify(tally));
    assert.equal(acknowledged.length, 200);
    for (const { pet, version, order, plain } of acknowledged) {
      assert.equal(await versionOf(pet), version, `pet ${pet}: every acknowledged change stored, nothing more`);
      if (order !== null) assert.equal((await sql`SELECT 1 FROM orders WHERE id = ${order}`).length, 1, `order ${order} stored`);
      assert.equal((await sql`SELECT 1 FROM pets WHERE id = ${plain}`).length, 1, `pet ${plain} stored`);
    }
    assert.deepEqual(limitedCounts, { ok: 100, refused: 200 }, instances.flatMap((instance) => instance.stdout.filter((line) => /"level":"error"/.test(line))).slice(0, 5).join('\n'));
    assert.doesNotMatch(pgbouncer.log(), /not linked|prepared statement/i, 'PgBouncer saw nothing out of place');
  });
});
