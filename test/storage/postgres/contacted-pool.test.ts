/**
 * The start's first pool (src/storage/postgres/first-contact.ts, contactedPool): on the host the
 * probe names, asked again while none answers as the primary; never on the list.
 * Over fake pools and probes; the real start is in test/e2e/failover.test.ts and postgres-start.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contactedPool, DatabaseStartError } from '../../../src/storage/postgres/first-contact.ts';
import type { PoolFactory, Server } from '../../../src/storage/postgres/database.ts';
import type { PostgresSql } from '../../../src/storage/postgres/driver.ts';

interface FakePool {
  server: Server | undefined;
  ended: boolean;
}

/**
 * A factory whose pools remember where they were opened, and whose probe gives `answers` in turn
 * (undefined: no primary; an Error: that failure); a clock that only the start's pauses move.
 */
function factory(answers: (Server | Error | undefined)[] | null) {
  const pools: FakePool[] = [];
  const open = ((server?: Server) => {
    const pool: FakePool = { server, ended: false };
    pools.push(pool);
    return Object.assign(pool, { end: async () => void (pool.ended = true) }) as unknown as PostgresSql;
  }) as PoolFactory;
  const asked: number[] = [];
  let clock = 0;
  const waits = { now: () => clock, sleep: async (ms: number) => void (clock += ms) };
  open.probe = answers === null ? null : async (waitMs?: number) => {
    asked.push(waitMs ?? -1);
    const answer = answers.length > 1 ? answers.shift() : answers[0];
    if (answer === undefined) throw new AggregateError([Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }), new Error('a standby')], 'no primary');
    if (answer instanceof Error) throw new AggregateError([answer], 'no primary');
    return answer;
  };
  return { open, pools, asked, waits };
}

const contacted: unknown[] = [];
const contact = async (pool: PostgresSql) => void contacted.push(pool);
const db2 = { host: 'db2', port: 5432 };
const LIST = 'postgres://pets@db1,db2/pets?target_session_attrs=read-write';
/** Hosts that refuse at once, for the tests that end in a host-by-host explanation. */
const REFUSING = 'postgres://pets@127.0.0.1:1,127.0.0.1:2/pets?target_session_attrs=read-write';

test('one host: no probe, the pool on the URL', async () => {
  const { open, pools } = factory(null);
  const { pool, server } = await contactedPool(open, 'postgres://pets@db1/pets', { contact });
  assert.equal(server, undefined);
  assert.deepEqual(pools.map((each) => each.server), [undefined]);
  assert.equal(pool, pools[0]);
});

test('a list whose primary answers the probe: the pool is on that host alone, contacted, and the probe asked once within the start\'s wait', async () => {
  const { open, pools, asked, waits } = factory([db2]);
  const { pool, server } = await contactedPool(open, LIST, { contact, waitMs: 5_000, ...waits });
  assert.deepEqual(server, db2);
  assert.deepEqual(pools.map((each) => each.server), [db2]);
  assert.equal(pool, pools[0]);
  assert.ok(contacted.includes(pool));
  assert.deepEqual(asked, [5_000]);
});

test('a list with no primary yet: the probe is asked again every 250 ms, within what is left of the wait, and no pool takes the list', async () => {
  const { open, pools, asked, waits } = factory([undefined, undefined, db2]);
  const { pool, server } = await contactedPool(open, LIST, { contact, waitMs: 5_000, ...waits });
  assert.deepEqual(server, db2);
  assert.deepEqual(pools.map((each) => each.server), [db2], 'one pool, on the primary found');
  assert.equal(pool, pools[0]);
  assert.deepEqual(asked, [5_000, 4_750, 4_500]);
});

test('a list with no primary within the wait: no pool at all, and the line says why from the hosts', async () => {
  const { open, pools, asked, waits } = factory([undefined]);
  await assert.rejects(contactedPool(open, REFUSING, { contact, waitMs: 1_000, ...waits }), (error: unknown) =>
    error instanceof DatabaseStartError && error.reason === 'every host refused the connection: nothing listens there (ECONNREFUSED)');
  assert.deepEqual(pools, [], 'no pool opened');
  assert.deepEqual(asked, [1_000, 750, 500, 250], 'asked until the wait was over');
});

test('a probe failure that says what is wrong (a password) is the line', async () => {
  const password = Object.assign(new Error('password authentication failed'), { name: 'PostgresError', code: '28P01' });
  const { open, pools, waits } = factory([password]);
  await assert.rejects(contactedPool(open, REFUSING, { contact, waitMs: 500, ...waits }), (error: unknown) =>
    error instanceof DatabaseStartError && error.reason.includes('SQLSTATE 28P01') && !error.reason.includes('password authentication failed'));
  assert.deepEqual(pools, []);
});

test('a first contact that fails stops there: its error is the start\'s, and its pool is ended', async () => {
  const { open, pools, asked, waits } = factory([db2]);
  const refused = new Error('the primary went away');
  await assert.rejects(contactedPool(open, LIST, { contact: async () => { throw refused; }, ...waits }), refused);
  assert.equal(asked.length, 1, 'not probed again');
  assert.equal(pools[0]!.ended, true);
});
