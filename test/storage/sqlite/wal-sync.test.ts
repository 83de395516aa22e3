/**
 * Where the inline writer's `fdatasync` runs (src/storage/sqlite/writer/wal-sync.ts): on the event
 * loop, answering at once, while the median of the last RECENT_SYNCS syncs there took less than
 * QUICK_SYNC_MS; in the thread pool otherwise, with one in PROBE_EVERY made on the loop again to
 * time the disk. The two syncs and the clock are the test's: each loop sync "takes" what the test
 * sets.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWalSync, PROBE_EVERY, QUICK_SYNC_MS, RECENT_SYNCS } from '../../../src/storage/sqlite/writer/wal-sync.ts';

/** A disk whose syncs on the loop take `loopMs` (changeable), and a pool that answers when the test says. */
function disk(loopMs: number) {
  let time = 0;
  const state = { loopMs, where: [] as ('loop' | 'pool')[], pending: [] as ((error: Error | null) => void)[] };
  const sync = createWalSync({
    now: () => time,
    onLoop: () => {
      state.where.push('loop');
      time += state.loopMs;
    },
    inPool: (_fd, done) => {
      state.where.push('pool');
      state.pending.push(done);
    },
  });
  /** Runs one sync; says whether `done` was called before it returned, and with what. */
  const run = () => {
    let result: { error: Error | null } | null = null;
    sync(3, (error) => (result = { error }));
    return result as { error: Error | null } | null;
  };
  return { state, run };
}

test('quick syncs run on the loop and answer before they return', () => {
  const { state, run } = disk(0.3);
  for (let i = 0; i < 200; i++) assert.deepEqual(run(), { error: null });
  assert.equal(state.where.filter((where) => where === 'pool').length, 0);
});

test('slow syncs go to the pool once most of the last RECENT_SYNCS were slow, and every PROBE_EVERY-th is timed on the loop again', () => {
  const { state, run } = disk(QUICK_SYNC_MS * 4);
  const mostOf = Math.ceil(RECENT_SYNCS / 2);
  for (let i = 0; i < mostOf; i++) assert.deepEqual(run(), { error: null }, `sync ${i + 1} is on the loop: too few are known slow`);
  assert.deepEqual(state.where, Array(mostOf).fill('loop'));
  // Most of the last RECENT_SYNCS are slow now: the next go to the pool, answered when it returns.
  for (let i = 1; i < PROBE_EVERY; i++) assert.equal(run(), null, `sync ${mostOf + i} waits for the pool`);
  assert.equal(state.pending.length, PROBE_EVERY - 1);
  assert.deepEqual(run(), { error: null }, 'the probe runs on the loop');
  assert.equal(state.where.at(-1), 'loop');
  // Still slow, and the probe alone decides: back to the pool until the next probe.
  assert.equal(run(), null);
  assert.equal(state.where.at(-1), 'pool');
  state.pending[0]!(null);
});

test('a quick probe brings the syncs back to the loop', () => {
  const { state, run } = disk(QUICK_SYNC_MS * 10);
  // The first few on the loop, until most of the last RECENT_SYNCS are known slow; then the pool until the probe.
  for (let i = 0; i < Math.ceil(RECENT_SYNCS / 2) + PROBE_EVERY - 1; i++) run();
  assert.equal(state.where.at(-1), 'pool');
  state.loopMs = 0.2;
  assert.deepEqual(run(), { error: null }, 'the probe');
  for (let i = 0; i < 10; i++) assert.deepEqual(run(), { error: null });
  assert.deepEqual(state.where.slice(-11), Array(11).fill('loop'));
});

test('slow syncs among quick ones, however slow, keep them on the loop until they are most of the last RECENT_SYNCS', () => {
  const { state, run } = disk(0.3);
  for (let i = 0; i < 20; i++) run();
  const fewerThanHalf = Math.floor(RECENT_SYNCS / 2);
  for (let spike = 0; spike < 3; spike++) {
    // A single sync of 90 ms, as a virtual machine's disk had among syncs of 0.4 ms, then quick ones.
    state.loopMs = 90;
    run();
    state.loopMs = 0.3;
    for (let i = 0; i < RECENT_SYNCS; i++) assert.deepEqual(run(), { error: null });
  }
  state.loopMs = 2.5;
  for (let i = 0; i < fewerThanHalf; i++) run();
  assert.equal(state.where.includes('pool'), false, 'fewer than half slow: still on the loop');
  assert.deepEqual(run(), { error: null }, 'the one that makes them most is on the loop too');
  assert.equal(run(), null, 'most of the last RECENT_SYNCS were slow: the next waits for the pool');
  assert.equal(state.where.at(-1), 'pool');
  state.pending[0]!(null);
});

test('a sync on the loop that fails answers with its error, as an Error', () => {
  const failing = createWalSync({
    onLoop: () => {
      throw Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' });
    },
    inPool: () => assert.fail('not in the pool'),
    now: () => 0,
  });
  let seen: Error | null = null;
  failing(3, (error) => (seen = error));
  assert.equal((seen as (Error & { code?: string }) | null)?.code, 'EIO');
});

test('the default syncs a real file on the loop', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pets-walsync-'));
  const fd = openSync(join(dir, 'f'), 'w');
  try {
    writeSync(fd, 'x');
    let result: Error | null | undefined;
    createWalSync()(fd, (error) => (result = error));
    assert.equal(result, null, 'answered before returning: it ran on the loop');
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
});
