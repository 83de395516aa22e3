/**
 * The start's first pool (src/storage/postgres/first-contact.ts, contactedPool): on the host the
 * probe names, or on the list while none answers as the primary, then moved to the one found.
 * Over fake pools and probes; the real start is in test/e2e/failover.test.ts and postgres-start.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { contactedPool } from '../../../src/storage/postgres/first-contact.ts';
import type { PoolFactory, Server } from '../../../src/storage/postgres/database.ts';
import type { PostgresSql } from '../../../src/storage/postgres/driver.ts';

interface FakePool {
  server: Server | undefined;
  ended: boolean;
}

/** A factory whose pools remember where they were opened, and whose probe gives `answers` in turn (undefined: no primary). */
function factory(answers: (Server | undefined)[] | null) {
  const pools: FakePool[] = [];
  const open = ((server?: Server) => {
    const pool: FakePool = { server, ended: false };
    pools.push(pool);
    return Object.assign(pool, { end: async () => void (pool.ended = true) }) as unknown as PostgresSql;
  }) as PoolFactory;
  const asked: number[] = [];
  open.probe = answers === null ? null : async (waitMs?: number) => {
    asked.push(waitMs ?? -1);
    const answer = answers.shift();
    if (answer === undefined) throw new AggregateError([], 'no primary');
    return answer;
  };
  return { open, pools, asked };
}

const contacted: unknown[] = [];
const contact = async (pool: PostgresSql) => void contacted.push(pool);
const db2 = { host: 'db2', port: 5432 };

test('one host: no probe, the pool on the URL', async () => {
  const { open, pools } = factory(null);
  const { pool, server } = await contactedPool(open, 'postgres://pets@db1/pets', { contact });
  assert.equal(server, undefined);
  assert.deepEqual(pools.map((each) => each.server), [undefined]);
  assert.equal(pool, pools[0]);
});

test('a list whose primary answers the probe: the pool is on that host alone, contacted, and the probe asked once within the start\'s wait', async () => {
  const { open, pools, asked } = factory([db2]);
  const { pool, server } = await contactedPool(open, 'postgres://pets@db1,db2/pets?target_session_attrs=read-write', { contact, waitMs: 5_000 });
  assert.deepEqual(server, db2);
  assert.deepEqual(pools.map((each) => each.server), [db2]);
  assert.equal(pool, pools[0]);
  assert.ok(contacted.includes(pool));
  assert.deepEqual(asked, [5_000]);
});

test('a list with no primary at the probe, one found through the list by the first contact: the pool is moved to the host the second probe names', async () => {
  const { open, pools } = factory([undefined, db2]);
  const { pool, server } = await contactedPool(open, 'postgres://pets@db1,db2/pets?target_session_attrs=read-write', { contact });
  assert.deepEqual(server, db2);
  assert.deepEqual(pools.map((each) => each.server), [undefined, db2]);
  assert.equal(pools[0]!.ended, true, 'the pool over the list is ended');
  assert.equal(pool, pools[1]);
});

test('a list with no primary at either probe: the contacted pool keeps the list', async () => {
  const { open, pools } = factory([undefined, undefined]);
  const { pool, server } = await contactedPool(open, 'postgres://pets@db1,db2/pets?target_session_attrs=read-write', { contact });
  assert.equal(server, undefined);
  assert.equal(pool, pools[0]);
  assert.equal(pools[0]!.ended, false);
});

test('a first contact that fails stops there: its error is the start\'s', async () => {
  const { open, asked } = factory([undefined, db2]);
  const refused = new Error('no host took a read-write session');
  await assert.rejects(contactedPool(open, 'postgres://pets@db1,db2/pets?target_session_attrs=read-write', { contact: async () => { throw refused; } }), refused);
  assert.equal(asked.length, 1, 'not probed again');
});
