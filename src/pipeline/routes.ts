/**
 * The routes of the pipeline, built from the table of operations (src/api/operations.ts) and
 * their handlers. Two routers: the operations that need a key, and the paths anyone may call,
 * which are looked up first: the OpenAPI document, and outside the API `GET /healthz` and
 * `GET /docs` (which the document does not describe: they are not under its base address).
 * As in find-my-way, a mistake in the wiring throws at start: an operation without a handler,
 * or a handler without an operation.
 */
import { BASE_PATH, DEPRECATION_HEADERS, OPERATIONS, type Handler, type Handlers, type OperationSpec } from '../api/operations.ts';
import { createRouter, type Router } from '../http/router.ts';

export interface Route {
  run: Handler;
  /** The operation's entry; absent for the paths outside the API (/healthz, /docs). */
  spec?: OperationSpec;
  /** Headers on every response of this route once routed, errors included. */
  headers?: Readonly<Record<string, string>>;
}

export interface Routes {
  /** The operations that need a valid key (401 without one, before 404 and 405; 403 without their scope, after). */
  keyed: Router<Route>;
  /** What anyone may call: the operations whose key is optional, and the paths outside the API. */
  open: Router<Route>;
}

/** The handlers of the paths outside the API. */
export interface OutsideHandlers {
  healthz: Handler;
  /** The API reference page; absent: no /docs. */
  docs?: Handler;
}

/** The routers of every operation of the table, each with its handler, and of the paths outside the API. */
export function createRoutes(handlers: Handlers, outside: OutsideHandlers): Routes {
  const routes: Routes = { keyed: createRouter<Route>(), open: createRouter<Route>() };
  const unused = new Set(Object.keys(handlers));
  for (const spec of OPERATIONS) {
    const run = handlers[spec.operationId];
    if (run === undefined) throw new Error(`operation ${spec.operationId} has no handler`);
    unused.delete(spec.operationId);
    const router = spec.scope !== null ? routes.keyed : routes.open;
    router.add(spec.method, BASE_PATH + spec.path, { run, spec, ...(spec.deprecated ? { headers: DEPRECATION_HEADERS } : {}) });
  }
  if (unused.size > 0) throw new Error(`handlers without an operation: ${[...unused].join(', ')}`);
  routes.open.add('GET', '/healthz', { run: outside.healthz });
  if (outside.docs !== undefined) routes.open.add('GET', '/docs', { run: outside.docs });
  return routes;
}
