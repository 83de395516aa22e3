/**
 * One HTTP worker thread of WORKERS above 1 (main.ts is its entry and opens its connection): the
 * whole service on its own connection to the SQLite file, which only reads, its writes sent to
 * the one writer thread, listening on the shared port with SO_REUSEPORT (the kernel spreads new
 * connections over the workers), with the rate limiter and the connection counts of the primary
 * thread. It never handles signals: the primary tells it to drain.
 */
import type { MessagePort } from 'node:worker_threads';
import type { DatabaseSync } from 'node:sqlite';
import type { Config } from '../config.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../http/access-log.ts';
import { createService } from '../service/service.ts';
import { drainServer, listen } from '../service/serving.ts';
import { openReaderStores, type WriterLink } from '../storage/sqlite/stores.ts';
import { createRemoteLimiter } from './remote-limiter.ts';
import { createRemoteGate } from './remote-gate.ts';
import { createRemoteStreamSlots } from './remote-stream-slots.ts';
import type { PrimaryMessage, WorkerMessage, WorkerStart } from './protocol.ts';

export interface WorkerDeps {
  config: Config;
  start: WorkerStart;
  /** The channel to the primary (`parentPort`). */
  channel: MessagePort;
  /** This worker's own connection to the file, which only reads (opened by main.ts). */
  db: DatabaseSync;
  /** This worker's way to the writer thread. */
  writer: WriterLink;
  clock: Clock;
  logger: Logger;
  /** Closes what main.ts opened for this worker, once it has drained. */
  close(): void;
}

/** Serves until the primary says drain; resolves once drained, closed and reported `stopped`. */
export async function runWorker({ config, start, channel, db, writer, clock, logger, close }: WorkerDeps): Promise<void> {
  const post = (message: WorkerMessage) => channel.postMessage(message);
  const observed = config.metricsPort === null ? null : await startMetrics();
  const limiter = createRemoteLimiter(post);
  const gate = createRemoteGate(post);
  const slots = createRemoteStreamSlots(post);
  const stores = openReaderStores(db, writer, { appEnv: config.appEnv, clock, banThreshold: config.rateLimitBanThreshold, banSeconds: config.rateLimitBanSeconds, limiter });
  const { app, server } = createService({ stores, config, clock, logger, server: { connectionGate: gate }, streams: { slots }, observer: observed?.metrics });
  const stopped = Promise.withResolvers<void>();

  let draining = false;
  channel.on('message', (message: PrimaryMessage) => {
    switch (message.type) {
      case 'decisions':
        return limiter.answered(message.batch, message.decisions);
      case 'admitted':
        return gate.answered(message.id, message.refusal);
      case 'stream_acquired':
        return slots.answered(message.id, message.refusal);
      case 'counts':
        return post({ type: 'counts', id: message.id, counts: observed!.metrics.counts(), eventLoopDelay: observed!.probe.eventLoopDelay() });
      case 'drain':
        if (draining) return;
        draining = true;
        return void drainServer(app, server).then(stopped.resolve);
    }
  });

  try {
    // Every worker sets SO_REUSEPORT, so all of them can bind the port; the kernel hashes each
    // new connection (its addresses and ports) to one of them.
    const { address, port } = await listen(server, { port: start.port, host: config.host, reusePort: true });
    post({ type: 'listening', address, port });
  } catch (error) {
    post({ type: 'listen_failed', code: (error as { code?: string }).code ?? (error as Error).name });
    return;
  }
  await stopped.promise;
  observed?.probe.stop();
  logger.flush();
  close();
  post({ type: 'stopped' });
  channel.close();
}

/** The worker's counts; the primary serves them, summed over every worker. */
async function startMetrics() {
  const [{ startProcessProbe }, { createMetrics }] = await Promise.all([import('../ops/process-probe.ts'), import('../ops/metrics.ts')]);
  const probe = startProcessProbe();
  return { probe, metrics: createMetrics(probe) };
}
