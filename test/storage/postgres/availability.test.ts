/**
 * The pool stand-in that fails fast while PostgreSQL cannot be reached and recovers at once
 * (src/storage/postgres/availability.ts), over fake driver pools and fake timers: nothing waits.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { watchAvailability, type Timers } from '../../../src/storage/postgres/availability.ts';
import { DatabaseUnavailableError } from '../../../src/storage/errors.ts';
import type { PostgresSql } from '../../../src/storage/postgres/driver.ts';

/** Timers run by hand: `fire()` runs every timer set so far that is still pending. */
function manualTimers(): Timers & { fire(): void; pending(): number } {
  let next = 0;
  const pending = new Map<number, () => void>();
  return {
    set(callback) {
      pending.set(++next, callback);
      return next;
    },
    clear(handle) {
      pending.delete(handle as number);
    },
    fire() {
      const due = [...pending];
      pending.clear();
      for (const [, callback] of due) callback();
    },
    pending: () => pending.size,
  };
}

interface FakePool {
  sql: PostgresSql;
  calls: number;
  ended: boolean;
  /** Settles the oldest call. */
  answer(result: { value?: unknown; code?: string }): void;
}

/** A driver pool whose calls wait until the test answers them; end() rejects what is still waiting. */
function fakePool(): FakePool {
  const waiting: { resolve(value: unknown): void; reject(error: unknown): void }[] = [];
  const pool: FakePool = {
    calls: 0,
    ended: false,
    answer({ value = [], code }) {
      const call = waiting.shift()!;
      if (code === undefined) call.resolve(value);
      else call.reject(Object.assign(new Error(code), { code }));
    },
    sql: undefined as unknown as PostgresSql,
  };
  const run = () => {
    pool.calls++;
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  };
  pool.sql = Object.assign(run, {
    unsafe: run,
    begin: run,
    end: async () => {
      pool.ended = true;
      for (const call of waiting.splice(0)) call.reject(Object.assign(new Error('destroyed'), { code: 'CONNECTION_DESTROYED' }));
    },
  }) as unknown as PostgresSql;
  return pool;
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

function setUp() {
  const pools: FakePool[] = [];
  const timers = manualTimers();
  const changes: [boolean, string | null][] = [];
  const availability = watchAvailability({
    open: () => {
      const pool = fakePool();
      pools.push(pool);
      return pool.sql;
    },
    timers,
    changed: (up, reason) => changes.push([up, reason]),
  });
  return { pools, timers, changes, availability, sql: availability.sql };
}

test('up: calls go to the driver and their answers come back', async () => {
  const { pools, sql, availability } = setUp();
  const answer = sql`SELECT 1`;
  pools[0]!.answer({ value: [{ n: 1 }] });
  assert.deepEqual(await answer, [{ n: 1 }]);
  assert.equal(availability.isUp(), true);
});

test('a refused connection turns it down: every later call fails at once, without reaching the driver', async () => {
  const { pools, sql, availability, changes } = setUp();
  const first = sql`SELECT 1`;
  pools[0]!.answer({ code: 'ECONNREFUSED' });
  await assert.rejects(first, { code: 'ECONNREFUSED' });
  assert.equal(availability.isUp(), false);
  assert.deepEqual(changes, [[false, 'ECONNREFUSED']]);
  assert.equal(pools[0]!.ended, true, 'the failed pool is destroyed');
  const calls = pools.map((pool) => pool.calls);
  await assert.rejects(sql.unsafe('SELECT 2'), (error: unknown) => error instanceof DatabaseUnavailableError && error.reason === 'ECONNREFUSED');
  await assert.rejects(sql.begin(async () => {}), DatabaseUnavailableError);
  assert.deepEqual(pools.map((pool) => pool.calls), calls, 'nothing was sent');
});

test('a failure on an open connection (57P01) is passed on without turning it down', async () => {
  const { pools, sql, availability } = setUp();
  const call = sql`SELECT 1`;
  pools[0]!.answer({ code: '57P01' });
  await assert.rejects(call, { code: '57P01' });
  assert.equal(availability.isUp(), true);
});

test('a call with no answer within the bound is 503, turns it down, and its queued query never runs later', async () => {
  const { pools, timers, sql, availability } = setUp();
  const stuck = sql`INSERT INTO pets DEFAULT VALUES`;
  timers.fire(); // CALL_TIMEOUT_MS passes
  await assert.rejects(stuck, (error: unknown) => error instanceof DatabaseUnavailableError && error.reason === 'timeout');
  assert.equal(availability.isUp(), false);
  assert.equal(pools[0]!.ended, true, 'the pool that held the query is destroyed: its queue is rejected, not run after the 503');
});

test('down: a probe every interval, on a fresh pool; the first answer brings it back up', async () => {
  const { pools, timers, sql, availability, changes } = setUp();
  const first = sql`SELECT 1`;
  pools[0]!.answer({ code: 'ECONNREFUSED' });
  await assert.rejects(first);
  timers.fire(); // the first probe starts at once
  const probePool = pools[1]!;
  assert.equal(probePool.calls, 1);
  probePool.answer({ code: 'ECONNREFUSED' });
  await tick();
  assert.equal(availability.isUp(), false);
  timers.fire(); // PROBE_INTERVAL_MS later: the next probe
  assert.equal(probePool.calls, 2);
  probePool.answer({ value: [{ '?column?': 1 }] });
  await tick();
  assert.equal(availability.isUp(), true);
  assert.equal(availability.generation(), 1);
  assert.deepEqual(changes, [[false, 'ECONNREFUSED'], [true, null]]);
  const again = sql`SELECT 3`;
  probePool.answer({ value: [] });
  assert.deepEqual(await again, []);
});

/** An instance over a list of hosts: each pool is opened on a server, which the probe names. */
function setUpList() {
  const pools: (FakePool & { server: string | undefined })[] = [];
  const timers = manualTimers();
  const asked: { resolve(server: string): void; reject(error: unknown): void }[] = [];
  const initial = Object.assign(fakePool(), { server: 'db1' });
  pools.push(initial);
  const availability = watchAvailability<string>({
    open: (server) => {
      const pool = Object.assign(fakePool(), { server });
      pools.push(pool);
      return pool.sql;
    },
    initial: initial.sql,
    server: 'db1',
    probe: () => new Promise<string>((resolve, reject) => asked.push({ resolve, reject })),
    timers,
  });
  return { pools, timers, asked, availability, sql: availability.sql };
}

test('with a probe of its own (a list of hosts), a down instance asks it instead of its pool, and is up at its first answer, on a pool opened on the server it named', async () => {
  const { pools, timers, asked, availability, sql } = setUpList();
  const first = sql`SELECT 1`;
  pools[0]!.answer({ code: 'ECONNREFUSED' });
  await assert.rejects(first);
  assert.equal(pools[1]!.server, 'db1', 'while down, the pool is on the last primary known');
  timers.fire();
  assert.equal(asked.length, 1);
  asked[0]!.reject(new AggregateError([], 'no primary'));
  await tick();
  timers.fire();
  assert.equal(asked.length, 2);
  assert.equal(pools[1]!.calls, 0, 'the pool is not asked while down');
  asked[1]!.resolve('db2');
  await tick();
  assert.equal(availability.isUp(), true);
  assert.equal(pools.length, 3);
  assert.equal(pools[2]!.server, 'db2', 'the next pool is on the primary found');
  assert.equal(pools[1]!.ended, true, 'the pool opened while down is ended, unused');
  const after = sql`SELECT 2`;
  pools[2]!.answer({ value: [] });
  assert.deepEqual(await after, []);
  assert.equal(pools[1]!.calls, 0);
});

for (const code of ['25006', 'CONNECTION_DESTROYED']) {
  test(`with a list of hosts, ${code} (the server is a standby now) turns it down, so that the probe finds the primary; with one host it is passed on`, async () => {
    const list = setUpList();
    const write = list.sql`INSERT INTO pets DEFAULT VALUES`;
    list.pools[0]!.answer({ code });
    await assert.rejects(write, { code });
    assert.equal(list.availability.isUp(), false);
    assert.equal(list.pools[0]!.ended, true);

    const one = setUp();
    const call = one.sql`INSERT INTO pets DEFAULT VALUES`;
    one.pools[0]!.answer({ code });
    await assert.rejects(call, { code });
    assert.equal(one.availability.isUp(), true, 'no other server to look for');
  });
}

test('a probe that hangs is abandoned after the bound on a pool of its own, so probes never pile up', async () => {
  const { pools, timers, sql } = setUp();
  const first = sql`SELECT 1`;
  pools[0]!.answer({ code: 'CONNECT_TIMEOUT' });
  await assert.rejects(first);
  timers.fire(); // probe 1 starts on pools[1]
  assert.equal(pools[1]!.calls, 1);
  timers.fire(); // its bound passes
  await tick();
  await tick();
  assert.equal(pools[1]!.ended, true);
  timers.fire(); // the next probe, on a fresh pool
  assert.equal(pools[2]!.calls, 1);
});

test('end() stops probing and ends the current pool', async () => {
  const { pools, timers, sql, availability } = setUp();
  const first = sql`SELECT 1`;
  pools[0]!.answer({ code: 'ECONNREFUSED' });
  await assert.rejects(first);
  await availability.end({ timeout: 1 });
  assert.equal(pools[1]!.ended, true);
  timers.fire();
  assert.equal(pools[1]!.calls, 0, 'no probe after the end');
});
