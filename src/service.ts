/**
 * Wires the parts into one service over an open database: keys, limiter (restored from its
 * saved state), pets, the app and its HTTP server. No environment, no files, no timers, no
 * listening: main.ts does those, and tests call this with `:memory:` and a fake clock.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { Server } from 'node:http';
import type { Config } from './config.ts';
import type { Clock } from './clock.ts';
import type { Logger } from './http/access-log.ts';
import { createKeysStore, type KeysStore } from './storage/sqlite/keys-store.ts';
import { createLimiter, type Limiter } from './limits/limiter.ts';
import { createLimiterPersistence, createLimiterStore, type LimiterPersistence } from './storage/sqlite/limiter-store.ts';
import { createPetsStore, type PetsStore } from './storage/sqlite/pets-store.ts';
import { createPetCreations, type CreationsObserver, type PetCreations } from './api/pet-creations.ts';
import { createPetChanges } from './api/pet-changes.ts';
import { createApp, type AppDeps, type PipelineObserver } from './app.ts';
import type { App } from './http/server.ts';
import { createHttpServer, type ServerOptions } from './http/server.ts';
import { buildOpenApiDocument, serializeOpenApiDocument } from './api/openapi.ts';
import { referencePageReply } from './api/docs/reference-page.ts';
import { createCors } from './http/cors.ts';

export type ServiceConfig = Pick<
  Config,
  'appEnv' | 'trustProxy' | 'rateLimitBanThreshold' | 'rateLimitBanSeconds' | 'publicBaseUrl' | 'stagingBaseUrl'
> &
  // Optional so that the service can be built without them (tests, bench). An absent
  // corsAllowedOrigins means unset (no CORS header); an absent maxConnectionsPerAddress, the
  // server's default.
  Partial<Pick<Config, 'corsAllowedOrigins' | 'maxConnectionsPerAddress'>>;

export interface ServiceDeps {
  config: ServiceConfig;
  db: DatabaseSync;
  clock: Clock;
  logger: Logger;
  /** Replaces parts of the app's dependencies (tests inject failing stores this way). */
  overrides?: Partial<AppDeps>;
  /** Smaller timeouts and caps for tests; they win over the configuration. */
  server?: ServerOptions;
  /** Most client addresses the limiter holds (default 100 000); tests make it small to flood it. */
  maxAnonymousCallers?: number;
  /** Group commit of creates and changes; on unless turned off to measure the difference (bench/creates.ts). */
  groupCommit?: boolean;
  /** Told of answers, refusals and creates (the metrics, when METRICS_PORT is set). */
  observer?: PipelineObserver & CreationsObserver;
}

export interface Service {
  app: App;
  server: Server;
  keys: KeysStore;
  pets: PetsStore;
  limiter: Limiter;
  /** Saves the limiter's changes since the last save (main.ts calls it every second and at exit). */
  limiterPersistence: LimiterPersistence;
  /** The OpenAPI document served at /v1/openapi.json, serialised once. */
  openapi: string;
  /** The create path; main.ts calls its purgeExpired on an interval. */
  petCreations: PetCreations;
}

/** Builds the service; the limiter's saved state is loaded before the first request. */
export function createService({ config, db, clock, logger, overrides = {}, server, maxAnonymousCallers, groupCommit = true, observer }: ServiceDeps): Service {
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
  const document = buildOpenApiDocument({ appEnv: config.appEnv, publicBaseUrl: config.publicBaseUrl, stagingBaseUrl: config.stagingBaseUrl });
  const openapi = serializeOpenApiDocument(document);
  // app.ts serves the operations under /v1 and the document at /v1/openapi.json.
  const docs = referencePageReply(document, { basePath: '/v1', documentPath: '/v1/openapi.json' });
  // Over the overriding store when a test injects one, so its faults reach the create path.
  const petCreations = createPetCreations({ pets: overrides.pets ?? pets, clock, groupCommit, observer });
  const changePet = createPetChanges({ pets: overrides.pets ?? pets, groupCommit });
  const cors = createCors(config.corsAllowedOrigins ?? null);
  const app = createApp({
    clock,
    logger,
    authenticate: (token) => keys.findByKey(token, clock()),
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
    app, server: createHttpServer(app, logger, { maxConnectionsPerAddress: config.maxConnectionsPerAddress, ...server, rawHeaders }), keys, pets, limiter, limiterPersistence,
    openapi: overrides.openapi ?? openapi, petCreations,
  };
}
