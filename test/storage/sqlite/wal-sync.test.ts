/**
 * Where the inline writer's `fdatasync` runs (src/storage/sqlite/writer/wal-sync.ts): on the event
 * loop, answering at once, while the syncs there take less than QUICK_SYNC_MS on average; in the
 * thread pool otherwise, with one in PROBE_EVERY made on the loop again to time the disk. The two
 * syncs and the clock are the test's: each loop sync "takes" what the test sets.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createWalSync, PROBE_EVERY, QUICK_SYNC_MS } from '../../../src/storage/sqlite/writer/wal-sync.ts';

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

test('slow syncs go to the pool once their average reaches QUICK_SYNC_MS, and every PROBE_EVERY-th is timed on the loop again', () => {
  const { state, run } = disk(QUICK_SYNC_MS * 4);
  assert.deepEqual(run(), { error: null }, 'the first sync is on the loop: nothing is known of the disk yet');
  assert.deepEqual(state.where, ['loop']);
  // Its average is now QUICK_SYNC_MS (a quarter of 4): the next go to the pool, answered when it returns.
  for (let i = 1; i < PROBE_EVERY; i++) assert.equal(run(), null, `sync ${i + 1} waits for the pool`);
  assert.equal(state.pending.length, PROBE_EVERY - 1);
  assert.deepEqual(run(), { error: null }, 'the probe runs on the loop');
  assert.equal(state.where.at(-1), 'loop');
  // Still slow: back to the pool until the next probe.
  assert.equal(run(), null);
  assert.equal(state.where.at(-1), 'pool');
  state.pending[0]!(null);
});

test('a quick probe brings the syncs back to the loop', () => {
  const { state, run } = disk(QUICK_SYNC_MS * 10);
  run();
  for (let i = 1; i < PROBE_EVERY; i++) run();
  state.loopMs = 0.2;
  assert.deepEqual(run(), { error: null }, 'the probe');
  for (let i = 0; i < 10; i++) assert.deepEqual(run(), { error: null });
  assert.deepEqual(state.where.slice(-11), Array(11).fill('loop'));
});

test('one slow sync among quick ones does not move them to the pool; two in a row do', () => {
  const { state, run } = disk(0.3);
  for (let i = 0; i < 20; i++) run();
  state.loopMs = 2.8;
  run();
  state.loopMs = 0.3;
  for (let i = 0; i < 10; i++) assert.deepEqual(run(), { error: null });
  assert.equal(state.where.includes('pool'), false, 'a sync of 2.8 ms (a p99 of the disk measured) alone keeps them on the loop');
  state.loopMs = 2.5;
  assert.deepEqual([run(), run()], [{ error: null }, { error: null }], 'two syncs of 2.5 ms, both on the loop');
  assert.equal(run(), null, 'their average is over QUICK_SYNC_MS: the next waits for the pool');
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
