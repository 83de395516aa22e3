/**
 * The request pipeline, in the contract's order: identify the caller (authenticate.ts), limit it
 * (limit.ts), authenticate, route (routes.ts), then run the operation's handler, which validates
 * its own input, and answer. Every response, error or not, leaves through the exchange's writer
 * (exchange.ts), which adds the common headers and the access-log line; anything thrown becomes
 * the contract's Error body in one place (errors.ts).
 */
import type { IncomingMessage } from 'node:http';
import type { Clock } from '../clock.ts';
import { BASE_PATH } from '../api/operation.ts';
import { OPERATIONS, type Handlers } from '../api/operations.ts';
import { httpError, methodNotAllowed, type ApiError } from '../http/api-error.ts';
import type { Logger } from '../http/access-log.ts';
import { clientAddress } from '../http/client-address.ts';
import type { ProxyTrust } from '../http/trusted-proxies.ts';
import { isPreflight, type Cors } from '../http/cors.ts';
import type { Reply } from '../http/reply.ts';
import type { RouteMatch } from '../http/router.ts';
import type { App } from '../http/server.ts';
import { addressCaller, keyCaller } from '../limits/callers.ts';
import type { RateLimiter } from '../limits/limiter.ts';
import { ANONYMOUS_LIMITS } from '../limits/plans.ts';
import { databaseUnavailableOf, type DatabaseErrorOf } from '../storage/errors.ts';
import type { Caller } from '../keys/caller.ts';
import { identify, insufficientScope, unauthenticated, type Authenticate } from './authenticate.ts';
import { toErrorReply } from './errors.ts';
import { createSender, openExchange, type Exchange } from './exchange.ts';
import { takeToken } from './limit.ts';
import { NO_OBSERVER, type PipelineObserver } from './observer.ts';
import { createRoutes, OUTSIDE_PATHS, type Route } from './routes.ts';

const { randomUUID } = process.getBuiltinModule('node:crypto');

export interface PipelineDeps {
  clock: Clock;
  logger: Logger;
  authenticate: Authenticate;
  limiter: RateLimiter;
  /** The handler of every operation of the table (src/api/operations.ts), by operationId. */
  handlers: Handlers;
  /** Recognises the storage engine's failures (503 or 500, counted as database errors); default: DatabaseUnavailableError. */
  databaseErrorOf?: DatabaseErrorOf;
  /** Whether the database can be reached, for /healthz; absent means always (SQLite). */
  health?: () => boolean | Promise<boolean>;
  /** Whose X-Forwarded-For is read (`TRUST_PROXY`, compiled by http/trusted-proxies.ts). */
  trustProxy?: boolean | ProxyTrust;
  generateRequestId?: () => string;
  /** Told of every answer and refusal; default: nobody. */
  observer?: PipelineObserver;
  /** The CORS policy of `CORS_ALLOWED_ORIGINS`; absent or null: no CORS header is ever sent. */
  cors?: Cors | null;
  /** The API reference page served at /docs, when there is one. */
  docs?: () => Reply | Promise<Reply>;
}

const HEALTHY: Reply = { status: 200, body: '{"status":"ok"}' };
/** A load balancer stops sending traffic to an instance whose database cannot be reached. */
const UNHEALTHY: Reply = { status: 503, body: '{"status":"unavailable"}', headers: { 'Retry-After': '1' } };

/**
 * Paths outside the base address that are never rate limited, for GET and HEAD: readiness probes
 * and the API reference page. Anything else outside it is limited per address like a keyless
 * request under it, so that junk paths cost their sender.
 */
const UNLIMITED_PATHS: ReadonlySet<string> = new Set(Object.values(OUTSIDE_PATHS));

/** The answer of /healthz once shutdown began. */
const shuttingDown = () => httpError('unavailable', 'The server is shutting down; retry on a new connection.');
const noSuchPath = () => httpError('not_found', 'No such path.');

/**
 * The malformed request that Node lets through, or null: RFC 9112 section 3.2 wants exactly one
 * Host (none in HTTP/1.0), and Authorization may come once. Node keeps the first of repeated
 * Host and Authorization headers in `req.headers` and drops the others, so that two keys would be
 * answered as whichever came first: both are counted in `req.rawHeaders` instead, in one pass.
 * The values are never used here: nothing is built from Host.
 */
function malformedHeaders(req: IncomingMessage): ApiError | null {
  let hosts = 0;
  let authorizations = 0;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++;
    else if (name.length === 13 && name.toLowerCase() === 'authorization') authorizations++;
  }
  if (!(hosts === 1 || (hosts === 0 && req.httpVersion === '1.0'))) {
    return httpError('bad_request', 'An HTTP/1.1 request needs exactly one Host header (RFC 9112, section 3.2).');
  }
  return authorizations > 1 ? httpError('bad_request', 'A request may carry at most one Authorization header.') : null;
}

/**
 * Wires the steps, the routes and the handlers into a request handler for node:http. One closure,
 * longer than a screen, because the routers, the writer and the draining flag are shared by the
 * steps below; `respond` reads top to bottom in the contract's order.
 */
export function createPipeline(deps: PipelineDeps): App {
  const health = deps.health;
  const outside = {
    healthz: health === undefined ? () => HEALTHY : async () => ((await health()) ? HEALTHY : UNHEALTHY),
    ...(deps.docs ? { docs: deps.docs } : {}),
  };
  const { keyed: router, open: publicRouter } = createRoutes(deps.handlers, outside, OPERATIONS);
  const { limiter, authenticate } = deps;
  const cors = deps.cors ?? null;
  const generateRequestId = deps.generateRequestId ?? randomUUID;
  const trustProxy = deps.trustProxy ?? false;
  const observer = deps.observer ?? NO_OBSERVER;
  const databaseErrorOf = deps.databaseErrorOf ?? databaseUnavailableOf;
  let draining = false;
  const send = createSender({ clock: deps.clock, logger: deps.logger, observer, draining: () => draining });

  async function respond(req: IncomingMessage, exchange: Exchange): Promise<Reply> {
    const { path } = exchange;
    const method = req.method ?? 'GET';
    // Malformed HTTP is answered like Node's own parse errors: before anything else (not limited).
    const malformed = malformedHeaders(req);
    if (malformed !== null) throw malformed;
    const isApi = path === BASE_PATH || path.startsWith(`${BASE_PATH}/`);
    // Draining: requests are served (with Connection: close), but a load balancer is told to stop.
    if (draining && path === OUTSIDE_PATHS.healthz) throw shuttingDown();
    if (!isApi) return outsideApi(req, exchange, method);

    // The routes are looked up here, a pure lookup, so that every answer (a 429, a 401 or a
    // preflight too) is counted under its route; they are acted on in the contract's order below.
    const open = publicRouter.find(method, path);
    const match = open === null ? router.find(method, path) : null;
    exchange.route = (open ?? match)?.pattern ?? null;

    // A CORS preflight asks before the request is sent, without the key: it is answered here,
    // unlimited, from the same route lookup as 404 and 405 (see http/cors.ts).
    if (cors !== null && isPreflight(req)) {
      const headers = cors.preflight(req.headers.origin!, router.allowed(path) ?? publicRouter.allowed(path));
      if (headers === null) throw noSuchPath();
      exchange.corsHeaders = headers;
      return { status: 204, body: '' };
    }

    // 1. Identification: a valid key is the caller; otherwise the client address is.
    const identified = identify(req, authenticate);
    const { credentials, apiKey } = identified instanceof Promise ? await identified : identified;
    exchange.keyId = apiKey?.id ?? null;

    // 2. Rate limiting: every request that gets here counts, whatever its outcome.
    const caller = apiKey ? keyCaller(apiKey.id) : addressCaller(clientAddress(req, trustProxy));
    const limited = takeToken(limiter, caller, apiKey ?? ANONYMOUS_LIMITS, exchange, observer);
    if (limited) await limited;
    if (open) return run(open, exchange, req, apiKey);

    // 3. Authentication, then 4. routing (and the key's scope, in `run`).
    if (!apiKey) throw unauthenticated(credentials, observer);
    if (match === null) throw noSuchPath();
    // 5-6. The handler validates its input, in the contract's order, and runs the operation.
    return run(match, exchange, req, apiKey);
  }

  /** A path outside the base address: limited per address unless it is a probe or the docs, then routed. */
  function outsideApi(req: IncomingMessage, exchange: Exchange, method: string): Reply | Promise<Reply> {
    const route = () => {
      const match = publicRouter.find(method, exchange.path);
      if (match === null) throw noSuchPath();
      return run(match, exchange, req, null);
    };
    if ((method === 'GET' || method === 'HEAD') && UNLIMITED_PATHS.has(exchange.path)) return route();
    const limited = takeToken(limiter, addressCaller(clientAddress(req, trustProxy)), ANONYMOUS_LIMITS, exchange, observer);
    return limited ? limited.then(route) : route();
  }

  /**
   * A matched route: 405 for another method of its path; 403 when the key lacks the operation's
   * scope (after routing, before any validation); else its handler.
   */
  function run(match: RouteMatch<Route>, exchange: Exchange, req: IncomingMessage, apiKey: Caller | null): Reply | Promise<Reply> {
    exchange.route = match.pattern;
    if (match.kind === 'method_not_allowed') throw methodNotAllowed(req.method ?? '', match.allow);
    const route = match.handler;
    if (route.bound === null) return route.run();
    exchange.routeHeaders = route.headers;
    const scope = route.bound.operation.scope;
    if (scope && apiKey) {
      const refusal = insufficientScope(apiKey, scope, observer);
      if (refusal !== null) throw refusal;
    }
    return route.run(route.bound.context(req, match.params, exchange.search, apiKey));
  }

  return {
    handle(req, res) {
      const exchange = openExchange(req, generateRequestId, cors?.responseHeaders(req.headers.origin));
      respond(req, exchange).then(
        (reply) => send(req, res, exchange, reply),
        (error: unknown) => {
          if (databaseErrorOf(error) !== null) observer.databaseError();
          const log = (fields: Record<string, unknown>) => deps.logger.event({ ...fields, requestId: exchange.requestId });
          send(req, res, exchange, toErrorReply(error, log, databaseErrorOf));
        },
      );
    },
    drain() {
      draining = true;
    },
  };
}
