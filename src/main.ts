/**
 * The only impure edge: reads the environment, opens the database (a SQLite file, or PostgreSQL
 * when DATABASE_URL is set), listens, runs the timers, handles signals and crashes. Everything
 * it wires together takes its dependencies as arguments.
 *
 * One boot path, three roles:
 * - the single process (WORKERS unset or 1): it serves the API itself;
 * - the primary thread of WORKERS above 1: it holds the limiter and the connection counts and
 *   starts the workers (src/cluster/primary.ts);
 * - a worker thread of that primary: this same file is its entry (src/cluster/worker.ts).
 * The first two share everything else: the engine, the development key, the chores, the
 * metrics listener, the `listening` line and the shutdown. On a SQLite file either starts the
 * writer (storage/sqlite/engine.ts): with one core inline on its own connection, otherwise the
 * writer thread (src/writer.ts), the only connection that writes the file, for every thread.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import type { MessagePort } from 'node:worker_threads';
import { ConfigError, configWarnings, loadConfig, type Config } from './config.ts';
import { withoutPassword } from './lib/postgres-url.ts';
import { systemClock } from './clock.ts';
import { boundedWriter, createLogger, errorFields, fdWriter, type Logger } from './http/access-log.ts';
import { createHttpServer } from './http/server.ts';
import { allowedHosts } from './http/allowed-hosts.ts';
import type { App } from './http/server.ts';
import { ensureDevelopmentKey } from './storage/keys.ts';
import type { Stores } from './storage/stores.ts';
import { closeDatabase, openReaderDatabase } from './storage/sqlite/database.ts';
import { openSqliteEngine } from './storage/sqlite/engine.ts';
import { createKeysStore } from './storage/sqlite/keys-store.ts';
import { loadWriterThreadHost, type WriterHost } from './storage/sqlite/writer.ts';
import type { Limiter } from './limits/limiter.ts';
import { createService } from './service/service.ts';
import { startChores, type Chores } from './service/chores.ts';
import { startDeliveryWorker, type DeliveryWorker } from './service/deliveries.ts';
import { drainServer, listen, listenFailure, urlOf } from './service/serving.ts';
import type { WorkerCounts } from './cluster/worker-pool.ts';
import type { WorkerStart, WorkerWriter } from './cluster/protocol.ts';

const { isMainThread, parentPort, workerData } = process.getBuiltinModule('node:worker_threads');
const { getCompileCacheDir } = process.getBuiltinModule('node:module');

/**
 * Whether a promise that nobody can await failed inside the PostgreSQL driver, harmlessly (see
 * isDroppedTypesQuery); set once the driver is loaded. Anything else left unhandled is a crash.
 */
let droppedByDriver: (reason: unknown) => boolean = () => false;
/**
 * Whether an exception that reached no caller is the driver's write to a connection PostgreSQL
 * closed (see isWriteAfterClose): logged, and served through; set once the driver is loaded.
 */
let lostByDriver: (error: unknown) => boolean = () => false;

/** At most 1 MiB of log text waits for a slow reader; beyond that lines are dropped and counted. */
const LOG_BUFFER_BYTES = 1024 * 1024;

/** A failure to start: one line on stderr, exit 1. */
function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

function readConfig(): Config {
  try {
    return loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message);
    throw error;
  }
}

/** The opened engine: its stores and how to close it. */
interface Engine {
  name: 'sqlite' | 'postgres';
  stores: Stores;
  /** The in-memory limiter (SQLite), which the primary of WORKERS shares with its workers. */
  memoryLimiter: Limiter | null;
  /** The writer thread of a SQLite file, which every worker of WORKERS writes through too. */
  writer: WriterHost | null;
  /** Resolves, with one line saying why, if the engine's writer fails (the server then stops). */
  failed: Promise<string>;
  /** The key `ensureDevelopmentKey` created, to be shown once. */
  developmentKey: string | null;
  /** How a SQLite file is written (`WRITER`, as `auto` resolved it), for the listening line. */
  fields: { writer?: 'inline' | 'thread' };
  close(): Promise<void>;
}

async function openEngine(config: Config, logger: Logger): Promise<Engine> {
  const options = { appEnv: config.appEnv, clock: systemClock, banThreshold: config.rateLimitBanThreshold, banSeconds: config.rateLimitBanSeconds };
  if (config.databaseUrl === null) {
    // The first connection migrates the file and makes the development key; then the writer
    // starts: inline on that connection (one core), or a thread, for which it then only reads.
    const { engine, seeded: developmentKey } = await openSqliteEngine({
      path: config.databasePath, writer: config.writer, threadEntry: new URL('./writer.ts', import.meta.url), log: (fields) => logger.event(fields), ownFolder: config.databasePathIsDefault, stores: options,
    }, (db) => ensureDevelopmentKey(createKeysStore(db, { appEnv: config.appEnv }), config.appEnv, systemClock()));
    return {
      name: 'sqlite', stores: engine.stores, memoryLimiter: engine.limiter, writer: engine.kind === 'thread' ? engine.writer : null,
      failed: engine.failed, developmentKey, close: engine.close, fields: engine.kind === 'memory' ? {} : { writer: engine.kind },
    };
  }
  // The PostgreSQL modules are loaded only here, when DATABASE_URL is set: loaded by every start,
  // with the metrics modules they cost a SQLite start about 13 ms of CPU.
  const [{ DriverMissingError, isDroppedTypesQuery, isWriteAfterClose }, { postgresPools, migratePostgres }, { openStores }, { watchAvailability }, { DatabaseStartError, contactedPool, startFailure, unusableDatabaseLine }] = await Promise.all([
    import('./storage/postgres/driver.ts'), import('./storage/postgres/database.ts'), import('./storage/postgres/stores.ts'),
    import('./storage/postgres/availability.ts'), import('./storage/postgres/first-contact.ts'),
  ]);
  droppedByDriver = isDroppedTypesQuery;
  lostByDriver = isWriteAfterClose;
  try {
    const open = await postgresPools(config.databaseUrl, { poolSize: config.databasePoolSize, transactionPooler: config.databasePooler === 'transaction' });
    // For a list of hosts, on the one that is the primary (first-contact.ts).
    const { pool: initial, server } = await contactedPool(open, config.databaseUrl);
    await migratePostgres(initial).catch((error: unknown) => {
      throw startFailure(error);
    });
    // From now on a PostgreSQL that cannot be reached is 503 at once, and recovered from at once.
    const availability = watchAvailability({
      open,
      initial,
      server,
      probe: open.probe,
      changed: (up, reason) => logger.event(up ? { level: 'info', event: 'database_reachable' } : { level: 'error', event: 'database_unreachable', reason }),
    });
    const stores = openStores(availability.sql, { ...options, availability });
    return {
      name: 'postgres',
      stores,
      memoryLimiter: null,
      writer: null,
      fields: {},
      failed: new Promise<string>(() => {}),
      developmentKey: await ensureDevelopmentKey(stores.keys, config.appEnv, systemClock()),
      close: () => availability.end({ timeout: 5 }),
    };
  } catch (error) {
    if (error instanceof DriverMissingError) fail(error.message);
    if (error instanceof DatabaseStartError) fail(unusableDatabaseLine(config.databaseUrl, error));
    throw error;
  }
}

/**
 * Metrics are counted only when someone can read them: without METRICS_PORT nothing is observed,
 * and their modules are not even loaded. `gather` sums the worker threads' counts (WORKERS).
 */
async function startMetrics(logger: Logger, gather: (() => Promise<WorkerCounts[]>) | null) {
  const [{ startProcessProbe }, metricsModule, { createMetricsApp }] = await Promise.all([
    import('./ops/process-probe.ts'), import('./ops/metrics.ts'), import('./ops/metrics-app.ts'),
  ]);
  const { createMetrics, mergeCounts, renderCounts, requestCount, worstDelay } = metricsModule;
  const probe = startProcessProbe();
  const metrics = createMetrics(probe);
  const render = gather === null ? () => metrics.render() : async () => {
    const answers = await gather();
    // Resident memory and CPU time are the whole process's; the event-loop delay is the workers'.
    const process = { ...probe, eventLoopDelay: () => worstDelay(answers.map((answer) => answer.eventLoopDelay)) };
    const total = mergeCounts([metrics.counts(), ...answers.map((answer) => answer.counts)]);
    return renderCounts(total, process, answers.map((answer) => requestCount(answer.counts)));
  };
  return { probe, metrics, app: createMetricsApp({ metrics: { render }, log: (fields) => logger.event(fields) }) };
}

/** What serves the API: this thread's own server, or the primary's worker threads. */
interface Serving {
  start(): Promise<AddressInfo>;
  drain(): Promise<void>;
  /** Resolves with one line once the serving fails for good (a worker thread died). */
  failed: Promise<string>;
  gatherCounts: (() => Promise<WorkerCounts[]>) | null;
  /** Fields of the `listening` line beyond the common ones. */
  fields: Record<string, unknown>;
}

async function createServing(config: Config, engine: Engine, logger: Logger, observer: () => Parameters<typeof createService>[0]['observer']): Promise<Serving> {
  if (config.workers > 1) {
    const { createPrimary } = await import('./cluster/primary.ts');
    const primary = createPrimary({ config, limiter: engine.memoryLimiter!, entry: new URL(import.meta.url), writer: engine.writer! });
    return { ...primary, gatherCounts: primary.gatherCounts, fields: { workers: config.workers } };
  }
  let service: ReturnType<typeof createService> | null = null;
  return {
    async start() {
      service = createService({ stores: engine.stores, config, clock: systemClock, logger, observer: observer() });
      return listen(service.server, { port: config.port, host: config.host }).catch((error: Error & { code?: string }) => {
        throw new Error(listenFailure(config.host, config.port, error.code ?? error.name));
      });
    },
    drain: () => (service === null ? Promise.resolve() : drainServer(service.app, service.server)),
    failed: new Promise(() => {}),
    gatherCounts: null,
    fields: {},
  };
}

/**
 * The single process, or the primary of WORKERS above 1: start in order (signals, engine, key,
 * chores, metrics, the API), then wait for a signal. About a screen, kept whole so that the order
 * of the start reads top to bottom.
 */
async function runProcess(config: Config): Promise<void> {
  // Worker threads write their own lines straight to fd 1, so the primary does too (whole lines).
  const write = config.workers > 1 ? fdWriter(1, LOG_BUFFER_BYTES, systemClock) : boundedWriter(process.stdout, LOG_BUFFER_BYTES, systemClock);
  const logger = createLogger({ level: config.logLevel, clock: systemClock, write });
  for (const warning of configWarnings(config, process.env)) logger.event({ level: 'warn', ...warning });
  // A crash must not print its message (it may carry input or SQL): log its name and frames and stop.
  const crash = (error: unknown) => {
    logger.event({ level: 'error', event: 'crash', ...errorFields(error) });
    logger.flush();
    process.exit(1);
  };
  process.on('uncaughtException', (error) => {
    if (!lostByDriver(error)) crash(error);
    else logger.event({ level: 'error', event: 'database_connection_lost', ...errorFields(error) });
  });
  process.on('unhandledRejection', (reason) => {
    if (!droppedByDriver(reason)) crash(reason);
  });

  // Handled from the start: before a handler is installed, a signal would kill the process at once.
  const stop = Promise.withResolvers<string>();
  process.on('SIGTERM', () => stop.resolve('SIGTERM'));
  process.on('SIGINT', () => stop.resolve('SIGINT'));
  const stopRequested = stop.promise;

  const engine = await openEngine(config, logger);
  const { developmentKey } = engine;
  if (developmentKey) process.stderr.write(`Created a free development API key; it is shown only this once:\n\n  ${developmentKey}\n\n`);

  let observed: Awaited<ReturnType<typeof startMetrics>> | null = null;
  const serving = await createServing(config, engine, logger, () => observed?.metrics);
  if (config.metricsPort !== null) observed = await startMetrics(logger, serving.gatherCounts);
  const chores = startChores({
    upkeep: engine.stores.upkeep,
    clock: systemClock,
    failed: (event, error) => {
      observed?.metrics.databaseError();
      logger.event({ level: 'error', event, ...errorFields(error) });
    },
    expired: (count) => {
      observed?.metrics.ordersExpired(count);
      // Each hold the sweep ends cancels its order and frees its pet, which the open order kept pending.
      observed?.metrics.eventsCounted('order.cancelled', count);
      observed?.metrics.eventsCounted('pet.updated', count);
    },
    retentionDays: config.eventsRetentionDays,
  });
  // Webhook deliveries: here, as the chores, in the single process or the primary of WORKERS; on
  // PostgreSQL in every instance, their claims keeping them apart.
  const deliveries = startDeliveryWorker({
    store: engine.stores.webhooks,
    clock: systemClock,
    allowedNetworks: config.webhookAllowedNetworks,
    schedule: config.webhookRetrySchedule,
    observer: () => observed?.metrics,
    log: (fields) => logger.event(fields),
    failed: (event, error) => {
      observed?.metrics.databaseError();
      logger.event({ level: 'error', event, ...errorFields(error) });
    },
    crashed: (event, error) => logger.event({ level: 'error', event, ...errorFields(error) }),
  });
  // A worker or the writer thread that dies stops the process, once the limiter is saved (or,
  // without a writer, has failed to be).
  void Promise.race([serving.failed, engine.failed]).then(async (line) => {
    process.stderr.write(`${line}\n`);
    await deliveries.stop();
    await chores.stop();
    logger.flush();
    process.exit(1);
  });

  // The metrics listener (if any) is up before the API's: once "listening" is logged, both are.
  // Always checked: a DNS-rebinding page in a browser on this network could otherwise read /metrics.
  const metricsServer = observed === null ? null : createHttpServer(observed.app, logger, { hostCheck: allowedHosts(config.allowedHosts ?? []) });
  if (metricsServer !== null) {
    const bound = await listen(metricsServer, { port: config.metricsPort!, host: config.host }).catch((error: Error & { code?: string }) =>
      fail(listenFailure(config.host, config.metricsPort!, error.code ?? error.name)));
    logger.event({ level: 'info', event: 'metrics_listening', url: urlOf(bound) });
  }
  const bound = await serving.start().catch(async (error: Error) => {
    await deliveries.stop();
    await chores.stop();
    return fail(error.message);
  });
  logger.event({
    level: 'info', event: 'listening', url: urlOf(bound), appEnv: config.appEnv, database: engine.name,
    // Which database: a mistyped variable name would otherwise go unnoticed (the default is used).
    ...(config.databaseUrl === null ? { databasePath: config.databasePath } : { databaseUrl: withoutPassword(config.databaseUrl) }),
    ...engine.fields,
    ...serving.fields,
    // The compile cache's folder, or null when it is off (src/start.js): a start without it is slower.
    compileCache: getCompileCacheDir() ?? null,
  });
  logger.flush();

  // A signal during the start is acted on once the start is done.
  await shutdown(await stopRequested, { logger, engine, serving, chores, deliveries, metrics: observed && metricsServer && { ...observed, server: metricsServer } });
  process.exit(0);
}

/**
 * SIGTERM/SIGINT: stop accepting, finish the requests in flight (at most SHUTDOWN_GRACE_MS), finish
 * the delivery attempts running (each within its 10 s) and give back the claims not started, let
 * the chores running finish their chunk, save the limiter, close the database.
 */
async function shutdown(signal: string, { logger, engine, serving, chores, deliveries, metrics }: {
  logger: Logger; engine: Engine; serving: Serving; chores: Chores; deliveries: DeliveryWorker;
  metrics: { app: App; server: Server; probe: { stop(): void } } | null;
}): Promise<void> {
  logger.event({ level: 'info', event: 'shutting_down', signal });
  // A scrape is answered at once (or waits on workers that are stopping): close its listener now.
  if (metrics !== null) {
    void drainServer(metrics.app, metrics.server, 0);
    metrics.probe.stop();
  }
  await Promise.all([serving.drain(), deliveries.stop()]);
  await chores.stop();
  logger.event({ level: 'info', event: 'stopped' });
  logger.flush();
  await engine.close();
}

/**
 * A worker thread of the primary: its own connection to the file, which only reads, and its own
 * port to the writer thread; served until told to drain.
 */
async function runWorkerThread({ config, start, writer }: { config: Config; start: WorkerStart; writer: WorkerWriter }, channel: MessagePort): Promise<void> {
  const { runWorker } = await import('./cluster/worker.ts');
  const logger = createLogger({ level: config.logLevel, clock: systemClock, write: fdWriter(1, LOG_BUFFER_BYTES, systemClock) });
  // The primary opened (and migrated) the file, and warned about its modes, before any worker.
  const db = openReaderDatabase(config.databasePath);
  const { createWriterClient } = await loadWriterThreadHost();
  const client = createWriterClient(writer.port);
  await runWorker({
    config, start, channel, db, writer: { submit: client.submit, memory: writer.memory }, clock: systemClock, logger,
    close: () => {
      closeDatabase(db);
      client.close();
    },
  });
}

if (isMainThread) await runProcess(readConfig());
else await runWorkerThread(workerData as { config: Config; start: WorkerStart; writer: WorkerWriter }, parentPort!);
