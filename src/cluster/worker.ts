/**
 * One HTTP worker thread (WORKERS above 1), started by primary.ts: the whole service on its own
 * connection to the SQLite file, listening on the shared port with SO_REUSEPORT (the kernel
 * spreads new connections over the workers), with the rate limiter and the connection counts
 * of the primary thread. Its access log goes straight to file descriptor 1 (see fdWriter).
 *
 * Like main.ts, an impure edge: it opens the file and listens. It never handles signals: the
 * primary tells it to drain.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { AddressInfo } from 'node:net';
import type { Config } from '../config.ts';
import { systemClock } from '../clock.ts';
import { createLogger, fdWriter } from '../http/access-log.ts';
import { closeDatabase, openDatabase } from '../storage/sqlite/database.ts';
import { createWorkerService } from '../service/service.ts';
import { createRemoteLimiter } from './remote-limiter.ts';
import { createRemoteGate } from './remote-gate.ts';
import { SHUTDOWN_GRACE_MS, type PrimaryMessage, type WorkerMessage, type WorkerStart } from './protocol.ts';

const port = parentPort!;
const { config, start } = workerData as { config: Config; start: WorkerStart };
const post = (message: WorkerMessage) => port.postMessage(message);

const logger = createLogger({ level: config.logLevel, clock: systemClock, write: fdWriter(1, 1024 * 1024, systemClock) });

async function startMetrics() {
  const [{ startProcessProbe }, { createMetrics }] = await Promise.all([import('../ops/process-probe.ts'), import('../ops/metrics.ts')]);
  const probe = startProcessProbe();
  return { probe, metrics: createMetrics(probe) };
}
const observed = config.metricsPort === null ? null : await startMetrics();

// The primary opened (and migrated) the file, and warned about its modes, before any worker.
const db = openDatabase(config.databasePath, { busyTimeoutMs: 250 });
const limiter = createRemoteLimiter(post);
const gate = createRemoteGate(post);
const service = createWorkerService({
  config, db, clock: systemClock, logger, limiter,
  server: { connectionGate: gate },
  observer: observed?.metrics,
});
const { app, server } = service;

port.on('message', (message: PrimaryMessage) => {
  switch (message.type) {
    case 'decisions':
      return limiter.answered(message.batch, message.decisions);
    case 'admitted':
      return gate.answered(message.id, message.refusal);
    case 'counts':
      return post({ type: 'counts', id: message.id, counts: observed!.metrics.counts(), eventLoopDelay: observed!.probe.eventLoopDelay() });
    case 'drain':
      return drain();
  }
});

server.on('error', (error: Error & { code?: string }) => post({ type: 'listen_failed', code: error.code ?? error.name }));
// Every worker sets SO_REUSEPORT, so all of them can bind the port; the kernel hashes each new
// connection (its addresses and ports) to one of them.
server.listen({ port: start.port, host: config.host, reusePort: true }, () => {
  const { address, port: bound } = server.address() as AddressInfo;
  post({ type: 'listening', address, port: bound });
});

let draining = false;
/** The single process's shutdown: stop accepting, let requests in flight finish, then report. */
function drain(): void {
  if (draining) return;
  draining = true;
  app.drain();
  server.close(() => {
    observed?.probe.stop();
    logger.flush();
    closeDatabase(db);
    post({ type: 'stopped' });
    port.close();
  });
  server.closeIdleConnections();
  setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
}
