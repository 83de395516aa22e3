/**
 * Wires the parts into one service over an open database: keys, limiter, pets, the app and its
 * HTTP server. No environment, no files, no timers, no listening: main.ts does those, and tests
 * call this with `:memory:` (or a test PostgreSQL) and a fake clock.
 *
 * Two engines stand behind the same storage interfaces:
 * - SQLite (`createService`): one process owns the file; the limiter lives in memory and is saved
 *   every second; caches of keys and answers are checked against PRAGMA data_version.
 * - PostgreSQL (`createPostgresService` in postgres-service.ts, a module of its own so that a
 *   SQLite start does not load the PostgreSQL modules): every instance shares the database; the
 *   limiter takes each token in the database, keys are read per request, and nothing about pets
 *   is cached, so what one instance or the keys command committed is seen by the next request
 *   everywhere.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { Server } from 'node:http';
import type { Config } from '../config.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../http/access-log.ts';
import { createKeysStore, type SqliteKeysStore } from '../storage/sqlite/keys-store.ts';
import { createConnectionKeyHasher } from '../keys/api-keys.ts';
import { createLimiter, type Limiter } from '../limits/limiter.ts';
import { createLimiterPersistence, createLimiterStore, type LimiterPersistence } from '../storage/sqlite/limiter-store.ts';
import { createPetsStore, type SqlitePetsStore } from '../storage/sqlite/pets-store.ts';
import { createPetCreations, type CreationsObserver, type PetCreations } from '../api/pets/creations.ts';
import { createPetChanges } from '../api/pets/changes.ts';
import { createApp, type AppDeps, type PipelineObserver, type RateLimiter } from '../pipeline/pipeline.ts';
import type { App } from '../http/server.ts';
import type { Reply } from '../http/reply.ts';
import { createHttpServer, type ServerOptions } from '../http/server.ts';
import { buildOpenApiDocument, serializeOpenApiDocument } from '../api/openapi/document.ts';
import { createCors } from '../http/cors.ts';
import type { KeysStore } from '../storage/keys.ts';
import type { PetsStore } from '../storage/pets.ts';

export type ServiceConfig = Pick<
  Config,
  'appEnv' | 'trustProxy' | 'rateLimitBanThreshold' | 'rateLimitBanSeconds' | 'publicBaseUrl' | 'stagingBaseUrl'
> &
  // Optional so that the service can be built without them (tests, bench). An absent
  // corsAllowedOrigins means unset (no CORS header); an absent maxConnectionsPerAddress, the
  // server's default.
  Partial<Pick<Config, 'corsAllowedOrigins' | 'maxConnectionsPerAddress'>>;

export interface CommonDeps {
  config: ServiceConfig;
  clock: Clock;
  logger: Logger;
  /** Replaces parts of the app's dependencies (tests inject failing stores this way). */
  overrides?: Partial<AppDeps>;
  /** Smaller timeouts and caps for tests; they win over the configuration. */
  server?: ServerOptions;
  /** Group commit of creates and changes; on unless turned off to measure the difference (bench/creates.ts). */
  groupCommit?: boolean;
  /** Told of answers, refusals and creates (the metrics, when METRICS_PORT is set). */
  observer?: PipelineObserver & CreationsObserver;
}

export interface ServiceDeps extends CommonDeps {
  db: DatabaseSync;
  /** Most client addresses the limiter holds (default 100 000); tests make it small to flood it. */
  maxAnonymousCallers?: number;
}

/** What either engine's service offers main.ts and the tests. */
export interface BaseService {
  app: App;
  server: Server;
  keys: KeysStore;
  pets: PetsStore;
  /** The OpenAPI document served at /v1/openapi.json, serialised once. */
  openapi: string;
  /** The create path; main.ts calls its purgeExpired on an interval. */
  petCreations: PetCreations;
  /** Periodic clean-up beside the idempotency purge (PostgreSQL: idle limiter rows). */
  purgeIdle(): Promise<void>;
}

export interface Service extends BaseService {
  keys: SqliteKeysStore;
  pets: SqlitePetsStore;
  limiter: Limiter;
  /** Saves the limiter's changes since the last save (main.ts calls it every second and at exit). */
  limiterPersistence: LimiterPersistence;
}

/** Builds the SQLite service; the limiter's saved state is loaded before the first request. */
export function createService({ db, maxAnonymousCallers, ...common }: ServiceDeps): Service {
  const { config, clock } = common;
  const keys = createKeysStore(db, { appEnv: config.appEnv });
  const pets = createPetsStore(db);
  const limiter = createLimiter({
    clock,
    banThreshold: config.rateLimitBanThreshold,
    banSeconds: config.rateLimitBanSeconds,
    ...(maxAnonymousCallers !== undefined ? { maxAnonymousCallers } : {}),
  });
  const limiterPersistence = createLimiterPersistence({ limiter, store: createLimiterStore(db) });
  limiterPersistence.load();
  const assembled = assemble(common, { keys, pets, limiter });
  return { ...assembled, keys, pets, limiter, limiterPersistence, purgeIdle: async () => {} };
}

export interface WorkerServiceDeps extends CommonDeps {
  /** The worker's own connection to the shared file. */
  db: DatabaseSync;
  /** The port's one limiter, in the primary thread (src/cluster/remote-limiter.ts). */
  limiter: RateLimiter;
}

/**
 * The SQLite service of one worker thread (WORKERS above 1, src/cluster/): its own connection to
 * the file, whose caches drop what another thread's commit may have changed (data_version), and
 * the limiter that the primary thread holds for every worker. The primary saves that limiter.
 */
export function createWorkerService({ db, limiter, ...common }: WorkerServiceDeps): BaseService & { keys: SqliteKeysStore; pets: SqlitePetsStore } {
  const keys = createKeysStore(db, { appEnv: common.config.appEnv });
  const pets = createPetsStore(db);
  return { ...assemble(common, { keys, pets, limiter }), keys, pets, purgeIdle: async () => {} };
}

/** The app and its server over either engine's stores. */
export function assemble(
  { config, clock, logger, overrides = {}, server, groupCommit = true, observer }: CommonDeps,
  { keys, pets, limiter }: { keys: KeysStore; pets: PetsStore; limiter: RateLimiter },
) {
  const document = buildOpenApiDocument({ appEnv: config.appEnv, publicBaseUrl: config.publicBaseUrl, stagingBaseUrl: config.stagingBaseUrl });
  const openapi = serializeOpenApiDocument(document);
  // app.ts serves the operations under /v1 and the document at /v1/openapi.json.
  // GET /docs is rendered on its first request, with its modules loaded then, and kept: one build
  // per process. Built at every start, it cost the start about 20 ms of CPU (issue #12).
  let docsPage: Promise<Reply> | undefined;
  const docs = () => (docsPage ??= import('../api/reference-page/reference-page.ts').then(({ referencePageReply }) =>
    referencePageReply(document, { basePath: '/v1', documentPath: '/v1/openapi.json' })));
  // Over the overriding store when a test injects one, so its faults reach the create path.
  const petCreations = createPetCreations({ pets: overrides.pets ?? pets, clock, groupCommit, observer });
  const changePet = createPetChanges({ pets: overrides.pets ?? pets, groupCommit });
  const cors = createCors(config.corsAllowedOrigins ?? null);
  const keyHashOf = createConnectionKeyHasher(config.appEnv);
  const app = createApp({
    clock,
    logger,
    authenticate: (token, connection) => {
      const keyHash = keyHashOf(token, connection);
      return keyHash === null ? null : keys.findByHash(keyHash, clock());
    },
    limiter,
    pets,
    createPet: petCreations.create,
    changePet,
    trustProxy: config.trustProxy,
    openapi,
    observer,
    docs,
    cors,
    ...overrides,
  });
  // With `*`, even the answers the HTTP server writes before the app runs are readable by a page.
  const rawHeaders = cors !== null && config.corsAllowedOrigins === '*' ? cors.responseHeaders('*') : {};
  return {
    app,
    server: createHttpServer(app, logger, { maxConnectionsPerAddress: config.maxConnectionsPerAddress, ...server, rawHeaders }),
    openapi: overrides.openapi ?? openapi,
    petCreations,
  };
}
