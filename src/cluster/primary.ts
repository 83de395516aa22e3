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
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net';
import { getCompileCacheDir } from 'node:module';
import type { Config } from '../config.ts';
import type { Clock } from '../clock.ts';
import { systemClock } from '../clock.ts';
import { createLogger, fdWriter, type Logger } from '../http/access-log.ts';
import { errorName } from '../pipeline/errors.ts';
import { createConnectionGate, createHttpServer, SERVER_LIMITS } from '../http/server.ts';
import { createLimiter } from '../limits/limiter.ts';
import type { DatabaseSync } from 'node:sqlite';
import { closeDatabase, openServerDatabase } from '../storage/sqlite/database.ts';
import { createKeysStore } from '../storage/sqlite/keys-store.ts';
import { createPetsStore } from '../storage/sqlite/pets-store.ts';
import { createLimiterPersistence, createLimiterStore, LIMITER_FLUSH_INTERVAL_MS } from '../storage/sqlite/limiter-store.ts';
import { ensureDevelopmentKey } from '../storage/keys.ts';
import { createPetCreations, IDEMPOTENCY_PURGE_INTERVAL_MS } from '../api/pets/creations.ts';
import { createLimiterHost } from './limiter-host.ts';
import { createWorkerPool, listenFailure, type WorkerCounts } from './worker-pool.ts';

/** Runs the service on `config.workers` threads; resolves with the process's exit code. */
export async function runPrimary(config: Config): Promise<number> {
  const clock = systemClock;
  // Every thread writes its own lines straight to fd 1, in whole lines (see fdWriter).
  const logger = createLogger({ level: config.logLevel, clock, write: fdWriter(1, 1024 * 1024, clock) });
  const exited = Promise.withResolvers<number>();

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

  let failed = false;
  /** Stops everything at once with one line on stderr (the first failure's); the limiter is saved first. */
  const fail = (line: string) => {
    if (failed) return;
    failed = true;
    process.stderr.write(`${line}\n`);
    chores.saveLimiterState();
    logger.flush();
    exited.resolve(1);
  };
  const pool = createWorkerPool({
    config,
    host,
    failed: fail,
    stopped: () => {
      chores.stop();
      logger.event({ level: 'info', event: 'stopped' });
      logger.flush();
      closeDatabase(db);
      exited.resolve(0);
    },
  });
  const observed = config.metricsPort === null ? null : await startMetrics(logger, pool.gatherCounts);
  const chores = startChores({ db, clock, logger, persistence, databaseError: () => observed?.metrics.databaseError() });

  /** Listens on host:port; on an error writes the one line and resolves null (the start fails). */
  const listenOrFail = async (server: NetServer, wanted: number): Promise<AddressInfo | null> => {
    const outcome = await new Promise<(Error & { code?: string }) | null>((settle) => {
      server.once('error', settle);
      server.listen(wanted, config.host, () => settle(null));
    });
    if (outcome === null) return server.address() as AddressInfo;
    fail(listenFailure(config.host, wanted, outcome.code ?? outcome.name));
    return null;
  };
  /** `step`, unless the start failed meanwhile (then null). */
  const unlessFailed = <T>(step: Promise<T>) => Promise.race([step, exited.promise.then(() => null)]);

  // The metrics listener (if any) is up before the API's, as in main.ts.
  const metricsServer = observed === null ? null : createHttpServer(observed.app, logger);
  if (metricsServer !== null) {
    const bound = await listenOrFail(metricsServer, config.metricsPort!);
    if (bound === null) return exited.promise;
    logger.event({ level: 'info', event: 'metrics_listening', url: urlOf(bound) });
  }

  // A fixed port is first bound once without SO_REUSEPORT: if anything holds it (even another
  // server with WORKERS, which the kernel would otherwise let share it) the start fails as a
  // single process's would, instead of splitting the traffic with a stranger.
  if (config.port !== 0) {
    const probe = createNetServer();
    if ((await listenOrFail(probe, config.port)) === null) return exited.promise;
    await new Promise((resolve) => probe.close(resolve));
  }

  // With PORT=0 the first worker is given a free port, and the others join it.
  const bound = await unlessFailed(pool.start(1, config.port));
  if (bound === null) return exited.promise;
  const others = Array.from({ length: config.workers - 1 }, (_, i) => pool.start(i + 2, bound.port));
  if ((await unlessFailed(Promise.all(others))) === null) return exited.promise;
  logger.event({
    level: 'info', event: 'listening', url: urlOf(bound), appEnv: config.appEnv, database: 'sqlite', workers: config.workers,
    // As in main.ts: the compile cache's folder, or null when it is off (src/start.js).
    compileCache: getCompileCacheDir() ?? null,
  });
  logger.flush();

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.event({ level: 'info', event: 'shutting_down', signal });
    // The workers drain as one process does; this thread answers their limiter meanwhile, and
    // `stopped` above runs once the last one has stopped.
    pool.drain();
    // A scrape waits on the workers, which are stopping: close its listener at once.
    observed?.app.drain();
    metricsServer?.close();
    metricsServer?.closeAllConnections();
    observed?.probe.stop();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  return exited.promise;
}

/**
 * What the primary does on timers, as main.ts does for one process: the limiter saved every
 * second (and once more at the end), expired idempotency records purged (by this thread alone,
 * for every worker).
 */
function startChores({ db, clock, logger, persistence, databaseError }: {
  db: DatabaseSync; clock: Clock; logger: Logger; persistence: { flush(): number }; databaseError(): void;
}) {
  const saveLimiterState = () => {
    try {
      persistence.flush();
    } catch (error) {
      databaseError();
      logger.event({ level: 'error', event: 'limiter_save_failed', error: errorName(error) });
    }
  };
  const creations = createPetCreations({ pets: createPetsStore(db), clock });
  const purge = () => {
    creations.purgeExpired().catch((error: unknown) => {
      databaseError();
      logger.event({ level: 'error', event: 'idempotency_purge_failed', error: errorName(error) });
    });
  };
  const limiterTimer = setInterval(saveLimiterState, LIMITER_FLUSH_INTERVAL_MS);
  limiterTimer.unref();
  const purgeTimer = setInterval(purge, IDEMPOTENCY_PURGE_INTERVAL_MS);
  purgeTimer.unref();
  setImmediate(purge);
  return {
    saveLimiterState,
    /** Stops the timers and saves the limiter a last time. */
    stop() {
      clearInterval(limiterTimer);
      clearInterval(purgeTimer);
      saveLimiterState();
    },
  };
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
