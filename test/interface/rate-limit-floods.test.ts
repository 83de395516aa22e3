/**
 * Limits that hold under floods: the shared flood contract on each engine, then what
 * is particular to SQLite's in-memory limiter, whose capacity for addresses is bounded and fails
 * closed. (PostgreSQL keeps every caller in a table, so it has no such capacity to exhaust.)
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { fakeClock, startPostgresTestServer, startTestServer, type FakeClock } from '../support/test-server.ts';
import { describeWithPostgres, openTestDatabase } from '../support/postgres.ts';
import type { Limiter } from '../../src/limits/limiter.ts';
import { floodContract, type FloodOptions, type FloodServer } from '../contract/flood-contract.ts';
import { inParallel, loopbackAddress, needsLoopbackRange, requestFrom } from '../support/loopback.ts';

/** The real service over one SQLite database that outlives restarts (closed when the test ends). */
async function startOnSqlite(t: TestContext, options: FloodOptions): Promise<FloodServer> {
  const db = openDatabase(':memory:');
  t.after(() => db.close());
  const clock = fakeClock();
  const start = async (): Promise<FloodServer> => {
    const server = await startTestServer(t, { db, clock, maxAnonymousCallers: options.maxAnonymousCallers, config: { trustProxy: options.trustProxy } });
    return {
      url: server.url,
      createKey: (perMinute, perDay) => server.service.stores.keys.create({ plan: 'enterprise', perMinute, perDay, now: clock() }).key,
      async restart() {
        // What SIGTERM does (main.ts): stop serving, save the limiter's state.
        await server.close();
        server.service.stores.upkeep.saveLimiterState!();
        return start();
      },
    };
  };
  return start();
}

floodContract('SQLite', startOnSqlite);

describeWithPostgres('limits that hold under floods, on PostgreSQL', (cluster) => {
  /** The real service over one PostgreSQL database that outlives restarts; its limiter state is the database's. */
  async function startOnPostgres(t: TestContext, options: FloodOptions): Promise<FloodServer> {
    const { sql } = await openTestDatabase(t, cluster());
    const clock = fakeClock();
    const start = async (): Promise<FloodServer> => {
      const server = await startPostgresTestServer(t, sql, { clock, config: { trustProxy: options.trustProxy } });
      return {
        url: server.url,
        createKey: async (perMinute, perDay) => (await server.service.stores.keys.create({ plan: 'enterprise', perMinute, perDay, now: clock() })).key,
        async restart() {
          await server.close();
          return start();
        },
      };
    };
    return start();
  }

  floodContract('PostgreSQL', startOnPostgres);
});

/** Spends all 60 minute tokens of `address` (an anonymous caller) at one instant of the fake clock. */
async function exhaustAddress(url: string, address: string): Promise<void> {
  for (let i = 0; i < 60; i++) assert.equal((await requestFrom(url, address)).status, 401);
  assert.equal((await requestFrom(url, address)).status, 429);
}

test('SQLite: when every address the limiter may hold is being limited, a new address is refused 429 with Retry-After, never let through', async (t) => {
  // Reproduced on 1.0 in process: 5,000 of 5,000 requests from untracked callers were allowed.
  if (!(await needsLoopbackRange(t))) return;
  const clock: FakeClock = fakeClock();
  const server = await startTestServer(t, { clock, maxAnonymousCallers: 4 });
  for (let i = 0; i < 4; i++) await exhaustAddress(server.url, loopbackAddress(i));

  const answers: number[] = [];
  await inParallel(100, 8, async (index) => {
    const answer = await requestFrom(server.url, loopbackAddress(1_000 + index));
    answers.push(answer.status);
    if (answer.status === 429) {
      assert.equal(JSON.parse(answer.body).code, 'rate_limited');
      assert.equal(answer.headers['retry-after'], '1');
      assert.equal(answer.headers['x-ratelimit-remaining'], '0');
      assert.equal(answer.headers['x-ratelimit-limit'], '60');
    }
  });
  assert.deepEqual(answers, new Array<number>(100).fill(429), 'no untracked address is let through');
  assert.equal((server.service.stores.limiter as Limiter).size(), 4, 'memory stays at the cap');
  // Keys are held apart and never refused for want of room.
  assert.equal((await server.request('/v1/pets')).status, 200);
  assert.equal((await requestFrom(server.url, loopbackAddress(0))).status, 429, 'the limited addresses are still limited');

  // A second later the oldest address holds a token again, so it may make room: the newcomer is tracked.
  clock.advance(1_000);
  const tracked = await requestFrom(server.url, loopbackAddress(2_000));
  assert.equal(tracked.status, 401);
  assert.equal(tracked.headers['x-ratelimit-remaining'], '59');
});
