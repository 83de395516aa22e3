/**
 * A real server on port 0 over an in-memory database, with a fake clock and captured logs, for
 * HTTP tests with fetch. Every response of the suite goes through `request`, so checks that
 * apply to all of them live in one place: each is checked against the served OpenAPI document.
 */
import type { TestContext } from 'node:test';
import type { AddressInfo } from 'node:net';
import type { DatabaseSync } from 'node:sqlite';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BroadcastChannel } from 'node:worker_threads';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { openSqliteEngine } from '../../src/storage/sqlite/engine.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import type { ReaderStores } from '../../src/storage/sqlite/stores.ts';
import type { WriterClient, WriterHost } from '../../src/storage/sqlite/writer.ts';
import { createLogger } from '../../src/http/access-log.ts';
import { createService, type Service, type ServiceConfig, type ServiceDeps } from '../../src/service/service.ts';
import { openStores as openSqliteStores, type SqliteStores } from '../../src/storage/sqlite/stores.ts';
import { openStores as openPostgresStores, type PostgresStores } from '../../src/storage/postgres/stores.ts';
import type { Stores } from '../../src/storage/stores.ts';
import type { Logger } from '../../src/http/access-log.ts';
import type { PostgresSql } from '../../src/storage/postgres/driver.ts';
import { conformanceChecker } from './openapi-conformance.ts';
import type { ServerOptions } from '../../src/http/server.ts';

export interface FakeClock {
  (): number;
  now: number;
  advance(ms: number): void;
}

/** A clock that only moves when told. */
export function fakeClock(start = Date.UTC(2026, 0, 1)): FakeClock {
  const clock = (() => clock.now) as FakeClock;
  clock.now = start;
  clock.advance = (ms) => {
    clock.now += ms;
  };
  return clock;
}

export interface TestServer {
  url: string;
  db: DatabaseSync;
  clock: FakeClock;
  service: Service<SqliteStores>;
  /** A key with limits too high to interfere (the default for `request`), and its id. */
  key: string;
  keyId: string;
  /** A key on the free plan (60/min, 1000/day), and its id. */
  freeKey: string;
  freeKeyId: string;
  /** Every line the server logged. */
  logs: string[];
  /** fetch against the server; sends `key` unless `key` is given (null: no Authorization). */
  request(path: string, init?: RequestInit & { key?: string | null }): Promise<Response>;
  /** POST a JSON body (a string is sent as is). */
  post(path: string, body: unknown, init?: RequestInit & { key?: string | null }): Promise<Response>;
  /** Stops the server (also done when the test ends); the database stays open. */
  close(): Promise<void>;
}

export interface TestServerOptions {
  clock?: FakeClock;
  /**
   * Serve as the server does on a file: a temporary database whose writes the writer thread makes
   * (test/support/writer-thread.ts), read on a connection of this thread. See startWriterTestServer.
   */
  writerThread?: boolean;
  /**
   * Serve as the server does on a file with one core: a temporary database written inline on the
   * connection that reads it (storage/sqlite/writer/inline.ts). See startInlineTestServer.
   */
  inlineWriter?: boolean;
  /** An open database to use (and leave open); default a fresh `:memory:` one. */
  db?: DatabaseSync;
  config?: Partial<ServiceConfig>;
  overrides?: ServiceDeps['overrides'];
  maxAnonymousCallers?: number;
  /** Smaller timeouts and caps for socket tests; default the contract's. */
  server?: ServerOptions;
  /** Told of answers, refusals and creates (the metrics). */
  observer?: ServiceDeps['observer'];
  /** The event streams' caps and intervals. */
  streams?: ServiceDeps['streams'];
  /** Resolves webhook URLs' hosts (a test maps its own names); default the system's. */
  resolver?: ServiceDeps['resolver'];
}

/** Starts the real service on 127.0.0.1 port 0 and closes it when the test ends. */
export async function startTestServer(t: TestContext, options: TestServerOptions = {}): Promise<TestServer> {
  if (options.writerThread) return startWriterTestServer(t, options) as unknown as Promise<TestServer>;
  if (options.inlineWriter) return startInlineTestServer(t, options);
  const db = options.db ?? openDatabase(':memory:');
  const clock = options.clock ?? fakeClock();
  const { logger, logs } = captureLogs(clock);
  const config = testConfig(options);
  const service = serviceOver(openSqliteStores(db, storesOptions(config, clock, options)), config, clock, logger, options);
  const served = await serve(t, service, clock, logger, logs);
  // After the server has closed (hooks run in the order they were added).
  t.after(() => {
    if (!options.db) db.close();
  });
  return { ...served, db, service };
}

/** A test server whose writes go through the writer thread (`writerThread: true`). */
export type WriterTestServer = Omit<TestServer, 'service'> & {
  service: Service<ReaderStores>;
  path: string;
  writer: WriterHost;
  /** Runs `sql` on the writer thread's own connection (to fault it); resolves once it ran. */
  writerExec(sql: string): Promise<void>;
  /** Holds the writer thread busy, as a long commit would; resolves, once it is held, with the way to let go. */
  pauseWriter(): Promise<() => void>;
};

/** Asks the writer thread of test/support/writer-thread.ts, through its BroadcastChannel, and waits for its answer. */
function askWriter(path: string, message: object, answered: (data: { done?: string; paused?: boolean }) => boolean): Promise<void> {
  return new Promise((resolve) => {
    const channel = new BroadcastChannel(`writer-faults:${path}`);
    channel.onmessage = (event) => {
      if (!answered((event as { data: { done?: string; paused?: boolean } }).data)) return;
      channel.close();
      resolve();
    };
    channel.postMessage(message);
  });
}

/**
 * Resolves once the writer thread answers a write (one that deletes nothing): its module has
 * loaded, so its BroadcastChannel exists (a message posted before that is lost).
 */
export async function writerReady(client: Pick<WriterClient, 'submit'>): Promise<void> {
  await client.submit('purgeRecords', [{ now: 0, limit: 0 }]);
}

/** Runs statements on the writer thread's connection (test/support/writer-thread.ts). */
export function writerFaults(path: string): (sql: string) => Promise<void> {
  return (sql) => askWriter(path, { sql }, (data) => data.done === sql);
}

/** Holds the writer thread of test/support/writer-thread.ts; resolves with the way to let it go. */
export function writerPause(path: string): () => Promise<() => void> {
  return async () => {
    const pause = new SharedArrayBuffer(4);
    await askWriter(path, { pause }, (data) => data.paused === true);
    return () => {
      Atomics.store(new Int32Array(pause), 0, 1);
      Atomics.notify(new Int32Array(pause), 0);
    };
  };
}

/** The entry of the writer threads that tests start (test/support/writer-thread.ts). */
export const TEST_WRITER_ENTRY = new URL('./writer-thread.ts', import.meta.url);

/**
 * The service as it runs on a file: a temporary database, migrated and given the two keys by a
 * first connection that then only reads, and a writer thread for every write. `server.db` is that
 * reading connection.
 */
export async function startWriterTestServer(t: TestContext, options: Omit<TestServerOptions, 'db' | 'writerThread'> = {}): Promise<WriterTestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'pets-writer-'));
  const path = join(dir, 'pets.db');
  const clock = options.clock ?? fakeClock();
  const config = testConfig(options);
  // Opened as the server opens its file (storage/sqlite/engine.ts), with the thread of this folder.
  const { engine, seeded: issued } = await openSqliteEngine({
    path, writer: 'thread', threadEntry: TEST_WRITER_ENTRY, log: () => {}, stores: storesOptions(config, clock, options),
  }, (db) => testKeys(createKeysStore(db, { appEnv: 'development' }), clock));
  if (engine.kind !== 'thread') throw new Error('a writer thread was asked for');
  const cleanUp = async () => {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  };
  // Once the writer answers a write (one that deletes nothing), its module has loaded, so its
  // BroadcastChannel exists (a message posted before that is lost).
  await engine.stores.upkeep.purgeExpiredRecords(0, 0);
  const { logger, logs } = captureLogs(clock);
  const service = serviceOver(engine.stores, config, clock, logger, options);
  const served = await serve(t, service, clock, logger, logs, Promise.resolve(issued)).catch(async (error: unknown) => {
    await cleanUp();
    throw error;
  });
  // After the server has closed (hooks run in the order they were added).
  t.after(cleanUp);
  return { ...served, db: engine.db, service, path, writer: engine.writer, writerExec: writerFaults(path), pauseWriter: writerPause(path) };
}

/**
 * The service as it runs on a file with one core: a temporary database, migrated and given the
 * two keys, whose connection writes inline (`inlineWriter: true`). `server.db` is that connection,
 * `server.path` its file.
 */
export async function startInlineTestServer(t: TestContext, options: Omit<TestServerOptions, 'db' | 'writerThread' | 'inlineWriter'> = {}): Promise<TestServer & { path: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'pets-inline-'));
  const path = join(dir, 'pets.db');
  const clock = options.clock ?? fakeClock();
  const config = testConfig(options);
  const { engine, seeded: issued } = await openSqliteEngine({
    path, writer: 'inline', threadEntry: TEST_WRITER_ENTRY, log: () => {}, stores: storesOptions(config, clock, options),
  }, (db) => testKeys(createKeysStore(db, { appEnv: 'development' }), clock));
  const cleanUp = async () => {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  };
  const { logger, logs } = captureLogs(clock);
  const service = serviceOver(engine.stores, config, clock, logger, options);
  const served = await serve(t, service, clock, logger, logs, Promise.resolve(issued)).catch(async (error: unknown) => {
    await cleanUp();
    throw error;
  });
  // After the server has closed (hooks run in the order they were added).
  t.after(cleanUp);
  return { ...served, db: engine.db, service: service as unknown as TestServer['service'], path };
}

/** A test server on PostgreSQL: the same service, over a pool on a migrated database. */
export type PostgresTestServer = Omit<TestServer, 'db' | 'service'> & { service: Service<PostgresStores> };

/** Starts the PostgreSQL service over `sql` (migrated; left open) on port 0. */
export async function startPostgresTestServer(t: TestContext, sql: PostgresSql, options: Pick<TestServerOptions, 'clock' | 'config' | 'server' | 'streams' | 'observer' | 'resolver'> = {}): Promise<PostgresTestServer> {
  const clock = options.clock ?? fakeClock();
  const { logger, logs } = captureLogs(clock);
  const config = testConfig(options);
  const stores = openPostgresStores(sql, { appEnv: config.appEnv, clock, banThreshold: config.rateLimitBanThreshold, banSeconds: config.rateLimitBanSeconds });
  const service = serviceOver(stores, config, clock, logger, options);
  return { ...(await serve(t, service, clock, logger, logs)), service };
}

/** The SQLite stores' options for a test's config. */
function storesOptions(config: ServiceConfig, clock: FakeClock, options: Pick<TestServerOptions, 'maxAnonymousCallers'>) {
  return {
    appEnv: config.appEnv, clock, banThreshold: config.rateLimitBanThreshold, banSeconds: config.rateLimitBanSeconds,
    ...(options.maxAnonymousCallers !== undefined ? { maxAnonymousCallers: options.maxAnonymousCallers } : {}),
  };
}

/** The service over `stores`, with a test's overrides, server options and observer. */
function serviceOver<S extends Stores>(stores: S, config: ServiceConfig, clock: FakeClock, logger: Logger, options: TestServerOptions): Service<S> {
  return createService({
    stores, config, clock, logger,
    ...(options.overrides ? { overrides: options.overrides } : {}),
    ...(options.server ? { server: options.server } : {}),
    ...(options.resolver ? { resolver: options.resolver } : {}),
    observer: options.observer,
    ...(options.streams ? { streams: options.streams } : {}),
  });
}

function captureLogs(clock: FakeClock): { logger: Logger; logs: string[] } {
  const logs: string[] = [];
  return { logs, logger: createLogger({ level: 'debug', clock, write: (text) => logs.push(...text.trimEnd().split('\n')) }) };
}

function testConfig(options: Pick<TestServerOptions, 'config'>): ServiceConfig {
  return {
    appEnv: 'development', trustProxy: false, rateLimitBanThreshold: 30, rateLimitBanSeconds: 900, publicBaseUrl: null, stagingBaseUrl: null,
    corsAllowedOrigins: null,
    ...options.config,
  };
}

/** The two test keys: one whose limits never bind, one on the free plan. */
async function testKeys(keys: Pick<Stores['keys'], 'create'>, clock: FakeClock) {
  return {
    roomy: await keys.create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 100_000_000, label: 'tests', now: clock() }),
    free: await keys.create({ plan: 'free', label: 'free', now: clock() }),
  };
}

/** Creates the two test keys (unless made already), listens, and builds the request helpers (either engine). */
async function serve(t: TestContext, service: Service<Stores>, clock: FakeClock, logger: Logger, logs: string[], keys = testKeys(service.stores.keys, clock)) {
  const { roomy, free } = await keys;
  const { server } = service;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    logger.flush();
  };
  t.after(close);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // Every response is checked against the OpenAPI document this server serves.
  const conformance = conformanceChecker(await service.openapi());
  const request = async (path: string, init: RequestInit & { key?: string | null } = {}) => {
    const { key = roomy.key, ...rest } = init;
    const headers = new Headers(rest.headers);
    if (key !== null && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
    const response = await fetch(url + path, { ...rest, headers });
    await conformance.check({ method: rest.method ?? 'GET', url: url + path }, response.clone());
    return response;
  };
  const post = (path: string, body: unknown, init: RequestInit & { key?: string | null } = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has('content-type')) headers.set('content-type', 'application/json');
    return request(path, { ...init, method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  };
  return {
    url, clock, logs, request, post, close,
    key: roomy.key, keyId: roomy.record.id, freeKey: free.key, freeKeyId: free.record.id,
  };
}

/** A pet's row as stored, with categoryId as text (its exact digits) and its version. */
export interface StoredPet {
  id: number;
  name: string;
  categoryId: string;
  status: string;
  version: number;
}

/** The pet's row in the server's database, or undefined when there is none. */
export function storedPet(server: Pick<TestServer, 'db'>, id: number): StoredPet | undefined {
  const row = server.db.prepare('SELECT id, name, CAST(category_id AS TEXT) AS categoryId, status, version FROM pets WHERE id = ?').get(id);
  return row ? ({ ...row } as unknown as StoredPet) : undefined;
}

/** Reads an Error body and checks its shape: exactly code, message, status. */
export async function errorBody(response: Response): Promise<{ code: string; message: string; status: number }> {
  const body = (await response.json()) as { code: string; message: string; status: number };
  if (Object.keys(body).join() !== 'code,message,status' || body.status !== response.status) {
    throw new Error(`not an Error body for ${response.status}: ${JSON.stringify(body)}`);
  }
  return body;
}

/** A response body as JSON, typed loosely for assertions. */
export function json(response: Response): Promise<any> {
  return response.json();
}
