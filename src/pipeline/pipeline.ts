/**
 * The request pipeline, in the contract's order: identify the caller, limit it, authenticate,
 * route, then run the operation (which validates its own input), and answer. Every response,
 * error or not, leaves through `send`, which adds the common headers and the access-log line.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { randomUUID } from 'node:crypto';
import { ApiError, methodNotAllowed } from '../http/api-error.ts';
import type { Clock } from '../clock.ts';
import { toErrorReply } from './errors.ts';
import { databaseUnavailableOf, type DatabaseErrorOf } from '../storage/errors.ts';
import { INVALID_TOKEN_CHALLENGE, readCredentials, UNAUTHENTICATED_CHALLENGE } from '../http/bearer.ts';
import { clientAddress } from '../http/client-address.ts';
import type { ProxyTrust } from '../http/trusted-proxies.ts';
import { requestId } from '../http/request-id.ts';
import { closeIfBodyUnread } from '../http/request-body.ts';
import type { Logger } from '../http/access-log.ts';
import { ANONYMOUS_LIMITS, type Limits } from '../limits/plans.ts';
import type { Decision } from '../limits/buckets.ts';
import type { RateLimiter } from '../limits/limiter.ts';
import { addressCaller, keyCaller } from '../limits/callers.ts';
import { createPetsOperations, DEPRECATION_HEADERS, type Operation, type PetsOperationsDeps } from '../api/pets/operations.ts';
import { COMMON_HEADERS, type Reply } from '../http/reply.ts';
import type { App } from '../http/server.ts';
import { createRouter } from '../http/router.ts';
import { isPreflight, type Cors } from '../http/cors.ts';

/** An authenticated API key, as the pipeline needs it. */
export interface ApiKeyIdentity extends Limits {
  id: string;
}

/**
 * What the pipeline reports as it answers, for the metrics (src/ops/metrics.ts); the pipeline
 * knows nothing of how it is counted. Called on the hot path: implementations must be cheap.
 */
export interface PipelineObserver {
  /** A response was written. `route` is the router's template, or null when no route matched. */
  responded(method: string, route: string | null, status: number, seconds: number): void;
  rateLimitRejected(code: 'rate_limited' | 'temporarily_banned'): void;
  apiKeyRejected(code: 'missing_api_key' | 'invalid_api_key'): void;
  /** A request failed on a database error (answered 503 or 500). */
  databaseError(): void;
}

const NO_OBSERVER: PipelineObserver = { responded() {}, rateLimitRejected() {}, apiKeyRejected() {}, databaseError() {} };

export interface AppDeps {
  clock: Clock;
  logger: Logger;
  /**
   * Returns the key a bearer token belongs to when it is valid now, else null. `connection` is
   * the request's socket, for work that can be done once per connection (hashing the token).
   */
  authenticate: (token: string, connection: object) => ApiKeyIdentity | null | Promise<ApiKeyIdentity | null>;
  /** Recognises the storage engine's failures (503 or 500, counted as database errors); default: DatabaseUnavailableError. */
  databaseErrorOf?: DatabaseErrorOf;
  /** Whether the database can be reached, for /healthz; absent means always (SQLite). */
  health?: () => boolean | Promise<boolean>;
  limiter: RateLimiter;
  pets: PetsOperationsDeps['pets'];
  createPet: PetsOperationsDeps['createPet'];
  changePet: PetsOperationsDeps['changePet'];
  /** Whose X-Forwarded-For is read (`TRUST_PROXY`, compiled by http/trusted-proxies.ts). */
  trustProxy?: boolean | ProxyTrust;
  /** The serialised OpenAPI document served at /v1/openapi.json, when there is one. */
  openapi?: string;
  generateRequestId?: () => string;
  /** Told of every answer and refusal; default: nobody. */
  observer?: PipelineObserver;
  /** The CORS policy of `CORS_ALLOWED_ORIGINS`; absent or null: no CORS header is ever sent. */
  cors?: Cors | null;
  /** The API reference page served at /docs, when there is one (service.ts builds it once, when first asked). */
  docs?: () => Reply | Promise<Reply>;
}

interface Route {
  run: Operation;
  /** Headers on every response of this route, errors included. */
  headers?: Readonly<Record<string, string>>;
}

const HEALTHY: Reply = { status: 200, body: '{"status":"ok"}' };
/** A load balancer stops sending traffic to an instance whose database cannot be reached. */
const UNHEALTHY: Reply = { status: 503, body: '{"status":"unavailable"}', headers: { 'Retry-After': '1' } };

/**
 * Paths outside `/v1` that are never rate limited, for GET and HEAD (CONTRACT.md, "Limits that
 * hold under floods"): readiness probes and the API reference page. Anything else outside `/v1`
 * is limited per address like a keyless `/v1` request, so that junk paths cost their sender.
 */
const UNLIMITED_PATHS: ReadonlySet<string> = new Set(['/healthz', '/docs']);

/** The answer of /healthz once shutdown began. */
const shuttingDown = () => new ApiError('unavailable', 'The server is shutting down; retry on a new connection.');

/**
 * RFC 9112 section 3.2: a request without Host (HTTP/1.1) or with more than one is answered 400.
 * The value itself is never used: nothing is built from it (see README, Security).
 */
function hasOneHost(req: IncomingMessage): boolean {
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]!.length === 4 && req.rawHeaders[i]!.toLowerCase() === 'host') count++;
  }
  return count === 1 || (count === 0 && req.httpVersion === '1.0');
}

/** Wires the router and the operations into a request handler for node:http. */
export function createApp(deps: AppDeps): App {
  const operations = createPetsOperations({ pets: deps.pets, clock: deps.clock, createPet: deps.createPet, changePet: deps.changePet });
  const router = createRouter<Route>();
  router.add('GET', '/v1/pets', { run: operations.listPets });
  router.add('POST', '/v1/pets', { run: operations.createPet });
  // Only GET (and HEAD) of this path is deprecated: PATCH and DELETE carry no deprecation headers.
  router.add('GET', '/v1/pets/{petId}', { run: operations.getPet, headers: DEPRECATION_HEADERS });
  router.add('PATCH', '/v1/pets/{petId}', { run: operations.updatePet });
  router.add('DELETE', '/v1/pets/{petId}', { run: operations.deletePet });
  router.add('GET', '/v1/store/orders', { run: operations.listOrders });
  const publicRouter = createRouter<Route>();
  const health = deps.health;
  publicRouter.add('GET', '/healthz', {
    run: health === undefined ? () => HEALTHY : async () => ((await health()) ? HEALTHY : UNHEALTHY),
  });
  if (deps.openapi !== undefined) {
    const document = deps.openapi;
    publicRouter.add('GET', '/v1/openapi.json', { run: () => ({ status: 200, body: document }) });
  }
  if (deps.docs !== undefined) publicRouter.add('GET', '/docs', { run: deps.docs });
  const cors = deps.cors ?? null;
  const generateRequestId = deps.generateRequestId ?? randomUUID;
  const trustProxy = deps.trustProxy ?? false;
  const observer = deps.observer ?? NO_OBSERVER;
  const databaseErrorOf = deps.databaseErrorOf ?? databaseUnavailableOf;
  let draining = false;

  /** Per-request state that `send` needs whatever happened before it. */
  interface Exchange {
    started: number;
    requestId: string;
    path: string;
    keyId: string | null;
    /** The matched route's template, for the metrics; null until (or unless) one matches. */
    route: string | null;
    rateHeaders: Record<string, string> | null;
    routeHeaders: Readonly<Record<string, string>> | undefined;
    corsHeaders: Readonly<Record<string, string>> | undefined;
  }

  async function respond(req: IncomingMessage, exchange: Exchange, search: string): Promise<Reply> {
    const { path } = exchange;
    const method = req.method ?? 'GET';
    // Malformed HTTP is answered like Node's own parse errors: before anything else.
    if (!hasOneHost(req)) throw new ApiError('bad_request', 'An HTTP/1.1 request needs exactly one Host header (RFC 9112, section 3.2).');
    const isApi = path === '/v1' || path.startsWith('/v1/');
    // Draining: requests are served (with Connection: close), but a load balancer is told to stop.
    if (draining && path === '/healthz') throw shuttingDown();
    if (!isApi) return outsideApi(req, exchange, method, search);

    // The routes are looked up here, a pure lookup, so that every answer (a 429, a 401 or a
    // preflight too) is counted under its route; they are acted on in the contract's order below.
    const open = publicRouter.find(method, path);
    const match = open === null ? router.find(method, path) : null;
    exchange.route = (open ?? match)?.pattern ?? null;

    // A CORS preflight asks before the request is sent, without the key: it is answered here,
    // unlimited, from the same route lookup as 404 and 405 (see http/cors.ts).
    if (cors !== null && isPreflight(req)) {
      const headers = cors.preflight(req.headers.origin!, router.allowed(path) ?? publicRouter.allowed(path));
      if (headers === null) throw new ApiError('not_found', 'No such path.');
      exchange.corsHeaders = headers;
      return { status: 204, body: '' };
    }

    // 1. Identification: a valid key is the caller; otherwise the client address is.
    const credentials = readCredentials(req.headers.authorization);
    // The stores answer at once (SQLite) or later (PostgreSQL): await only a promise, so the
    // synchronous engine's requests take no extra microtask turn.
    const found = credentials.kind === 'bearer' ? deps.authenticate(credentials.token, req.socket) : null;
    const apiKey = found instanceof Promise ? await found : found;
    exchange.keyId = apiKey?.id ?? null;

    // 2. Rate limiting: every request that gets here counts, whatever its outcome.
    const limited = limit(apiKey ? keyCaller(apiKey.id) : addressCaller(clientAddress(req, trustProxy)), apiKey ?? ANONYMOUS_LIMITS, exchange);
    if (limited) await limited;

    if (open) return runPublic(open, exchange, req, search);

    // 3. Authentication.
    if (!apiKey) {
      const code = credentials.kind === 'missing' ? 'missing_api_key' : 'invalid_api_key';
      observer.apiKeyRejected(code);
      throw code === 'missing_api_key'
        ? new ApiError('missing_api_key', 'Send your API key as Authorization: Bearer <key>.', { 'WWW-Authenticate': UNAUTHENTICATED_CHALLENGE })
        : new ApiError('invalid_api_key', 'The API key is unknown, revoked or expired.', { 'WWW-Authenticate': INVALID_TOKEN_CHALLENGE });
    }

    // 4. Routing.
    if (match === null) throw new ApiError('not_found', 'No such path.');
    if (match.kind === 'method_not_allowed') throw methodNotAllowed(method, match.allow);

    // 5-6. Validation and the operation.
    exchange.routeHeaders = match.handler.headers;
    return match.handler.run({ req, params: match.params, search, keyId: apiKey.id });
  }

  /** A path outside `/v1`: limited per address unless it is a probe or the docs, then routed. */
  function outsideApi(req: IncomingMessage, exchange: Exchange, method: string, search: string): Reply | Promise<Reply> {
    const { path } = exchange;
    const route = () => {
      const match = publicRouter.find(method, path);
      if (match === null) throw new ApiError('not_found', 'No such path.');
      return runPublic(match, exchange, req, search);
    };
    if ((method === 'GET' || method === 'HEAD') && UNLIMITED_PATHS.has(path)) return route();
    const limited = limit(addressCaller(clientAddress(req, trustProxy)), ANONYMOUS_LIMITS, exchange);
    return limited ? limited.then(route) : route();
  }

  /** Counts the request against `caller`; its headers go on the answer, and a refusal is thrown. */
  /**
   * Takes the caller's token; throws the 429 when refused. A promise only when the limiter
   * answers later (PostgreSQL): SQLite's requests do not wait a microtask for it.
   */
  function limit(caller: string, limits: Limits, exchange: Exchange): Promise<void> | undefined {
    const taken = deps.limiter.take(caller, limits);
    if (taken instanceof Promise) return taken.then((decision) => apply(decision, exchange));
    apply(taken, exchange);
    return undefined;
  }

  function apply(decision: Decision, exchange: Exchange): void {
    exchange.rateHeaders = decision.headers;
    if (!decision.allowed) {
      observer.rateLimitRejected(decision.code ?? 'rate_limited');
      throw decision.code === 'temporarily_banned'
        ? new ApiError('temporarily_banned', 'Too many requests were refused; this caller is banned for a while. Retry after the time in Retry-After.')
        : new ApiError('rate_limited', 'Rate limit exceeded. Retry after the time in Retry-After, with exponential backoff.');
    }
  }

  function runPublic(match: NonNullable<ReturnType<typeof publicRouter.find>>, exchange: Exchange, req: IncomingMessage, search: string): Reply | Promise<Reply> {
    exchange.route = match.pattern;
    if (match.kind === 'method_not_allowed') throw methodNotAllowed(req.method ?? '', match.allow);
    return match.handler.run({ req, params: match.params, search, keyId: exchange.keyId ?? '' });
  }

  function send(req: IncomingMessage, res: ServerResponse, exchange: Exchange, reply: Reply): void {
    if (res.headersSent || res.destroyed) return;
    const headers: Record<string, string | number> = {
      ...COMMON_HEADERS,
      'X-Request-Id': exchange.requestId,
      ...exchange.rateHeaders,
      ...exchange.routeHeaders,
      ...exchange.corsHeaders,
      ...reply.headers,
      'Content-Length': Buffer.byteLength(reply.body),
    };
    // RFC 9110, 8.6 and 15.3.5: a 204 has no content, so neither a length nor a type.
    if (reply.status === 204) {
      delete headers['Content-Length'];
      delete headers['Content-Type'];
    }
    // An answer that left the body unread closes the connection rather than wait for that body.
    if (closeIfBodyUnread(req) || draining) headers.Connection = 'close';
    res.writeHead(reply.status, headers);
    res.end(reply.body);
    const elapsedMs = performance.now() - exchange.started;
    const method = req.method ?? '';
    observer.responded(method, exchange.route, reply.status, elapsedMs / 1000);
    deps.logger.access({
      time: deps.clock(),
      requestId: exchange.requestId,
      method,
      path: exchange.path,
      status: reply.status,
      durationMs: Math.round(elapsedMs * 1000) / 1000,
      keyId: exchange.keyId,
    });
  }

  const logError = (fields: Record<string, unknown>) => deps.logger.event(fields);

  return {
    handle(req, res) {
      const url = req.url ?? '/';
      const question = url.indexOf('?');
      const exchange: Exchange = {
        started: performance.now(),
        requestId: requestId(req.headers['x-request-id'], generateRequestId),
        path: question === -1 ? url : url.slice(0, question),
        keyId: null,
        route: null,
        rateHeaders: null,
        routeHeaders: undefined,
        corsHeaders: cors?.responseHeaders(req.headers.origin),
      };
      const search = question === -1 ? '' : url.slice(question + 1);
      respond(req, exchange, search).then(
        (reply) => send(req, res, exchange, reply),
        (error: unknown) => {
          if (databaseErrorOf(error) !== null) observer.databaseError();
          send(req, res, exchange, toErrorReply(error, (fields) => logError({ ...fields, requestId: exchange.requestId }), databaseErrorOf));
        },
      );
    },
    drain() {
      draining = true;
    },
  };
}
