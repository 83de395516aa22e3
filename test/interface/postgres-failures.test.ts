/**
 * On PostgreSQL, over HTTP: a write whose transaction did not commit is never a success (503,
 * nothing stored, nothing remembered for a retry), and a failure of the database is logged with
 * its SQLSTATE and class, never its message.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectPostgres } from '../../src/storage/postgres/database.ts';
import type { PostgresSql } from '../../src/storage/postgres/driver.ts';
import { describeWithPostgres, openTestDatabase } from '../support/postgres.ts';
import { errorBody, startPostgresTestServer } from '../support/test-server.ts';

/**
 * `sql`, whose transactions, while `aborting.on`, are aborted after their work and sent their
 * COMMIT anyway: a statement fails in them and its failure is not passed on.
 */
function abortingAfterWork(sql: PostgresSql): { aborting: { on: boolean } } {
  const aborting = { on: false };
  const begin = sql.begin.bind(sql) as unknown as (work: (tx: PostgresSql) => Promise<unknown>) => Promise<unknown>;
  Object.assign(sql, {
    begin: (work: (tx: PostgresSql) => Promise<unknown>) => begin(async (tx) => {
      const result = await work(tx);
      if (aborting.on) await tx`SELECT 1 / 0`.catch(() => {});
      return result;
    }),
  });
  return { aborting };
}

describeWithPostgres('writes that did not commit, and database failures, on PostgreSQL over HTTP', (cluster) => {
  test('a PATCH, a create with an Idempotency-Key and an order whose COMMIT answered ROLLBACK: 503, nothing stored, the retry made afresh', async (t) => {
    const { url } = await openTestDatabase(t, cluster());
    const sql = await connectPostgres(url, { poolSize: 4 });
    t.after(() => sql.end({ timeout: 1 }));
    const { aborting } = abortingAfterWork(sql);
    const server = await startPostgresTestServer(t, sql);
    const made = await server.post('/v1/pets', { name: 'Rex', categoryId: 1 });
    const { id } = (await made.json()) as { id: number };
    const etag = made.headers.get('etag')!;
    aborting.on = true;

    const patch = () => server.request(`/v1/pets/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json', 'if-match': etag }, body: '{"name":"Max"}' });
    const create = () => server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, { headers: { 'idempotency-key': 'tom-1' } });
    const order = () => server.post('/v1/store/orders', { petId: id });
    for (const response of [await patch(), await create(), await order()]) {
      assert.equal(response.status, 503);
      assert.equal(response.headers.get('retry-after'), '1');
      assert.equal((await errorBody(response)).code, 'unavailable');
    }
    assert.deepEqual([...(await sql`SELECT name, status, version FROM pets ORDER BY id`)], [{ name: 'Rex', status: 'available', version: 1 }]);
    assert.deepEqual([...(await sql`SELECT count(*)::integer AS n FROM idempotency_keys`)], [{ n: 0 }]);
    assert.deepEqual([...(await sql`SELECT count(*)::integer AS n FROM orders`)], [{ n: 0 }]);
    const lines = server.logs.filter((line) => line.includes('"event":"database_unavailable"'));
    assert.equal(lines.length, 3);
    for (const line of lines) assert.equal(JSON.parse(line).reason, 'rolled_back');

    aborting.on = false;
    assert.equal((await patch()).status, 200, 'the same If-Match applies: the first PATCH changed nothing');
    const retried = await create();
    assert.equal(retried.status, 201);
    assert.equal(retried.headers.get('idempotent-replayed'), null, 'made now, not replayed');
    assert.equal((await order()).status, 201);
  });

  test('a failure of the database is logged with its SQLSTATE and class, never its message: 500, and 503 for one that means "not now"', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    // A seam in the database: a pet named after a SQLSTATE fails to insert with that SQLSTATE.
    await sql.unsafe(`
      CREATE FUNCTION fail_insert() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.name IN ('23514', '40001') THEN RAISE EXCEPTION 'secret value %', NEW.name USING ERRCODE = NEW.name; END IF;
          RETURN NEW;
        END $$;
      CREATE TRIGGER fail_insert BEFORE INSERT ON pets FOR EACH ROW EXECUTE FUNCTION fail_insert();`);
    const server = await startPostgresTestServer(t, sql);
    const failed = await server.post('/v1/pets', { name: '23514', categoryId: 1 });
    assert.equal(failed.status, 500);
    const busy = await server.post('/v1/pets', { name: '40001', categoryId: 1 });
    assert.equal(busy.status, 503);
    const [internal] = server.logs.filter((line) => line.includes('"event":"internal_error"')).map((line) => JSON.parse(line));
    assert.deepEqual({ ...internal, time: undefined, requestId: undefined, frames: undefined }, {
      time: undefined, requestId: undefined, frames: undefined, level: 'error', event: 'internal_error', error: 'PostgresError', sqlstate: '23514', sqlstateClass: 'integrity_constraint_violation',
    });
    const [unavailable] = server.logs.filter((line) => line.includes('"event":"database_unavailable"')).map((line) => JSON.parse(line));
    assert.deepEqual({ ...unavailable, time: undefined, requestId: undefined }, {
      time: undefined, requestId: undefined, level: 'error', event: 'database_unavailable', reason: '40001', sqlstate: '40001', sqlstateClass: 'transaction_rollback',
    });
    assert.ok(!server.logs.some((line) => line.includes('secret value')), 'the message is not logged');
  });
});
