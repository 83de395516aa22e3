import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createGroupCommit } from '../../src/lib/group-commit.ts';
import { ItemFailure } from '../../src/lib/item-outcome.ts';

/** A schedule the test runs by hand, so a "turn" ends exactly when the test says. */
function manualSchedule() {
  const pending: (() => void)[] = [];
  return {
    schedule: (flush: () => void) => void pending.push(flush),
    runNext() {
      pending.shift()!();
    },
    get size() {
      return pending.length;
    },
  };
}

test('items submitted in one turn are committed together, each answered with its own result', async () => {
  const turns = manualSchedule();
  const batches: number[][] = [];
  const writer = createGroupCommit<number, string>({
    commit: (items) => {
      batches.push([...items]);
      return items.map((item) => `stored ${item}`);
    },
    schedule: turns.schedule,
  });
  const answers = [writer.submit(1), writer.submit(2), writer.submit(3)];
  assert.equal(turns.size, 1, 'one flush is scheduled for the whole turn');
  assert.deepEqual(batches, [], 'nothing is committed before the turn ends');
  turns.runNext();
  assert.deepEqual(await Promise.all(answers), ['stored 1', 'stored 2', 'stored 3']);
  assert.deepEqual(batches, [[1, 2, 3]]);
});

test('items submitted after a flush began wait for the next batch', async () => {
  const turns = manualSchedule();
  const batches: number[][] = [];
  const writer = createGroupCommit<number, number>({
    commit: (items) => {
      batches.push([...items]);
      return [...items];
    },
    schedule: turns.schedule,
  });
  const first = writer.submit(1);
  turns.runNext();
  const later = [writer.submit(2), writer.submit(3)];
  turns.runNext();
  assert.deepEqual([await first, ...(await Promise.all(later))], [1, 2, 3]);
  assert.deepEqual(batches, [[1], [2, 3]]);
});

test('a failed batch rejects every item in it with the error, and the next batch still runs', async () => {
  const turns = manualSchedule();
  const disk = new Error('disk full');
  let fail = true;
  const writer = createGroupCommit<number, number>({
    commit: (items) => {
      if (fail) throw disk;
      return [...items];
    },
    schedule: turns.schedule,
  });
  const doomed = [writer.submit(1), writer.submit(2)].map((answer) => answer.then(() => 'stored', (error: unknown) => error));
  turns.runNext();
  assert.deepEqual(await Promise.all(doomed), [disk, disk]);
  fail = false;
  const retried = writer.submit(3);
  turns.runNext();
  assert.equal(await retried, 3);
});

test('an item that failed alone gets its own error; the other items of its batch get their results', async () => {
  const turns = manualSchedule();
  const own = new Error('item 2 failed');
  const writer = createGroupCommit<number, number>({
    commit: (items) => items.map((item) => (item === 2 ? new ItemFailure(own) : item * 10)),
    schedule: turns.schedule,
  });
  const answers = [1, 2, 3].map((item) => writer.submit(item).catch((error: unknown) => error));
  turns.runNext();
  assert.deepEqual(await Promise.all(answers), [10, own, 30]);
});

test('an asynchronous commit and a disabled group commit answer an item that failed alone the same way', async () => {
  const own = new Error('item 2 failed');
  const commit = async (items: readonly number[]) => items.map((item) => (item === 2 ? new ItemFailure(own) : item * 10));
  const turns = manualSchedule();
  const batched = createGroupCommit<number, number>({ commit, schedule: turns.schedule });
  const answers = [1, 2, 3].map((item) => batched.submit(item).catch((error: unknown) => error));
  turns.runNext();
  assert.deepEqual(await Promise.all(answers), [10, own, 30]);
  const alone = createGroupCommit<number, number>({ commit, enabled: false });
  assert.deepEqual(await Promise.all([1, 2, 3].map((item) => alone.submit(item).catch((error: unknown) => error))), [10, own, 30]);
});

test('a batch holds at most maxBatch items; the rest go to the next turn', async () => {
  const turns = manualSchedule();
  const sizes: number[] = [];
  const writer = createGroupCommit<number, number>({
    commit: (items) => {
      sizes.push(items.length);
      return [...items];
    },
    maxBatch: 2,
    schedule: turns.schedule,
  });
  const answers = [1, 2, 3, 4, 5].map((item) => writer.submit(item));
  while (turns.size > 0) turns.runNext();
  assert.deepEqual(await Promise.all(answers), [1, 2, 3, 4, 5]);
  assert.deepEqual(sizes, [2, 2, 1]);
});

test('turned off, every item is committed alone as it is submitted', async () => {
  const sizes: number[] = [];
  const writer = createGroupCommit<number, number>({
    commit: (items) => {
      sizes.push(items.length);
      if (items[0] === 2) throw new Error('no');
      return [...items];
    },
    enabled: false,
  });
  const answers = [1, 2, 3].map((item) => writer.submit(item).catch((error: Error) => error.message));
  assert.deepEqual(sizes, [1, 1, 1]);
  assert.deepEqual(await Promise.all(answers), [1, 'no', 3]);
});

test('by default the flush runs after the current turn (setImmediate)', async () => {
  const batches: number[][] = [];
  const writer = createGroupCommit<number, number>({
    commit: (items) => {
      batches.push([...items]);
      return [...items];
    },
  });
  const answers = Promise.all([writer.submit(1), writer.submit(2)]);
  await Promise.resolve();
  assert.deepEqual(batches, []);
  assert.deepEqual(await answers, [1, 2]);
  assert.deepEqual(batches, [[1, 2]]);
});

test('an asynchronous commit holds later items back until it returns, then sends them as one batch', async () => {
  const turns = manualSchedule();
  const batches: number[][] = [];
  const pending: (() => void)[] = [];
  const writer = createGroupCommit<number, number>({
    commit: (items) => {
      batches.push([...items]);
      return new Promise<number[]>((resolve) => pending.push(() => resolve(items.map((item) => item * 10))));
    },
    schedule: turns.schedule,
  });
  const first = writer.submit(1);
  turns.runNext();
  const later = [writer.submit(2), writer.submit(3)];
  assert.equal(turns.size, 0, 'no flush while the only allowed batch is out');
  pending.shift()!();
  assert.equal(await first, 10);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(turns.size, 1, 'its return schedules the waiting items');
  turns.runNext();
  pending.shift()!();
  assert.deepEqual(await Promise.all(later), [20, 30]);
  assert.deepEqual(batches, [[1], [2, 3]]);
});

test('a rejected asynchronous commit rejects every item of its batch and lets the next batch go', async () => {
  const turns = manualSchedule();
  let calls = 0;
  const writer = createGroupCommit<number, number>({
    commit: async (items) => {
      calls++;
      if (calls === 1) throw new Error('connection lost');
      return [...items];
    },
    schedule: turns.schedule,
  });
  const failed = [writer.submit(1), writer.submit(2)];
  turns.runNext();
  for (const answer of failed) await assert.rejects(answer, /connection lost/);
  const next = writer.submit(3);
  turns.runNext();
  assert.equal(await next, 3);
});
