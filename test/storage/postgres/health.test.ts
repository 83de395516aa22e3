/** GET /healthz on PostgreSQL asks the database at most once a second, and tells when it is gone. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHealthCheck } from '../../../src/storage/postgres/health.ts';
import type { PostgresSql } from '../../../src/storage/postgres/driver.ts';
import { fakeClock } from '../../support/test-server.ts';
import { describeWithPostgres, openTestDatabase } from '../../support/postgres.ts';

describeWithPostgres('the PostgreSQL health check', (cluster) => {
  test('answers from one query per second, however many probes, and follows the database down and up', async (t) => {
    const { sql } = await openTestDatabase(t, cluster(), { poolSize: 1 });
    let queries = 0;
    // The real pool, counting the statements the check sends.
    const counted = ((...args: Parameters<PostgresSql>) => {
      queries++;
      return (sql as unknown as (...a: unknown[]) => unknown)(...args);
    }) as unknown as PostgresSql;
    const clock = fakeClock();
    const healthy = createHealthCheck(counted, clock);
    assert.deepEqual(await Promise.all(Array.from({ length: 20 }, () => healthy())), Array(20).fill(true));
    clock.advance(999);
    assert.equal(await healthy(), true);
    assert.equal(queries, 1, 'twenty concurrent probes and one more within the second: one query');
    cluster().stop();
    try {
      assert.equal(await healthy(), true, 'the last answer stands for a second');
      clock.advance(1);
      assert.equal(await healthy(), false);
      assert.equal(queries, 3, 'one more check: a query and its one retry');
    } finally {
      cluster().start();
    }
    clock.advance(1000);
    assert.equal(await healthy(), true, 'back without a restart');
  });
});
