// Experiment: a WORKERS rate-limit decision through the main thread, latency and CPU per take (about 2.3 us of CPU; docs/deployment.md).
/**
 * `node_modules/.bin/node bench/experiments/remote-limiter.ts`: what a worker's rate-limit
 * decision costs when the limiter is in the main thread (WORKERS above 1), against the in-memory
 * take of one process. One worker thread takes tokens through the real remote limiter and limiter
 * host: one take at a time (a round trip each), then 50 at once per event-loop turn (one message
 * each way per turn), as a busy worker sends them. Elapsed time per take is mostly the threads
 * waking each other (this worker waits for each batch; a busy one serves other requests
 * meanwhile); CPU time per take, both threads together, is what a take costs the machine.
 */
import { Worker, isMainThread, parentPort } from 'node:worker_threads';
import { createLimiter } from '../../src/limits/limiter.ts';
import { createConnectionGate } from '../../src/http/connection-gate.ts';
import { createLimiterHost } from '../../src/cluster/limiter-host.ts';
import { createRemoteLimiter } from '../../src/cluster/remote-limiter.ts';
import type { PrimaryMessage, WorkerMessage } from '../../src/cluster/protocol.ts';

const LIMITS = { perMinute: 10_000_000, perDay: 100_000_000 };
const SEQUENTIAL = 20_000;
const CONCURRENT = 50;
const BATCHED_ROUNDS = 2_000;

if (isMainThread) {
  const limiter = createLimiter({ clock: Date.now, banThreshold: 30, banSeconds: 900 });
  let started = performance.now();
  for (let i = 0; i < 200_000; i++) limiter.take(`key:k${i % 10}`, LIMITS);
  const memoryUs = ((performance.now() - started) * 1000) / 200_000;
  const host = createLimiterHost({ limiter, gate: createConnectionGate({ maxConnections: 1024, maxConnectionsPerAddress: 64 }) });
  const worker = new Worker(new URL(import.meta.url));
  const loop = performance.eventLoopUtilization();
  started = performance.now();
  worker.on('message', (message: WorkerMessage | { type: 'done'; sequentialUs: number; batchedUs: number; batchedCpuUs: number }) => {
    if (message.type === 'done') {
      const busy = performance.eventLoopUtilization(loop);
      process.stdout.write(
        `in memory (one process): ${memoryUs.toFixed(2)} us a take\n` +
          `through the main thread, one at a time: ${message.sequentialUs.toFixed(1)} us a take (a round trip)\n` +
          `through the main thread, ${CONCURRENT} per turn: ${message.batchedUs.toFixed(2)} us a take of elapsed time, ${message.batchedCpuUs.toFixed(2)} us of CPU (both threads)\n` +
          `main thread busy ${(busy.utilization * 100).toFixed(0)} % of ${((performance.now() - started) / 1000).toFixed(1)} s\n`,
      );
      void worker.terminate();
      return;
    }
    host(message, (answer: PrimaryMessage) => worker.postMessage(answer));
  });
} else {
  const port = parentPort!;
  const remote = createRemoteLimiter((message) => port.postMessage(message));
  port.on('message', (message: PrimaryMessage) => {
    if (message.type === 'decisions') remote.answered(message.batch, message.decisions);
  });
  let started = performance.now();
  for (let i = 0; i < SEQUENTIAL; i++) await remote.take('key:bench', LIMITS);
  const sequentialUs = ((performance.now() - started) * 1000) / SEQUENTIAL;
  started = performance.now();
  const cpu = process.cpuUsage();
  for (let round = 0; round < BATCHED_ROUNDS; round++) {
    await Promise.all(Array.from({ length: CONCURRENT }, (_, i) => remote.take(`key:k${i % 10}`, LIMITS)));
  }
  const batchedUs = ((performance.now() - started) * 1000) / (BATCHED_ROUNDS * CONCURRENT);
  // process.cpuUsage is the whole process's: both threads, the worker's and the main one's.
  const used = process.cpuUsage(cpu);
  const batchedCpuUs = (used.user + used.system) / (BATCHED_ROUNDS * CONCURRENT);
  port.postMessage({ type: 'done', sequentialUs, batchedUs, batchedCpuUs });
}
