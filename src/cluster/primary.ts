/**
 * The primary thread of WORKERS above 1: one process that uses every core of one machine over
 * one SQLite file, with every guarantee of the single process.
 *
 * - N worker threads (worker.ts) each run the whole HTTP service on their own connection to the
 *   file and listen on the same HOST:PORT with SO_REUSEPORT; the kernel spreads new connections
 *   over them. Reads stay exact across workers: every cache drops what another connection's
 *   commit may have changed (PRAGMA data_version), and a create checks its Idempotency-Key again
 *   inside its write transaction.
 * - This thread holds what must be counted once for the port: the single process's in-memory
 *   rate limiter (restored at start, saved every second and at exit, as main.ts does) and the
 *   open connections per address (limiter-host.ts). Workers ask it, a batch per event-loop turn.
 * - It serves /metrics (METRICS_PORT), summing what the workers count, and handles the signals:
 *   SIGTERM/SIGINT drain every worker as one process drains, then save the limiter and exit 0.
 *   A worker that dies takes the whole process down with exit 1 and one line on stderr: no
 *   service silently runs on fewer cores than configured.
 *
 * Like main.ts, an impure edge: files, threads, listening, signals.
 */
import { Worker } from 'node:worker_threads';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net';
import type { Config } from '../config.ts';
import { systemClock } from '../clock.ts';
import { createLogger, fdWriter, type Logger } from '../http/access-log.ts';
import { errorName } from '../http/error-mapper.ts';
import { createConnectionGate, createHttpServer, SERVER_LIMITS } from '../http/server.ts';
import { createLimiter } from '../limits/limiter.ts';
import { closeDatabase, openServerDatabase } from '../storage/sqlite/database.ts';
import { createKeysStore } from '../storage/sqlite/keys-store.ts';
import { createPetsStore } from '../storage/sqlite/pets-store.ts';
import { createLimiterPersistence, createLimiterStore, LIMITER_FLUSH_INTERVAL_MS } from '../storage/sqlite/limiter-store.ts';
import { ensureDevelopmentKey } from '../storage/keys.ts';
import { createPetCreations, IDEMPOTENCY_PURGE_INTERVAL_MS } from '../api/pet-creations.ts';
import { createLimiterHost } from './limiter-host.ts';
import type { PrimaryMessage, WorkerMessage } from './protocol.ts';
import type { EventLoopDelay, MetricsCounts } from '../ops/metrics.ts';

const WORKER_ENTRY = new URL('./worker.ts', import.meta.url);

/** Runs the service on `config.workers` threads; resolves with the process's exit code. */
export async function runPrimary(config: Config): Promise<number> {
  const clock = systemClock;
  // Every thread writes its own lines straight to fd 1, in whole lines (see fdWriter).
  const logger = createLogger({ level: config.logLevel, clock, write: fdWriter(1, 1024 * 1024, clock) });
  let exit!: (code: number) => void;
  const exited = new Promise<number>((resolve) => (exit = resolve));

  // As main.ts: a crash prints no stack (it may carry input or SQL), only the error's name.
  process.on('uncaughtException', (error) => {
    logger.event({ level: 'error', event: 'crash', error: errorName(error) });
    logger.flush();
    process.exit(1);
  });

  const db = openServerDatabase(config.databasePath, (fields) => logger.event(fields));
  const developmentKey = await ensureDevelopmentKey(createKeysStore(db, { appEnv: config.appEnv }), config.appEnv, clock());
  if (developmentKey) {
    process.stderr.write(`Created a free development API key; it is shown only this once:\n\n  ${developmentKey}\n\n`);
  }

  const limiter = createLimiter({ clock, banThreshold: config.rateLimitBanThreshold, banSeconds: config.rateLimitBanSeconds });
  const persistence = createLimiterPersistence({ limiter, store: createLimiterStore(db) });
  persistence.load();
  const host = createLimiterHost({
    limiter,
    gate: createConnectionGate({ maxConnections: SERVER_LIMITS.maxConnections, maxConnectionsPerAddress: config.maxConnectionsPerAddress }),
  });
  const workers: RunningWorker[] = [];
  const scrapes = new Map<number, { left: number; answers: WorkerCounts[]; done: (answers: WorkerCounts[]) => void }>();
  let nextScrape = 0;
  /** Every worker's counts now, for one scrape of /metrics. */
  const gatherCounts = (): Promise<WorkerCounts[]> => {
    const id = nextScrape++;
    const answers = new Array<WorkerCounts>(workers.length);
    return new Promise((done) => {
      scrapes.set(id, { left: workers.length, answers, done });
      for (const worker of workers) worker.post({ type: 'counts', id });
    });
  };
  const observed = config.metricsPort === null ? null : await startMetrics(logger, gatherCounts);

  const saveLimiterState = () => {
    try {
      persistence.flush();
    } catch (error) {
      observed?.metrics.databaseError();
      logger.event({ level: 'error', event: 'limiter_save_failed', error: errorName(error) });
    }
  };
  const limiterTimer = setInterval(saveLimiterState, LIMITER_FLUSH_INTERVAL_MS);
  limiterTimer.unref();
  // One thread purges expired idempotency records for all (the workers never do).
  const creations = createPetCreations({ pets: createPetsStore(db), clock });
  const purge = () => {
    creations.purgeExpired().catch((error: unknown) => {
      observed?.metrics.databaseError();
      logger.event({ level: 'error', event: 'idempotency_purge_failed', error: errorName(error) });
    });
  };
  const purgeTimer = setInterval(purge, IDEMPOTENCY_PURGE_INTERVAL_MS);
  purgeTimer.unref();
  setImmediate(purge);

  let stopping = false;
  let failed = false;
  /** Stops everything at once with one line on stderr (the first failure's); the limiter is saved first. */
  const fail = (line: string) => {
    if (failed) return;
    failed = true;
    process.stderr.write(`${line}\n`);
    saveLimiterState();
    logger.flush();
    exit(1);
  };

  function startWorker(index: number, port: number): Promise<AddressInfo> {
    const thread = new Worker(WORKER_ENTRY, { workerData: { config, start: { index, port } } });
    const running: RunningWorker = { index, thread, stopped: false, post: (message) => thread.postMessage(message) };
    workers.push(running);
    const listening = Promise.withResolvers<AddressInfo>();
    thread.on('message', (message: WorkerMessage) => {
      if (host(message, running.post)) return;
      switch (message.type) {
        case 'listening':
          return listening.resolve({ address: message.address, port: message.port, family: '' });
        case 'listen_failed':
          return fail(listenFailure(config.host, port, message.code));
        case 'counts': {
          const scrape = scrapes.get(message.id);
          if (scrape === undefined) return;
          scrape.answers[index - 1] = { counts: message.counts, eventLoopDelay: message.eventLoopDelay };
          if (--scrape.left === 0) {
            scrapes.delete(message.id);
            scrape.done(scrape.answers);
          }
          return;
        }
        case 'stopped':
          running.stopped = true;
          return;
      }
    });
    // An uncaught error in a worker: its name only, like the single process's crash line.
    thread.on('error', (error) => fail(`worker ${index} of ${config.workers} crashed (${errorName(error)}); stopping the server`));
    thread.on('exit', (code) => {
      if (!(stopping && running.stopped)) fail(`worker ${index} of ${config.workers} exited with code ${code}; stopping the server`);
      else if (workers.every((worker) => worker.stopped)) finish();
    });
    return listening.promise;
  }

  let metricsServer: ReturnType<typeof createHttpServer> | null = null;
  if (observed !== null && config.metricsPort !== null) {
    metricsServer = createHttpServer(observed.app, logger);
    const bound = await listenOrFail(metricsServer, config.host, config.metricsPort);
    if (bound === null) return exited;
    logger.event({ level: 'info', event: 'metrics_listening', url: urlOf(bound) });
  }

  // A fixed port is first bound once without SO_REUSEPORT: if anything holds it (even another
  // server with WORKERS, which the kernel would otherwise let share it) the start fails as a
  // single process's would, instead of splitting the traffic with a stranger.
  if (config.port !== 0) {
    const probe = createNetServer();
    const free = await listenOrFail(probe, config.host, config.port);
    if (free === null) return exited;
    await new Promise((resolve) => probe.close(resolve));
  }

  // With PORT=0 the first worker is given a free port, and the others join it.
  const bound = await Promise.race([startWorker(1, config.port), exited.then(() => null)]);
  if (bound === null) return exited;
  const others = Promise.all(Array.from({ length: config.workers - 1 }, (_, i) => startWorker(i + 2, bound.port)));
  if ((await Promise.race([others, exited.then(() => null)])) === null) return exited;
  logger.event({ level: 'info', event: 'listening', url: urlOf(bound), appEnv: config.appEnv, database: 'sqlite', workers: config.workers });
  logger.flush();

  function shutdown(signal: string): void {
    if (stopping) return;
    stopping = true;
    logger.event({ level: 'info', event: 'shutting_down', signal });
    for (const worker of workers) worker.post({ type: 'drain' });
    // A scrape waits on the workers, which are stopping: close its listener at once.
    observed?.app.drain();
    metricsServer?.close();
    metricsServer?.closeAllConnections();
    observed?.probe.stop();
  }

  function finish(): void {
    clearInterval(limiterTimer);
    clearInterval(purgeTimer);
    saveLimiterState();
    logger.event({ level: 'info', event: 'stopped' });
    logger.flush();
    closeDatabase(db);
    exit(0);
  }

  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  return exited;

  /** Listens on host:port; on an error writes the one line and resolves null (the start fails). */
  async function listenOrFail(server: NetServer, hostName: string, wanted: number): Promise<AddressInfo | null> {
    const outcome = await new Promise<(Error & { code?: string }) | null>((settle) => {
      server.once('error', settle);
      server.listen(wanted, hostName, () => settle(null));
    });
    if (outcome !== null) {
      fail(listenFailure(hostName, wanted, outcome.code ?? outcome.name));
      return null;
    }
    return server.address() as AddressInfo;
  }
}

interface RunningWorker {
  index: number;
  thread: Worker;
  /** Said `stopped` after a drain. */
  stopped: boolean;
  post(message: PrimaryMessage): void;
}

interface WorkerCounts {
  counts: MetricsCounts;
  eventLoopDelay: EventLoopDelay;
}

/**
 * The primary's metrics (its own failed saves) and the app of their listener: each scrape asks
 * every worker for its counts (`gather`) and renders the sum.
 */
async function startMetrics(logger: Logger, gather: () => Promise<WorkerCounts[]>) {
  const [{ startProcessProbe }, { createMetrics, mergeCounts, renderCounts, requestCount, worstDelay }, { createMetricsApp }] = await Promise.all([
    import('../ops/process-probe.ts'), import('../ops/metrics.ts'), import('../ops/metrics-app.ts'),
  ]);
  const probe = startProcessProbe();
  const metrics = createMetrics(probe);
  const render = async () => {
    const answers = await gather();
    // Resident memory and CPU time are the whole process's; the event-loop delay is the workers'.
    const process = { ...probe, eventLoopDelay: () => worstDelay(answers.map((answer) => answer.eventLoopDelay)) };
    const total = mergeCounts([metrics.counts(), ...answers.map((answer) => answer.counts)]);
    return renderCounts(total, process, answers.map((answer) => requestCount(answer.counts)));
  };
  return { probe, metrics, app: createMetricsApp({ metrics: { render }, log: (fields) => logger.event(fields) }) };
}

/** The URL that a listener bound, as main.ts logs it. */
function urlOf({ address, port }: { address: string; port: number }): string {
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
}

/** The one line of a failed listen; names SO_REUSEPORT where the platform lacks it. */
function listenFailure(host: string, port: number, code: string): string {
  if (code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'ERR_INVALID_ARG_VALUE') {
    return `cannot listen on ${host}:${port}: WORKERS above 1 needs SO_REUSEPORT (reusePort), which this platform does not offer (${code}); set WORKERS=1`;
  }
  return `cannot listen on ${host}:${port}: ${code}`;
}
