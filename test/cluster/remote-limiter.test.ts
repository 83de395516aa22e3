import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLimiter } from '../../src/limits/limiter.ts';
import { createConnectionGate } from '../../src/http/connection-gate.ts';
import { createRemoteLimiter } from '../../src/cluster/remote-limiter.ts';
import { createRemoteGate } from '../../src/cluster/remote-gate.ts';
import { createLimiterHost } from '../../src/cluster/limiter-host.ts';
import { createRemoteStreamSlots } from '../../src/cluster/remote-stream-slots.ts';
import { createStreamSlots } from '../../src/limits/stream-slots.ts';
import type { PrimaryMessage, WorkerMessage } from '../../src/cluster/protocol.ts';
import { fakeClock } from '../support/test-server.ts';

/** A worker's side and the primary's, joined by an in-memory channel that delivers on demand. */
function channel() {
  const clock = fakeClock();
  const limiter = createLimiter({ clock, banThreshold: 3, banSeconds: 60 });
  const host = createLimiterHost({ limiter, gate: createConnectionGate({ maxConnections: 3, maxConnectionsPerAddress: 2 }), streams: createStreamSlots({ perKey: 2, perInstance: 3 }) });
  const sent: WorkerMessage[] = [];
  const post = (message: WorkerMessage) => sent.push(message);
  const remote = createRemoteLimiter(post);
  const gate = createRemoteGate(post);
  /** Hands every message sent so far to the primary, and its answers back to the worker. */
  const deliver = () => {
    for (const message of sent.splice(0)) {
      host(message, (answer: PrimaryMessage) => {
        if (answer.type === 'decisions') remote.answered(answer.batch, answer.decisions);
        if (answer.type === 'admitted') gate.answered(answer.id, answer.refusal);
      });
    }
  };
  return { remote, gate, sent, deliver, host };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

test('the takes of one event-loop turn leave as one message, and each gets its own decision from the one limiter', async () => {
  const { remote, sent, deliver } = channel();
  const limits = { perMinute: 1000, perDay: 3 };
  const answers = Array.from({ length: 5 }, () => remote.take('key:a', limits));
  await turn();
  assert.equal(sent.length, 1, 'one message for the turn');
  assert.deepEqual(sent[0], { type: 'take', batch: 0, takes: Array.from({ length: 5 }, () => ['key:a', 1000, 3]).flat() });
  deliver();
  const decisions = await Promise.all(answers);
  assert.deepEqual(decisions.map((decision) => decision.allowed), [true, true, true, false, false]);
  assert.deepEqual(decisions.map((decision) => decision.headers['X-RateLimit-Remaining']), ['2', '1', '0', '0', '0']);
});

test('a programmer error in the limits is thrown in the worker, as the in-memory limiter does', () => {
  const { remote, sent } = channel();
  assert.throws(() => remote.take('key:a', { perMinute: 0, perDay: 1 }), RangeError);
  assert.equal(sent.length, 0);
});

test('the connection gate counts in the primary: a third connection from one address is refused until one closes', async () => {
  const { gate, deliver } = channel();
  const first = [gate.admit('10.0.0.1'), gate.admit('10.0.0.1'), gate.admit('10.0.0.1')];
  deliver();
  assert.deepEqual(await Promise.all(first), [null, null, { openConnectionsFromAddress: 2 }]);
  gate.release('10.0.0.1');
  const again = gate.admit('10.0.0.1');
  deliver();
  assert.equal(await again, null);
  const total = [gate.admit('10.0.0.2'), gate.admit('10.0.0.3')];
  deliver();
  assert.deepEqual(await Promise.all(total), [null, { openConnections: 3 }], 'and the total cap');
});

test('event streams are counted in the primary: the caps per key and per instance hold across workers', async () => {
  const { host } = channel();
  // Two workers, each with its own channel to the one primary.
  const workers = [0, 1].map(() => {
    const sent: WorkerMessage[] = [];
    return { sent, slots: createRemoteStreamSlots((message) => sent.push(message)) };
  });
  const deliver = () => {
    for (const { sent, slots } of workers) {
      for (const message of sent.splice(0)) host(message, (answer) => answer.type === 'stream_acquired' && slots.answered(answer.id, answer.refusal));
    }
  };
  const [one, two] = workers.map((worker) => worker.slots) as [ReturnType<typeof createRemoteStreamSlots>, ReturnType<typeof createRemoteStreamSlots>];
  const opened = [one.acquire('key_a'), two.acquire('key_a'), two.acquire('key_a')];
  deliver();
  assert.deepEqual(await Promise.all(opened), [null, null, { cap: 'key', limit: 2 }], 'two per key, whichever worker holds them');
  const other = [one.acquire('key_b'), two.acquire('key_c')];
  deliver();
  assert.deepEqual(await Promise.all(other), [null, { cap: 'instance', limit: 3 }], 'three in all');
  one.release('key_a');
  const again = two.acquire('key_c');
  deliver();
  assert.equal(await again, null, 'a stream closed on one worker frees its slot for another');
});
