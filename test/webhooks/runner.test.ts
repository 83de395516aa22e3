/**
 * The runner of attempts, with attempts that settle when the test says and a clock that moves
 * when it says: at most 16 at once, at most 4 per endpoint, a slow endpoint's backlog never ahead
 * of another endpoint's delivery, every job run exactly once, and a stop that waits for the
 * attempts running and hands back the ones never started.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createRunner, MAX_ATTEMPTS_AT_ONCE, MAX_ATTEMPTS_PER_ENDPOINT } from '../../src/webhooks/runner.ts';
import { settings } from '../support/property.ts';

interface Job {
  endpoint: string;
  n: number;
}

/** A runner whose attempts run until the test finishes them, and a record of what ran. */
function harness(options: { concurrency?: number; perEndpoint?: number } = {}) {
  let now = 0;
  const running = new Map<Job, () => void>();
  const started: { job: Job; waitedMs: number }[] = [];
  const failures: Job[] = [];
  const runner = createRunner<Job>({
    ...options,
    clock: () => now,
    endpointOf: (job) => job.endpoint,
    run: (job, waitedMs) => {
      started.push({ job, waitedMs });
      return new Promise<void>((resolve, reject) => running.set(job, () => (job.n < 0 ? reject(new Error('bug')) : resolve())));
    },
    failed: (job) => failures.push(job),
  });
  const finish = async (job: Job) => {
    const settle = running.get(job);
    assert.ok(settle, `${job.endpoint}#${job.n} is running`);
    running.delete(job);
    settle();
    // The slot frees once the settled promise's reactions have run.
    await new Promise((resolve) => setImmediate(resolve));
  };
  const runningOf = (endpoint: string) => [...running.keys()].filter((job) => job.endpoint === endpoint).length;
  return { runner, running, started, failures, finish, runningOf, advance: (ms: number) => (now += ms) };
}

const jobs = (endpoint: string, count: number, from = 0) => Array.from({ length: count }, (_, i) => ({ endpoint, n: from + i }));

test('the contract\'s bounds: 16 attempts at once per instance, 4 per endpoint', () => {
  assert.equal(MAX_ATTEMPTS_AT_ONCE, 16);
  assert.equal(MAX_ATTEMPTS_PER_ENDPOINT, 4);
});

test('at most 16 attempts run at once, and the next starts as soon as one settles', async () => {
  const { runner, running, finish, started } = harness();
  for (let e = 0; e < 10; e++) for (const job of jobs(`e${e}`, 3)) runner.submit(job);
  assert.equal(running.size, 16);
  assert.deepEqual(runner.load(), { running: 16, queued: 14, free: 0, saturated: new Set() });
  await finish(started[0]!.job);
  assert.equal(running.size, 16);
  assert.equal(started.length, 17);
});

test('a slow endpoint holds at most 4 slots; another endpoint\'s deliveries start at once, ahead of its backlog', async () => {
  const { runner, running, runningOf, started, finish } = harness();
  for (const job of jobs('slow', 100)) runner.submit(job);
  assert.equal(runningOf('slow'), 4);
  assert.deepEqual(runner.load().saturated, new Set(['slow']));
  const fast = jobs('fast', 3);
  for (const job of fast) runner.submit(job);
  assert.equal(runningOf('fast'), 3, 'started at once, beside the slow endpoint\'s four');
  assert.equal(running.size, 7);
  for (const job of fast) await finish(job);
  assert.equal(runningOf('slow'), 4, 'the slow endpoint still has only its four');
  assert.ok(started.filter(({ job }) => job.endpoint === 'fast').every(({ waitedMs }) => waitedMs === 0));
});

test('when slow endpoints hold every slot, a freed slot goes to the endpoint with the fewest running, not to a backlog', async () => {
  const { runner, runningOf, finish, advance, started } = harness();
  for (const endpoint of ['a', 'b', 'c', 'd']) for (const job of jobs(endpoint, 10)) runner.submit(job);
  assert.deepEqual(['a', 'b', 'c', 'd'].map(runningOf), [4, 4, 4, 4]);
  advance(1000);
  runner.submit({ endpoint: 'new', n: 0 });
  runner.submit({ endpoint: 'new', n: 1 });
  assert.equal(runningOf('new'), 0, 'every slot is taken');
  advance(9000);
  await finish(started.find(({ job }) => job.endpoint === 'a')!.job);
  assert.equal(runningOf('new'), 1, 'the freed slot went to the endpoint with none running');
  assert.equal(runningOf('a'), 3);
  assert.deepEqual(started.at(-1), { job: { endpoint: 'new', n: 0 }, waitedMs: 9000 });
  await finish(started.find(({ job }) => job.endpoint === 'b')!.job);
  assert.equal(runningOf('new'), 2, 'and the next one too: it still had the fewest running');
  // "new" has nothing left; a, b and c each have 3 running and a backlog: the slot c frees goes
  // to the one that has been ready longest, a.
  await finish(started.find(({ job }) => job.endpoint === 'c')!.job);
  assert.deepEqual(['a', 'b', 'c', 'new'].map(runningOf), [4, 3, 3, 2]);
});

test('an endpoint\'s jobs start in the order they were submitted', async () => {
  const { runner, started, finish } = harness({ concurrency: 1 });
  for (const job of jobs('a', 5)) runner.submit(job);
  for (let i = 0; i < 5; i++) await finish(started[i]!.job);
  assert.deepEqual(started.map(({ job }) => job.n), [0, 1, 2, 3, 4]);
});

test('a job whose run rejects is reported and frees its slot', async () => {
  const { runner, failures, running, finish } = harness({ concurrency: 1 });
  const failing = { endpoint: 'a', n: -1 };
  runner.submit(failing);
  runner.submit({ endpoint: 'a', n: 1 });
  await finish(failing);
  assert.deepEqual(failures.map((job) => job.n), [-1]);
  assert.deepEqual([...running.keys()].map((job) => job.n), [1]);
});

test('stop starts nothing more, waits for the attempts running, and hands back those never started', async () => {
  const { runner, running, finish } = harness({ concurrency: 2 });
  for (const job of jobs('a', 3)) runner.submit(job);
  runner.submit({ endpoint: 'b', n: 9 });
  const started = [...running.keys()];
  let stopped: Job[] | null = null;
  const stopping = runner.stop().then((unstarted) => (stopped = unstarted));
  assert.equal(runner.submit({ endpoint: 'c', n: 0 }), false, 'refused once stopping, for the caller to give back');
  await finish(started[0]!);
  assert.equal(stopped, null, 'one attempt is still running');
  assert.equal(running.size, 1, 'nothing new started');
  await finish(started[1]!);
  await stopping;
  assert.deepEqual(stopped!.map((job) => `${job.endpoint}${job.n}`).sort(), ['a2', 'b9']);
});

test('whatever the order of submissions and settlements: the bounds hold, no slot idles while a job could start, every job runs once', () => {
  const step = fc.oneof(fc.record({ submit: fc.integer({ min: 0, max: 7 }) }), fc.record({ settle: fc.nat(30) }));
  fc.assert(
    fc.asyncProperty(fc.array(step, { maxLength: 200 }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 1, max: 4 }), async (steps, concurrency, perEndpoint) => {
      const { runner, running, started, finish, runningOf } = harness({ concurrency, perEndpoint });
      let submitted = 0;
      const check = () => {
        assert.ok(running.size <= concurrency);
        const load = runner.load();
        const endpoints = new Set([...running.keys()].map((job) => job.endpoint));
        for (const endpoint of endpoints) assert.ok(runningOf(endpoint) <= perEndpoint);
        // Work-conserving: a job waits only while every slot is taken or its endpoint is at its cap.
        if (load.queued > 0 && running.size < concurrency) {
          const waiting = new Set([...Array(8).keys()].map((e) => `e${e}`).filter((e) => runningOf(e) < perEndpoint));
          const startable = [...waiting].some((e) => started.filter(({ job }) => job.endpoint === e).length < submittedTo.get(e)!);
          assert.ok(!startable, 'a slot idles while a job could start');
        }
      };
      const submittedTo = new Map([...Array(8).keys()].map((e) => [`e${e}`, 0]));
      for (const action of steps) {
        if ('submit' in action) {
          const endpoint = `e${action.submit}`;
          runner.submit({ endpoint, n: submitted++ });
          submittedTo.set(endpoint, submittedTo.get(endpoint)! + 1);
        } else if (running.size > 0) {
          await finish([...running.keys()][action.settle % running.size]!);
        }
        check();
      }
      while (running.size > 0) await finish([...running.keys()][0]!);
      assert.equal(started.length, submitted, 'every job ran');
      assert.equal(new Set(started.map(({ job }) => job.n)).size, submitted, 'once each');
    }),
    settings(200),
  );
});
