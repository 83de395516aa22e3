/**
 * Every transaction's outcome is checked (src/storage/postgres/transaction.ts), on a real cluster:
 * a COMMIT that PostgreSQL answers ROLLBACK is a failure, and a connection goes back to the pool
 * only once it is out of any transaction.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseUnavailableError } from '../../../src/storage/errors.ts';
import { connectPostgres, guardRead } from '../../../src/storage/postgres/database.ts';
import { ROLLED_BACK, savepoint } from '../../../src/storage/postgres/transaction.ts';
import { describeWithPostgres, openTestDatabase } from '../../support/postgres.ts';

describeWithPostgres('PostgreSQL transactions whose outcome is checked', (cluster) => {
  test('an aborted transaction whose COMMIT is sent anyway is a failure (503), and nothing of it is stored', async (t) => {
    // One connection: each transaction below must have handed it back for the next one to run.
    const { sql, url } = await openTestDatabase(t, cluster(), { poolSize: 1 });
    const { sql: unprepared } = await openTestDatabase(t, cluster(), { url, poolSize: 1, transactionPooler: true });
    await sql`CREATE TABLE written (n integer)`;
    for (const [pool, transactionPooler] of [[sql, false], [unprepared, true]] as const) {
      const attempt = pool.begin(async (tx) => {
        await tx`INSERT INTO written VALUES (1)`;
        // A failed statement whose failure is not passed on: the transaction is aborted, and the
        // work resolves as if all went well, so its COMMIT is sent.
        await tx`SELECT 1 / 0`.catch(() => {});
        return 'done';
      });
      await assert.rejects(attempt, (error: unknown) => error instanceof DatabaseUnavailableError && error.reason === ROLLED_BACK, `set for a pooler in transaction mode: ${transactionPooler}`);
    }
    assert.deepEqual([...(await sql`SELECT n FROM written`)], [], 'nothing was committed');
    for (const pool of [sql, unprepared]) assert.equal(await pool.begin(async (tx) => (await tx`INSERT INTO written VALUES (2) RETURNING n`)[0]!.n), 2, 'the connection is usable again');
    assert.deepEqual([...(await sql`SELECT n FROM written`)], [{ n: 2 }, { n: 2 }]);
  });

  test('a transaction whose work throws is rolled back and its error thrown, as often as it happens, on one connection', async (t) => {
    const { sql } = await openTestDatabase(t, cluster(), { poolSize: 1 });
    await sql`CREATE TABLE written (n integer PRIMARY KEY)`;
    for (let i = 0; i < 20; i++) {
      await assert.rejects(sql.begin(async (tx) => {
        await tx`INSERT INTO written VALUES (${i})`;
        throw new Error(`ours ${i}`);
      }), { message: `ours ${i}` });
      await assert.rejects(sql.begin(async (tx) => {
        await tx`INSERT INTO written VALUES (${i})`;
        await tx`INSERT INTO written VALUES (${i})`;
      }), { code: '23505' });
    }
    assert.deepEqual([...(await sql`SELECT count(*)::integer AS n FROM written`)], [{ n: 0 }]);
  });

  test('a savepoint rolls back only its own work; the rest commits', async (t) => {
    const { sql } = await openTestDatabase(t, cluster(), { poolSize: 1 });
    await sql`CREATE TABLE written (n integer PRIMARY KEY)`;
    await sql.begin(async (tx) => {
      await tx`INSERT INTO written VALUES (1)`;
      await assert.rejects(savepoint(tx, async () => {
        await tx`INSERT INTO written VALUES (2)`;
        await tx`INSERT INTO written VALUES (1)`;
      }), { code: '23505' });
      await savepoint(tx, () => tx`INSERT INTO written VALUES (3)`);
    });
    assert.deepEqual((await sql<{ n: number }[]>`SELECT n FROM written ORDER BY n`).map((row) => row.n), [1, 3]);
  });

  test('a connection lost in a transaction fails it; the pool opens another for what follows', async (t) => {
    const { sql, url } = await openTestDatabase(t, cluster(), { poolSize: 1 });
    const admin = await connectPostgres(url, { poolSize: 1 });
    t.after(() => admin.end({ timeout: 1 }));
    await sql`CREATE TABLE written (n integer)`;
    const lost = sql.begin(async (tx) => {
      await tx`INSERT INTO written VALUES (1)`;
      const [row] = await tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      await admin`SELECT pg_terminate_backend(${row!.pid})`;
      await tx`INSERT INTO written VALUES (2)`;
    });
    await assert.rejects(lost, (error: unknown) => ['57P01', 'CONNECTION_CLOSED', 'ECONNRESET'].includes((error as { code: string }).code));
    // The driver passes PostgreSQL's notice of the termination (57P01) to the next statement, which
    // the service's reads send once more (guardRead).
    assert.deepEqual([...(await guardRead(() => sql`SELECT count(*)::integer AS n FROM written`))], [{ n: 0 }]);
    assert.equal(await sql.begin(async (tx) => (await tx`SELECT 7 AS n`)[0]!.n), 7);
  });
});
