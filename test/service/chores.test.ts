import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';
import type { NewPet } from '../../src/storage/pets.ts';
import { EXPIRY_INTERVAL_MS, LIMITER_SAVE_INTERVAL_MS, oneAtATime, PURGE_INTERVAL_MS, purgeInChunks, startChores } from '../../src/service/chores.ts';

const DAY = 24 * 60 * 60 * 1000;
const rex: NewPet = { name: 'Rex', categoryId: 1n, status: 'available' };
/** Lets the promises of a finished purge settle (the mocked timers do not move them). */
const settled = () => new Promise((resolve) => process.nextTick(resolve));

test('a purge deletes expired records a chunk per transaction, lets other work run between chunks, and is joined while it runs', async () => {
  const db = openDatabase(':memory:');
  const store = createPetsStore(db);
  const now = Date.UTC(2026, 0, 2);
  store.insertMany(Array.from({ length: 7 }, (_, i) => ({ ...rex, idempotency: { apiKeyId: 'key_a', key: `old${i}`, fingerprint: 'f', createdAt: now - DAY } })));
  store.insertMany([{ ...rex, idempotency: { apiKeyId: 'key_a', key: 'young', fingerprint: 'f', createdAt: now } }]);
  const chunks: number[] = [];
  const purgeExpired = oneAtATime(() => purgeInChunks((limit) => {
    const deleted = store.purgeIdempotencyRecords(now, limit);
    chunks.push(deleted);
    return deleted;
  }, 3));
  let otherWorkRan = false;
  setImmediate(() => {
    otherWorkRan = true;
  });
  const purge = purgeExpired();
  assert.equal(purgeExpired(), purge, 'a purge already running is joined, not started twice');
  assert.equal(otherWorkRan, false);
  assert.equal(await purge, 7);
  assert.equal(otherWorkRan, true);
  assert.deepEqual(chunks, [3, 3, 1]);
  assert.deepEqual(db.prepare('SELECT idempotency_key FROM idempotency_keys').all().map((row) => row.idempotency_key), ['young']);
  assert.equal(await purgeExpired(), 0, 'a finished purge can run again');
});

test('chores purge at once and every ten minutes, save the limiter every second and once more when stopped', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'setImmediate'] });
  const done: string[] = [];
  const chores = startChores({
    upkeep: {
      saveLimiterState: () => void done.push('save'),
      purgeExpiredRecords: () => (done.push('records'), 0),
      purgeIdleCallers: () => (done.push('callers'), 0),
      expireOrders: () => 0,
    },
    clock: () => 0,
    failed: (event) => done.push(`failed ${event}`),
  });
  t.mock.timers.tick(0);
  assert.deepEqual(done, ['records', 'callers'], 'a first purge at start');
  await settled();
  done.length = 0;
  t.mock.timers.tick(LIMITER_SAVE_INTERVAL_MS * 3);
  assert.deepEqual(done, ['save', 'save', 'save']);
  done.length = 0;
  t.mock.timers.tick(PURGE_INTERVAL_MS - LIMITER_SAVE_INTERVAL_MS * 3);
  assert.deepEqual(done.filter((chore) => chore !== 'save'), ['records', 'callers']);
  done.length = 0;
  // The ten-minute purge just started is still settling: stop waits for it, then saves.
  await chores.stop();
  assert.deepEqual(done, ['save'], 'the last save happens when stopping');
  t.mock.timers.tick(PURGE_INTERVAL_MS * 2);
  assert.deepEqual(done, ['save'], 'no timer runs after stop');
});

test('stop lets a purge in flight finish its chunk, starts no other, and saves the limiter after it', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'setImmediate'] });
  const done: string[] = [];
  const chunk = Promise.withResolvers<number>();
  const chores = startChores({
    upkeep: {
      saveLimiterState: () => void done.push('save'),
      purgeExpiredRecords: (_now, limit) => (done.push(`records ${limit}`), chunk.promise),
      expireOrders: () => 0,
    },
    clock: () => 0,
    failed: (event) => done.push(`failed ${event}`),
  });
  t.mock.timers.tick(0);
  assert.deepEqual(done, ['records 500'], 'the first purge is out');
  let stopped = false;
  const stopping = chores.stop().then(() => (stopped = true));
  await settled();
  assert.equal(stopped, false, 'stop waits for the purge in flight');
  assert.deepEqual(done, ['records 500'], 'and saves only after it');
  // A full chunk: without stop, the purge would run another after a turn.
  chunk.resolve(500);
  await stopping;
  t.mock.timers.tick(0);
  assert.deepEqual(done, ['records 500', 'save'], 'no chunk after stop, then the last save');
});

test('stop before the first purge has started cancels it', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'setImmediate'] });
  const done: string[] = [];
  const chores = startChores({
    upkeep: { saveLimiterState: () => void done.push('save'), purgeExpiredRecords: () => (done.push('records'), 0), expireOrders: () => 0 },
    clock: () => 0,
    failed: (event) => done.push(`failed ${event}`),
  });
  await chores.stop();
  t.mock.timers.tick(0);
  assert.deepEqual(done, ['save']);
});

test('a chore that fails is reported by name and the others keep running', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'setImmediate'] });
  const failures: string[] = [];
  const chores = startChores({
    upkeep: {
      saveLimiterState: () => {
        throw new Error('disk full');
      },
      purgeExpiredRecords: () => Promise.reject(new Error('locked')),
      expireOrders: () => 0,
    },
    clock: () => 0,
    failed: (event) => failures.push(event),
  });
  t.mock.timers.tick(LIMITER_SAVE_INTERVAL_MS);
  await settled();
  chores.stop();
  assert.deepEqual(failures.sort(), ['idempotency_purge_failed', 'limiter_save_failed', 'limiter_save_failed']);
});

test('the sweep of ended holds runs every half second at the clock\'s now, reports what it expired, and its failure by name', async (t) => {
  t.mock.timers.enable({ apis: ['setInterval', 'setImmediate'] });
  const asked: number[] = [];
  const reported: number[] = [];
  const failures: string[] = [];
  let now = 1_000;
  const due = [2, 0, 0];
  const chores = startChores({
    upkeep: {
      purgeExpiredRecords: () => 0,
      expireOrders: (at) => {
        asked.push(at);
        const next = due.shift();
        if (next === undefined) throw new Error('locked');
        return next;
      },
    },
    clock: () => now,
    failed: (event) => failures.push(event),
    expired: (count) => reported.push(count),
  });
  t.mock.timers.tick(EXPIRY_INTERVAL_MS - 1);
  assert.deepEqual(asked, [], 'not before the interval');
  for (let i = 0; i < 4; i++) {
    now += EXPIRY_INTERVAL_MS;
    t.mock.timers.tick(i === 0 ? 1 : EXPIRY_INTERVAL_MS);
    await settled();
    await settled();
  }
  chores.stop();
  assert.deepEqual(asked, [1_500, 2_000, 2_500, 3_000]);
  assert.deepEqual(reported, [2], 'a sweep that expired nothing reports nothing');
  assert.deepEqual(failures, ['order_expiry_failed']);
});

