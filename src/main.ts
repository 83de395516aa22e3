/**
 * The only impure edge: reads the environment, opens the database (a SQLite file, or PostgreSQL
 * when DATABASE_URL is set), listens, handles signals. Everything it wires together takes its
 * dependencies as arguments.
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import type { AddressInfo } from 'node:net';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { openDatabase } from './storage/sqlite/database.ts';
import { systemClock } from './clock.ts';
import { boundedWriter, createLogger } from './http/access-log.ts';
import { ensureDevelopmentKey } from './storage/keys.ts';
import { LIMITER_FLUSH_INTERVAL_MS } from './storage/sqlite/limiter-store.ts';
import { IDEMPOTENCY_PURGE_INTERVAL_MS } from './api/pet-creations.ts';
import { createPostgresService, createService, type BaseService } from './service.ts';
import { errorName } from './http/error-mapper.ts';
import { DriverMissingError } from './storage/postgres/driver.ts';
import { connectPostgres, migratePostgres } from './storage/postgres/database.ts';
import { DatabaseUnavailableError } from './storage/unavailable.ts';

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
// At most 1 MiB of log text waits for a slow reader; beyond that lines are dropped and counted.
const logger = createLogger({ level: config.logLevel, clock: systemClock, write: boundedWriter(process.stdout, 1024 * 1024, systemClock) });

// A crash must not print a stack (it may carry input or SQL): log the error's name and stop.
process.on('uncaughtException', (error) => {
  logger.event({ level: 'error', event: 'crash', error: errorName(error) });
  logger.flush();
  process.exit(1);
});

/** A failure to start: one line on stderr, exit 1. */
function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

/** The service over the configured engine, and what stopping it must do. */
async function open(): Promise<{ service: BaseService; saveLimiterState(): void; close(): Promise<void> }> {
  if (config.databaseUrl === null) {
    if (config.databasePath !== ':memory:') mkdirSync(dirname(config.databasePath), { recursive: true });
    // node:sqlite is synchronous: waiting on another process's write lock blocks every request, so
    // the server waits briefly and answers 503 rather than freezing (the keys command's writes take ms).
    const db = openDatabase(config.databasePath, { busyTimeoutMs: 250 });
    const service = createService({ config, db, clock: systemClock, logger });
    return {
      service,
      // Limiter state lives in memory and is saved every second (the contract allows 5 s of lag),
      // so no request waits on a database write; a restart resumes from the last save.
      saveLimiterState: () => service.limiterPersistence.flush(),
      close: async () => db.close(),
    };
  }
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
  return { service: createPostgresService({ config, sql, clock: systemClock, logger }), saveLimiterState: () => {}, close: () => sql.end({ timeout: 5 }) };
}

const engine = await open();
const { app, server, keys, petCreations } = engine.service;
const developmentKey = await ensureDevelopmentKey(keys, config.appEnv, systemClock());
if (developmentKey) {
  process.stderr.write(`Created a free development API key; it is shown only this once:\n\n  ${developmentKey}\n\n`);
}

const saveLimiterState = () => {
  try {
    engine.saveLimiterState();
  } catch (error) {
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
    logger.event({ level: 'error', event: 'idempotency_purge_failed', error: errorName(error) });
  });
  engine.service.purgeIdle().catch((error: unknown) => {
    logger.event({ level: 'error', event: 'limiter_purge_failed', error: errorName(error) });
  });
};
const purgeTimer = setInterval(purge, IDEMPOTENCY_PURGE_INTERVAL_MS);
purgeTimer.unref();
setImmediate(purge);

server.on('error', (error: Error & { code?: string }) => {
  process.stderr.write(`cannot listen on ${config.host}:${config.port}: ${error.code ?? error.name}\n`);
  process.exit(1);
});
server.listen(config.port, config.host, () => {
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  logger.event({ level: 'info', event: 'listening', url: `http://${host}:${port}`, appEnv: config.appEnv, database: config.databaseUrl === null ? 'sqlite' : 'postgres' });
  logger.flush();
});

let stopping = false;
function shutdown(signal: string): void {
  if (stopping) return;
  stopping = true;
  logger.event({ level: 'info', event: 'shutting_down', signal });
  app.drain();
  server.close(() => void finish());
  server.closeIdleConnections();
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
