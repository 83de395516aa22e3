/**
 * Wires the parts into one service over either storage engine's stores: the request pipeline, its
 * operations, the OpenAPI document and the /docs page, and the HTTP server around them. No
 * environment, no files, no timers, no listening: main.ts does those, and tests call this with
 * stores over `:memory:` (or a test PostgreSQL) and a fake clock.
 */
import type { Server } from 'node:http';
import type { Config } from '../config.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../http/access-log.ts';
import { createConnectionKeyHasher } from '../keys/api-keys.ts';
import { createPetCreations, type CreationsObserver } from '../api/pets/creations.ts';
import { createPetChanges } from '../api/pets/changes.ts';
import { createPipeline } from '../pipeline/pipeline.ts';
import type { PipelineObserver } from '../pipeline/observer.ts';
import { createPetsHandlers } from '../api/pets/handlers.ts';
import { createOrdersHandlers } from '../api/orders/handlers.ts';
import { createOrderWrites, type OrdersObserver } from '../api/orders/placements.ts';
import { createCommitWaiter } from '../api/events/commit-waiter.ts';
import { createEventsHandlers } from '../api/events/handlers.ts';
import type { EventsObserver } from '../api/events/observer.ts';
import { createEventStreams, type StreamsObserver } from '../api/events/streams.ts';
import { createStreamSlots, type StreamSlots } from '../limits/stream-slots.ts';
import type { App } from '../http/server.ts';
import type { Reply } from '../http/reply.ts';
import { createHttpServer, type ServerOptions } from '../http/server.ts';
import { buildOpenApiDocument, serializeOpenApiDocument, type OpenApiDocument } from '../api/openapi/document.ts';
import { BASE_PATH } from '../api/operation.ts';
import { OPERATIONS } from '../api/operations.ts';
import { createCors } from '../http/cors.ts';
import { proxyTrust } from '../http/trusted-proxies.ts';
import { allowedHosts } from '../http/allowed-hosts.ts';
import type { Stores } from '../storage/stores.ts';
import { createWebhooksHandlers } from '../api/webhooks/handlers.ts';
import { systemResolver, type Resolver } from '../http/outbound-resolution.ts';
import { createAddressPolicy } from '../webhooks/address-policy.ts';

export type ServiceConfig = Pick<
  Config,
  'appEnv' | 'trustProxy' | 'rateLimitBanThreshold' | 'rateLimitBanSeconds' | 'publicBaseUrl' | 'stagingBaseUrl'
> &
  // Optional so that the service can be built without them (tests, bench). An absent
  // corsAllowedOrigins means unset (no CORS header); an absent maxConnectionsPerAddress, the
  // server's default; an absent hold or cap, the variables' defaults.
  Partial<Pick<Config, 'corsAllowedOrigins' | 'maxConnectionsPerAddress' | 'allowedHosts' | 'orderHoldSeconds' | 'maxOpenOrdersPerAccount' | 'webhookAllowedNetworks'>>;

/** What a test may replace: a store that fails, a limiter that never refuses, another document. */
export interface ServiceOverrides {
  pets?: Stores['pets'];
  limiter?: Stores['limiter'];
  /** The serialised OpenAPI document to serve instead of the service's own. */
  openapi?: string;
}

export interface ServiceDeps<S extends Stores = Stores> {
  /** The storage engine's stores (storage/sqlite/stores.ts or storage/postgres/stores.ts). */
  stores: S;
  config: ServiceConfig;
  clock: Clock;
  logger: Logger;
  /** Replaces parts of the service (tests inject failing stores this way). */
  overrides?: ServiceOverrides;
  /** Smaller timeouts and caps for tests, or a connection gate held elsewhere (WORKERS). */
  server?: ServerOptions;
  /** Group commit of creates and changes; on unless turned off to measure the difference. */
  groupCommit?: boolean;
  /** Told of answers, refusals and creates (the metrics, when METRICS_PORT is set). */
  observer?: PipelineObserver & CreationsObserver & OrdersObserver & Partial<EventsObserver & StreamsObserver>;
  /** Resolves a webhook URL's host when it is set; the system's resolver unless a test maps its own names. */
  resolver?: Resolver;
  /** The event streams' caps (WORKERS: counted in the primary thread) and, for tests, shorter intervals. */
  streams?: StreamOptions;
}

export interface StreamOptions {
  /** Default: this process's own counts, of the default caps. */
  slots?: StreamSlots;
  keepAliveMs?: number;
  keyCheckMs?: number;
}

export interface Service<S extends Stores = Stores> {
  app: App;
  server: Server;
  stores: S;
  /** The OpenAPI document served at /v1/openapi.json, serialised once, on first use. */
  readonly openapi: string;
}

/** Builds the service over an engine's stores. */
export function createService<S extends Stores>({ stores, config, clock, logger, overrides = {}, server, groupCommit = true, observer, resolver = systemResolver, streams: streamOptions = {} }: ServiceDeps<S>): Service<S> {
  // The OpenAPI document and its text are made on their first use (the document's own request,
  // /docs) and kept: made at every start, they cost the start about 4 ms of CPU.
  let document: OpenApiDocument | undefined;
  const documentOf = () => (document ??= buildOpenApiDocument({ appEnv: config.appEnv, publicBaseUrl: config.publicBaseUrl, stagingBaseUrl: config.stagingBaseUrl }));
  let openapi: string | undefined;
  const served = () => (openapi ??= overrides.openapi ?? serializeOpenApiDocument(documentOf()));
  // GET /docs is rendered on its first request, with its modules loaded then, and kept: one build
  // per process. Built at every start, it cost the start about 20 ms of CPU.
  let docsPage: Promise<Reply> | undefined;
  const docs = () => (docsPage ??= import('../api/reference-page/reference-page.ts').then(({ referencePageReply }) =>
    referencePageReply(documentOf(), { basePath: BASE_PATH, documentPath: BASE_PATH + OPERATIONS.getOpenApiDocument.path })));
  const pets = overrides.pets ?? stores.pets;
  const cors = createCors(config.corsAllowedOrigins ?? null);
  const keyHashOf = createConnectionKeyHasher(config.appEnv);
  const proxies = proxyTrust(config.trustProxy);
  // How this engine's writes are best batched (SQLite's writer thread: every batch at once).
  const batching = stores.writeBatching ?? {};
  /** The store's handlers, over the orders' write paths. */
  const ordersHandlers = () => {
    const writes = createOrderWrites({
      orders: stores.orders, clock, groupCommit, ...batching, ...(observer ? { observer } : {}),
      ...(config.orderHoldSeconds !== undefined ? { holdSeconds: config.orderHoldSeconds } : {}),
      ...(config.maxOpenOrdersPerAccount !== undefined ? { maxOpenOrders: config.maxOpenOrdersPerAccount } : {}),
    });
    return createOrdersHandlers({ orders: stores.orders, clock, placeOrder: writes.place, changeOrder: writes.change });
  };
  // The process's one waiter for the feed's long polls; the drain answers them at once.
  const waiter = createCommitWaiter({ latestId: () => stores.events.latestId() });
  const { slots = createStreamSlots(), ...intervals } = streamOptions;
  const streams = createEventStreams({ events: stores.events, waiter, keys: stores.keys, slots, clock, ...intervals, ...(observer ? { observer } : {}) });
  const pipeline = createPipeline({
    clock,
    logger,
    authenticate: (token, connection) => {
      const keyHash = keyHashOf(token, connection);
      return keyHash === null ? null : stores.keys.findByHash(keyHash, clock());
    },
    limiter: overrides.limiter ?? stores.limiter,
    handlers: {
      ...createPetsHandlers({
        pets,
        clock,
        createPet: createPetCreations({ pets, clock, groupCommit, ...batching, observer }).create,
        changePet: createPetChanges({ pets, groupCommit, ...batching, ...(observer ? { observer } : {}) }),
      }),
      ...ordersHandlers(),
      ...createEventsHandlers({ events: stores.events, waiter, clock, streams }),
      ...createWebhooksHandlers({
        webhooks: stores.webhooks, clock, policy: createAddressPolicy(config.webhookAllowedNetworks ?? []), resolve: resolver,
        ...(observer ? { replayed: () => observer.idempotentReplayed() } : {}),
      }),
      getOpenApiDocument: () => ({ status: 200, body: served() }),
    },
    databaseErrorOf: stores.databaseErrorOf,
    ...(stores.health ? { health: stores.health } : {}),
    trustProxy: proxies,
    observer,
    docs,
    cors,
  });
  const app: App = {
    handle: pipeline.handle,
    drain() {
      streams.close();
      waiter.close();
      pipeline.drain();
    },
  };
  // With `*`, even the answers the HTTP server writes before the app runs are readable by a page.
  const rawHeaders = cors !== null && config.corsAllowedOrigins === '*' ? cors.responseHeaders('*') : {};
  return {
    app,
    server: createHttpServer(app, logger, {
      maxConnectionsPerAddress: config.maxConnectionsPerAddress,
      proxies,
      // Unset, the API answers any Host: nothing is built from it, and what a rebinding page could
      // read without a key (/docs, /healthz, the OpenAPI document) is public anyway.
      ...(config.allowedHosts ? { hostCheck: allowedHosts(config.allowedHosts) } : {}),
      ...server,
      rawHeaders,
    }),
    stores,
    get openapi() {
      return served();
    },
  };
}
