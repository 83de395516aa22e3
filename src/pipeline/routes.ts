/**
 * The routes of the pipeline, built from the table of operations (src/api/operations.ts) and
 * their handlers. Two routers: the operations that need a key, and the paths anyone may call,
 * which are looked up first: the OpenAPI document, and outside the API `GET /healthz` and
 * `GET /docs` (which the document does not describe: they are not under its base address).
 * As in find-my-way, a mistake in the wiring throws at start: an operation without a handler,
 * or a handler without an operation, which the type of the handlers already refuses.
 */
import { bindOperation, type BoundOperation } from '../api/bound-operation.ts';
import type { Handler, HandlersOf } from '../api/handler.ts';
import { BASE_PATH, deprecationHeaders, type OperationTable } from '../api/operation.ts';
import type { Reply } from '../http/reply.ts';
import { createRouter, type Router } from '../http/router.ts';

/** The paths outside the API, at the root: a readiness probe and the reference page. */
export const OUTSIDE_PATHS = { healthz: '/healthz', docs: '/docs' } as const;

/** A route: an operation of the table, or a path outside the API. */
export type Route = OperationRoute | OutsideRoute;

export interface OperationRoute {
  /** The operation's entry and its validators. */
  bound: BoundOperation;
  run: Handler;
  /** Headers on every response of this route once routed, errors included. */
  headers?: Readonly<Record<string, string>>;
}

export interface OutsideRoute {
  bound: null;
  run: () => Reply | Promise<Reply>;
}

export interface Routes {
  /** The operations that need a valid key (401 without one, before 404 and 405; 403 without their scope, after). */
  keyed: Router<Route>;
  /** What anyone may call: the operations whose key is optional, and the paths outside the API. */
  open: Router<Route>;
}

/** The handlers of the paths outside the API. */
export interface OutsideHandlers {
  healthz: () => Reply | Promise<Reply>;
  /** The API reference page; absent: no /docs. */
  docs?: () => Reply | Promise<Reply>;
}

/** The routers of every operation of `table`, each with its handler, and of the paths outside the API. */
export function createRoutes<T extends OperationTable>(handlers: HandlersOf<T>, outside: OutsideHandlers, table: T): Routes {
  const routes: Routes = { keyed: createRouter<Route>(), open: createRouter<Route>() };
  // Each id's handler takes its own operation's context: held here as a handler of any operation.
  const byId = new Map<string, Handler>(Object.entries(handlers));
  const unused = new Set(Object.keys(handlers));
  for (const [operationId, operation] of Object.entries(table)) {
    const run = byId.get(operationId);
    if (run === undefined) throw new Error(`operation ${operationId} has no handler`);
    unused.delete(operationId);
    const router = operation.scope !== null ? routes.keyed : routes.open;
    const headers = operation.deprecated ? { headers: deprecationHeaders(operation.deprecated) } : {};
    router.add(operation.method, BASE_PATH + operation.path, { bound: bindOperation(operation), run, ...headers });
  }
  if (unused.size > 0) throw new Error(`handlers without an operation: ${[...unused].join(', ')}`);
  routes.open.add('GET', OUTSIDE_PATHS.healthz, { bound: null, run: outside.healthz });
  if (outside.docs !== undefined) routes.open.add('GET', OUTSIDE_PATHS.docs, { bound: null, run: outside.docs });
  return routes;
}
