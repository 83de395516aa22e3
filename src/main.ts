/**
 * The only impure edge: reads the environment, opens the database (a SQLite file, or PostgreSQL
 * when DATABASE_URL is set), listens, handles signals. Everything it wires together takes its
 * dependencies as arguments.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { getCompileCacheDir } from 'node:module';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { closeDatabase, openServerDatabase } from './storage/sqlite/database.ts';
import { systemClock } from './clock.ts';
import { boundedWriter, createLogger } from './http/access-log.ts';
import { ensureDevelopmentKey } from './storage/keys.ts';
import { LIMITER_FLUSH_INTERVAL_MS } from './storage/sqlite/limiter-store.ts';
import { IDEMPOTENCY_PURGE_INTERVAL_MS } from './api/pets/creations.ts';
import { createService, type BaseService } from './service/service.ts';
import { errorName } from './pipeline/errors.ts';
import { createHttpServer } from './http/server.ts';
import { DatabaseUnavailableError } from './storage/errors.ts';

/** How long in-flight requests may take to finish after SIGTERM/SIGINT. */
const SHUTDOWN_GRACE_MS = 10_000;

function readConfig(): Config {
  try {
    return loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
}

const config = readConfig();
// WORKERS above 1: this thread becomes the primary of that many HTTP worker threads
// (src/cluster/primary.ts), and the single-process code below never runs.
if (config.workers > 1) {
  const { runPrimary } = await import('./cluster/primary.ts');
  process.exit(await runPrimary(config));
}
// At most 1 MiB of log text waits for a slow reader; beyond that lines are dropped and counted.
const logger = createLogger({ level: config.logLevel, clock: systemClock, write: boundedWriter(process.stdout, 1024 * 1024, systemClock) });

// A crash must not print a stack (it may carry input or SQL): log the error's name and stop.
process.on('uncaughtException', (error) => {
  logger.event({ level: 'error', event: 'crash', error: errorName(error) });
  logger.flush();
  process.exit(1);
});

/** The process probe, the metrics and the app of their listener. */
async function startMetrics() {
  const [{ startProcessProbe }, { createMetrics }, { createMetricsApp }] = await Promise.all([
    import('./ops/process-probe.ts'), import('./ops/metrics.ts'), import('./ops/metrics-app.ts'),
  ]);
  const processProbe = startProcessProbe();
  const metrics = createMetrics(processProbe);
  return { processProbe, metrics, app: createMetricsApp({ metrics, log: (fields) => logger.event(fields) }) };
}

// Metrics are counted only when someone can read them: without METRICS_PORT nothing is observed,
// and their modules are not even loaded (with the PostgreSQL ones, loaded by every start, they
// cost about 13 ms of CPU; issue #12).
const observed = config.metricsPort === null ? null : await startMetrics();
const metrics = observed?.metrics ?? null;

/** A failure to start: one line on stderr, exit 1. */
function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

/** The service over the configured engine, and what stopping it must do. */
async function open(): Promise<{ service: BaseService; saveLimiterState(): void; close(): Promise<void> }> {
  if (config.databaseUrl === null) {
    const db = openServerDatabase(config.databasePath, (fields) => logger.event(fields));
    const service = createService({ config, db, clock: systemClock, logger, observer: metrics ?? undefined });
    return {
      service,
      // Limiter state lives in memory and is saved every second (the contract allows 5 s of lag),
      // so no request waits on a database write; a restart resumes from the last save.
      saveLimiterState: () => service.limiterPersistence.flush(),
      close: async () => closeDatabase(db),
    };
  }
  // The PostgreSQL modules are loaded only here, when DATABASE_URL is set: loaded by every start,
  // with the metrics modules (below) they cost a SQLite start about 13 ms of CPU (issue #12).
  const [{ DriverMissingError }, { connectPostgres, migratePostgres }, { createPostgresService }] = await Promise.all([
    import('./storage/postgres/driver.ts'), import('./storage/postgres/database.ts'), import('./service/postgres-service.ts'),
  ]);
  let sql;
  try {
    sql = await connectPostgres(config.databaseUrl, { poolSize: config.databasePoolSize });
    await migratePostgres(sql);
  } catch (error) {
    if (error instanceof DriverMissingError) fail(error.message);
    if (error instanceof DatabaseUnavailableError) fail(`cannot reach the PostgreSQL database of DATABASE_URL (${error.reason})`);
    throw error;
  }
  // On PostgreSQL every token is taken in the database: there is no limiter state to save.
  const service = createPostgresService({ config, sql, clock: systemClock, logger, observer: metrics ?? undefined });
  return { service, saveLimiterState: () => {}, close: () => sql.end({ timeout: 5 }) };
}

const engine = await open();
const { app, server, keys, petCreations } = engine.service;
const developmentKey = await ensureDevelopmentKey(keys, config.appEnv, systemClock());
if (developmentKey) {
  process.stderr.write(`Created a free development API key; it is shown only this once:\n\n  ${developmentKey}\n\n`);
}

// Limiter state lives in memory and is saved every second (the contract allows 5 s of lag), so
// no request waits on a database write; a restart resumes from the last save.
const saveLimiterState = () => {
  try {
    engine.saveLimiterState();
  } catch (error) {
    metrics?.databaseError();
    logger.event({ level: 'error', event: 'limiter_save_failed', error: errorName(error) });
  }
};
const limiterTimer = setInterval(saveLimiterState, LIMITER_FLUSH_INTERVAL_MS);
limiterTimer.unref();

// Expired idempotency records are already ignored by lookups; the purge only frees the space,
// a small chunk per transaction so that requests run in between. Once at start, then on a timer.
// On PostgreSQL the same timer purges limiter rows idle for a day.
const purge = () => {
  petCreations.purgeExpired().catch((error: unknown) => {
    metrics?.databaseError();
    logger.event({ level: 'error', event: 'idempotency_purge_failed', error: errorName(error) });
  });
  engine.service.purgeIdle().catch((error: unknown) => {
    metrics?.databaseError();
    logger.event({ level: 'error', event: 'limiter_purge_failed', error: errorName(error) });
  });
};
const purgeTimer = setInterval(purge, IDEMPOTENCY_PURGE_INTERVAL_MS);
purgeTimer.unref();
setImmediate(purge);

/** Listens on HOST:port, logs `event` with the URL, then calls `then`; exits 1 if it cannot. */
function listen(listener: Server, port: number, event: string, then: () => void = () => {}): void {
  listener.on('error', (error: Error & { code?: string }) => {
    process.stderr.write(`cannot listen on ${config.host}:${port}: ${error.code ?? error.name}\n`);
    process.exit(1);
  });
  listener.listen(port, config.host, () => {
    const { address, port: bound } = listener.address() as AddressInfo;
    const host = address.includes(':') ? `[${address}]` : address;
    // The compile cache's folder, or null when it is off (src/start.js): a start without it is slower.
    logger.event({
      level: 'info', event, url: `http://${host}:${bound}`, appEnv: config.appEnv,
      database: config.databaseUrl === null ? 'sqlite' : 'postgres', compileCache: getCompileCacheDir() ?? null,
    });
    logger.flush();
    then();
  });
}

// The metrics listener (if any) is up before the API's: once "listening" is logged, both are.
const metricsApp = observed?.app ?? null;
const metricsServer = metricsApp === null ? null : createHttpServer(metricsApp, logger);
const listenApi = () => listen(server, config.port, 'listening');
if (metricsServer !== null && config.metricsPort !== null) listen(metricsServer, config.metricsPort, 'metrics_listening', listenApi);
else listenApi();

let stopping = false;
function shutdown(signal: string): void {
  if (stopping) return;
  stopping = true;
  logger.event({ level: 'info', event: 'shutting_down', signal });
  app.drain();
  server.close(() => void finish());
  server.closeIdleConnections();
  // A scrape is answered synchronously, so only idle connections can be open: close them all.
  metricsApp?.drain();
  metricsServer?.close();
  metricsServer?.closeAllConnections();
  observed?.processProbe.stop();
  // Requests still running after the grace period are cut so that the process can exit.
  setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
}

async function finish(): Promise<void> {
  clearInterval(limiterTimer);
  clearInterval(purgeTimer);
  saveLimiterState();
  logger.event({ level: 'info', event: 'stopped' });
  logger.flush();
  await engine.close();
  process.exit(0);
}

process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
