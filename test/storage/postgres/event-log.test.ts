/**
 * The event log's ids on PostgreSQL (src/storage/postgres/event-log.ts): given after the commit,
 * by one sequencer at a time, so that an id once read is never followed by a lower one. These
 * cases hold a transaction open by hand to make the late commit and the waiting sequencer that
 * concurrency makes only now and then.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { allSucceeded } from '../../../src/lib/item-outcome.ts';
import { eventColumns, EVENT_TYPES, type NewEvent } from '../../../src/storage/events.ts';
import type { Pet } from '../../../src/storage/pets.ts';
import { appendEvents, createEventsStore, epochMilliseconds, seqOfId } from '../../../src/storage/postgres/event-log.ts';
import type { PostgresSql } from '../../../src/storage/postgres/driver.ts';
import { createPetsStore } from '../../../src/storage/postgres/pets-store.ts';
import { describeWithPostgres, openTestDatabase } from '../../support/postgres.ts';

const deleted = (id: number): NewEvent => ({ type: 'pet.deleted', actor: null, subject: { kind: 'pet_deleted', id } });
const everything = { limit: 100, types: EVENT_TYPES, account: null };

describeWithPostgres('event ids on PostgreSQL', (cluster) => {
  test('an event whose transaction commits after a later one was read gets an id above it: a consumer at that id still reads it', async (t) => {
    const { sql } = await openTestDatabase(t, cluster(), { poolSize: 4 });
    const events = createEventsStore(sql);
    let commitLate!: () => void;
    const late = sql.begin(async (tx) => {
      // Appended first, so its row key is the lower one, but committed last.
      await appendEvents(tx as unknown as PostgresSql, [deleted(1)]);
      await new Promise<void>((resolve) => (commitLate = resolve));
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await sql.begin((tx) => appendEvents(tx as unknown as PostgresSql, [deleted(2), deleted(3)]));
    const first = await events.page({ ...everything, afterId: 0 });
    assert.deepEqual(first.map((event) => [event.id, (event.subject as { id: number }).id]), [[1, 2], [2, 3]], 'in the order appended');
    commitLate();
    await late;
    const next = await events.page({ ...everything, afterId: 2 });
    assert.deepEqual(next.map((event) => [event.id, (event.subject as { id: number }).id]), [[3, 1]], 'after the last id read, not lost below it');
  });

  test('a read waits for a sequencer that holds the log\'s lock, then reads what it gave ids to', async (t) => {
    const { sql } = await openTestDatabase(t, cluster(), { poolSize: 4 });
    const events = createEventsStore(sql);
    await sql.begin((tx) => appendEvents(tx as unknown as PostgresSql, [deleted(1)]));
    let release!: () => void;
    let locked!: () => void;
    const holding = new Promise<void>((resolve) => (locked = resolve));
    const sequencer = sql.begin(async (tx) => {
      await tx.unsafe(`SELECT pg_advisory_xact_lock(hashtextextended('event log', 0))`);
      locked();
      await new Promise<void>((resolve) => (release = resolve));
    });
    await holding;
    let read = false;
    const reading = Promise.resolve(events.page({ ...everything, afterId: 0 })).then((page) => ((read = true), page));
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(read, false, 'the read waits while another sequencer holds the lock');
    release();
    await sequencer;
    assert.deepEqual((await reading).map((event) => event.id), [1]);
    assert.equal(await events.latestId(), 1);
  });

  /** A fresh database's events store, and `append(...ids)`: one write's `pet.deleted` events, one block. */
  const blocksOf = async (t: TestContext) => {
    const { sql } = await openTestDatabase(t, cluster());
    const append = (...ids: number[]) => sql.begin((tx) => appendEvents(tx as unknown as PostgresSql, ids.map(deleted)));
    return { sql, events: createEventsStore(sql), append };
  };

  test('the events of one append are one block: consecutive ids in their order, one row given its id, and a page may start or stop inside it', async (t) => {
    const { sql, events, append } = await blocksOf(t);
    await append(11, 12, 13);
    await append(21);
    await append(31, 32, 33, 34);
    const subjects = (page: { id: number; subject: unknown }[]) => page.map((event) => [event.id, (event.subject as { id: number }).id]);
    assert.deepEqual(subjects(await events.page({ ...everything, afterId: 0 })), [[1, 11], [2, 12], [3, 13], [4, 21], [5, 31], [6, 32], [7, 33], [8, 34]]);
    assert.deepEqual(subjects(await events.page({ ...everything, afterId: 1, limit: 2 })), [[2, 12], [3, 13]], 'from inside the first block to its end');
    assert.deepEqual(subjects(await events.page({ ...everything, afterId: 3, limit: 3 })), [[4, 21], [5, 31], [6, 32]], 'from a block\'s end into the middle of the next but one');
    assert.deepEqual(subjects(await events.page({ ...everything, afterId: 6 })), [[7, 33], [8, 34]]);
    assert.deepEqual(await events.page({ ...everything, afterId: 8 }), []);
    assert.deepEqual(await events.page({ ...everything, afterId: 0, types: ['pet.created'] }), [], 'the types filter each event');
    assert.equal(await events.latestId(), 8, 'the last id of the last block');
    const rows = await sql<{ id: string | null; block_events: number | null }[]>`SELECT id::text AS id, block_events FROM events ORDER BY seq`;
    assert.deepEqual(rows.map((row) => [row.id, row.block_events]),
      [['1', 3], [null, null], [null, null], ['4', 1], ['5', 4], [null, null], [null, null], [null, null]], 'ids and sizes on the first rows only');
  });

  test('retention deletes whole blocks, the oldest first, each that starts within its limit, and records the last id it deleted', async (t) => {
    const { sql, events, append } = await blocksOf(t);
    await append(11, 12, 13);
    await append(21);
    await append(31, 32);
    await append(41);
    assert.equal(await events.latestId(), 7);
    // The first three blocks are old; the last is not.
    await sql`UPDATE events SET occurred_at = 1000 WHERE seq < (SELECT max(seq) FROM events)`;
    assert.equal(await events.purge(2000, 1), 3, 'the oldest block whole, though larger than the limit');
    assert.equal(await events.deletedThrough(), 3);
    assert.equal(await events.purge(2000, 2), 3, 'the next block, and the one that starts within the limit, whole');
    assert.equal(await events.purge(2000, 100), 0, 'the newest block is not old enough');
    assert.equal(await events.deletedThrough(), 6);
    assert.deepEqual((await events.page({ ...everything, afterId: 0 })).map((event) => event.id), [7]);
    // An event's row key from its id (a webhook's attempt is recorded by it): none for a deleted one, nor past the last.
    const [row] = await sql.unsafe<[{ deleted: string | null; kept: string | null; past: string | null; seq: string }]>(
      `SELECT ${seqOfId('2::bigint')}::text AS deleted, ${seqOfId('7::bigint')}::text AS kept, ${seqOfId('8::bigint')}::text AS past, (SELECT seq::text FROM events) AS seq`);
    assert.deepEqual({ ...row }, { deleted: null, kept: row.seq, past: null, seq: row.seq });
  });

  test('a batch of creates stores each pet\'s event as storage/events.ts writes it, whatever the name, with its own creation\'s actor', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    const names = ['Rex', 'say "hi" \\ back/slash', 'tab\tnew\nline\u0001\u001f\u007f', 'Étoile 🐕 \u2028 ümlaut'];
    const actors = [{ account: 'acct_a', keyId: 'key_a' }, undefined, { account: 'acct_b', keyId: 'key_b' }, { account: 'acct_a', keyId: 'key_a' }];
    const pets = allSucceeded(await createPetsStore(sql).insertMany(names.map((name, i) => ({
      name, categoryId: 9_007_199_254_740_993n + BigInt(i), status: (['available', 'pending', 'sold'] as const)[i % 3]!, actor: actors[i],
    })))) as Pet[];
    const rows = await sql<{ type: string; actor_account: string | null; actor_key_id: string | null; account: string | null; data: string }[]>`
      SELECT type, actor_account, actor_key_id, account, data FROM events ORDER BY seq`;
    assert.deepEqual(rows.map((row) => ({ ...row })), pets.map((pet, i) => eventColumns({ type: 'pet.created', actor: actors[i] ?? null, subject: { kind: 'pet', pet } })));
  });

  test('an event\'s time is its timestamp\'s milliseconds since the epoch, rounded down, exactly', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    // Whole milliseconds, a microsecond either side of one, and dates far from now.
    const times = ['2026-12-06 10:00:00.123+00', '2026-12-06 10:00:00.123999+00', '2026-12-06 10:00:00.124001+00', '2026-12-06 10:00:00.999999+00',
      '1970-01-01 00:00:00.001+00', '2001-09-09 01:46:40+00', '2262-04-11 23:47:16.854775+00', '9999-12-31 23:59:59.999999+00'];
    const exact = (time: string) => `floor(extract(epoch FROM ${time}) * 1000)::bigint`;
    const rows = await sql.unsafe<{ fast: string; exact: string }[]>(
      `SELECT ${epochMilliseconds('t')}::text AS fast, ${exact('t')}::text AS exact FROM unnest($1::timestamptz[]) AS u(t)`, [times]);
    assert.deepEqual(rows.map((row) => row.fast), rows.map((row) => row.exact));
    assert.equal(rows[0]!.exact, String(Date.parse('2026-12-06T10:00:00.123Z')));
    // And 100,000 milliseconds in a row, each a microsecond before, on or after its start.
    const [{ wrong }] = await sql.unsafe<[{ wrong: number }]>(`
      SELECT count(*)::integer AS wrong FROM (
        SELECT timestamptz '2026-12-06 10:00:00+00' + n * interval '1 millisecond' + (n % 3 - 1) * interval '1 microsecond' AS t
          FROM generate_series(0, 99999) AS n) AS s
       WHERE ${epochMilliseconds('t')} <> ${exact('t')}`);
    assert.equal(wrong, 0);
  });
});
