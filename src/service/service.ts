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
import type { CreationsObserver, PetCreations } from '../api/pets/creations.ts';
import type { ChangePet } from '../api/pets/changes.ts';
import { createPipeline } from '../pipeline/pipeline.ts';
import type { PipelineObserver } from '../pipeline/observer.ts';
import { createPetsHandlers } from '../api/pets/handlers.ts';
import type { OrdersObserver } from '../api/orders/placements.ts';
import type { CommitWaiter } from '../api/events/commit-waiter.ts';
import type { EventsObserver } from '../api/events/observer.ts';
import type { EventStreams, StreamsObserver } from '../api/events/streams.ts';
import type { StreamSlots } from '../limits/stream-slots.ts';
import type { App } from '../http/server.ts';
import type { Reply } from '../http/reply.ts';
import { createHttpServer, type ServerOptions } from '../http/server.ts';
import type { OpenApiDocument } from '../api/openapi/document.ts';
import { BASE_PATH } from '../api/operation.ts';
import { OPERATIONS } from '../api/operations.ts';
import { handlersLoadedOnFirstRequest } from '../api/lazy-handlers.ts';
import { loadedOnFirstUse } from '../lib/loaded-on-first-use.ts';
import { createCors } from '../http/cors.ts';
import { proxyTrust } from '../http/trusted-proxies.ts';
import { allowedHosts } from '../http/allowed-hosts.ts';
import type { Stores, WriteBatching } from '../storage/stores.ts';
import type { Resolver } from '../http/outbound-resolution.ts';

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
  openapi(): Promise<string>;
}

/** Builds the service over an engine's stores. */
export function createService<S extends Stores>(deps: ServiceDeps<S>): Service<S> {
  const { stores, config, clock, logger, overrides = {}, server, groupCommit = true, observer } = deps;
  const { served, docs } = documents(config, overrides);
  const pets = overrides.pets ?? stores.pets;
  const cors = createCors(config.corsAllowedOrigins ?? null);
  const keyHashOf = createConnectionKeyHasher(config.appEnv);
  const proxies = proxyTrust(config.trustProxy);
  // How this engine's writes are best batched (SQLite's writer thread: every batch at once).
  const batching = stores.writeBatching ?? {};
  // The pets' write paths (group commit, the Idempotency-Key records, the events reported) are
  // built with their modules on the first create or change, and called directly from then on.
  const petWrites = loadedOnFirstUse(async (): Promise<{ create: PetCreations['create']; change: ChangePet }> => {
    const [{ createPetCreations }, { createPetChanges }] = await Promise.all([import('../api/pets/creations.ts'), import('../api/pets/changes.ts')]);
    return {
      create: createPetCreations({ pets, clock, groupCommit, ...batching, observer }).create,
      change: createPetChanges({ pets, groupCommit, ...batching, ...(observer ? { observer } : {}) }),
    };
  });
  const feed = feedHandlers(deps);
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
        createPet: (pet, caller, idempotency) => petWrites.use((writes) => writes.create(pet, caller, idempotency)),
        changePet: (change) => petWrites.use((writes) => writes.change(change)),
      }),
      ...ordersHandlers(deps, { groupCommit, ...batching }),
      ...feed.handlers,
      ...webhooksHandlers(deps),
      getOpenApiDocument: () => served().then((body) => ({ status: 200, body })),
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
      feed.drain();
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
    openapi: served,
  };
}

/**
 * The OpenAPI document's text and the /docs page, each made on its first request (with its
 * modules loaded then) and kept: made at every start, the document cost the start about 4 ms of
 * CPU and loading its modules about 2 ms more; the page about 20 ms.
 */
function documents(config: ServiceConfig, overrides: ServiceOverrides): { served(): Promise<string>; docs(): Promise<Reply> } {
  let document: Promise<OpenApiDocument> | undefined;
  const documentOf = () => (document ??= import('../api/openapi/document.ts').then(({ buildOpenApiDocument }) =>
    buildOpenApiDocument({ appEnv: config.appEnv, publicBaseUrl: config.publicBaseUrl, stagingBaseUrl: config.stagingBaseUrl })));
  let openapi: Promise<string> | undefined;
  const served = () => (openapi ??= overrides.openapi !== undefined
    ? Promise.resolve(overrides.openapi)
    : Promise.all([import('../api/openapi/document.ts'), documentOf()]).then(([{ serializeOpenApiDocument }, built]) => serializeOpenApiDocument(built)));
  let docsPage: Promise<Reply> | undefined;
  const docs = () => (docsPage ??= Promise.all([import('../api/reference-page/reference-page.ts'), documentOf()]).then(([{ referencePageReply }, built]) =>
    referencePageReply(built, { basePath: BASE_PATH, documentPath: BASE_PATH + OPERATIONS.getOpenApiDocument.path })));
  return { served, docs };
}

// The store's, the feed's and the webhooks' handlers are loaded with their modules on the first
// request of one of their operations (api/lazy-handlers.ts): a start loads only what a request
// of the pets needs, each module costing it about 0.3 ms before its first answer.

/** The store's handlers, over the orders' write paths, which commit as `writing` says (resolved once by createService). */
function ordersHandlers({ stores, config, clock, observer }: ServiceDeps, writing: { groupCommit: boolean } & WriteBatching) {
  return handlersLoadedOnFirstRequest('store', async () => {
    const [{ createOrderWrites }, { createOrdersHandlers }] = await Promise.all([import('../api/orders/placements.ts'), import('../api/orders/handlers.ts')]);
    const writes = createOrderWrites({
      orders: stores.orders, clock, ...writing, ...(observer ? { observer } : {}),
      ...(config.orderHoldSeconds !== undefined ? { holdSeconds: config.orderHoldSeconds } : {}),
      ...(config.maxOpenOrdersPerAccount !== undefined ? { maxOpenOrders: config.maxOpenOrdersPerAccount } : {}),
    });
    return createOrdersHandlers({ orders: stores.orders, clock, placeOrder: writes.place, changeOrder: writes.change });
  });
}

/**
 * The feed's handlers, with the process's one waiter for its long polls and its streams, made
 * with the handlers; `drain` closes them, which answers them at once (and at once any made after).
 */
function feedHandlers({ stores, clock, observer, streams: streamOptions = {} }: ServiceDeps) {
  let feed: { waiter: CommitWaiter; streams: EventStreams } | undefined;
  let drained = false;
  const closeFeed = () => {
    feed?.streams.close();
    feed?.waiter.close();
  };
  const handlers = handlersLoadedOnFirstRequest('events', async () => {
    const [{ createCommitWaiter }, { createEventStreams }, { createEventsHandlers }, { createStreamSlots }] = await Promise.all([
      import('../api/events/commit-waiter.ts'), import('../api/events/streams.ts'), import('../api/events/handlers.ts'), import('../limits/stream-slots.ts'),
    ]);
    const waiter = createCommitWaiter({ latestId: () => stores.events.latestId() });
    const { slots = createStreamSlots(), ...intervals } = streamOptions;
    const streams = createEventStreams({ events: stores.events, waiter, keys: stores.keys, slots, clock, ...intervals, ...(observer ? { observer } : {}) });
    feed = { waiter, streams };
    if (drained) closeFeed();
    return createEventsHandlers({ events: stores.events, waiter, clock, streams });
  });
  return {
    handlers,
    drain() {
      drained = true;
      closeFeed();
    },
  };
}

/** The webhooks' handlers. */
function webhooksHandlers({ stores, config, clock, observer, resolver }: ServiceDeps) {
  return handlersLoadedOnFirstRequest('webhooks', async () => {
    const [{ createWebhooksHandlers }, { createAddressPolicy }, { systemResolver }] = await Promise.all([
      import('../api/webhooks/handlers.ts'), import('../webhooks/address-policy.ts'), import('../http/outbound-resolution.ts'),
    ]);
    return createWebhooksHandlers({
      webhooks: stores.webhooks, clock, policy: createAddressPolicy(config.webhookAllowedNetworks ?? []), resolve: resolver ?? systemResolver,
      ...(observer ? { replayed: () => observer.idempotentReplayed() } : {}),
    });
  });
}
