/**
 * The event log's ids on PostgreSQL (src/storage/postgres/event-log.ts): given after the commit,
 * by one sequencer at a time, so that an id once read is never followed by a lower one. These
 * cases hold a transaction open by hand to make the late commit and the waiting sequencer that
 * concurrency makes only now and then.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EVENT_TYPES, type NewEvent } from '../../../src/storage/events.ts';
import { appendEvents, createEventsStore } from '../../../src/storage/postgres/event-log.ts';
import type { PostgresSql } from '../../../src/storage/postgres/driver.ts';
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
});
