/**
 * A small router: static paths in a Map checked first, then patterns with `{name}` segments.
 *
 * Following find-my-way, a programmer error (a bad or duplicate route) throws at registration,
 * while a request that matches nothing gets a plain value back, never an exception. 404 and 405
 * come from the same lookup: a path that exists with other methods yields the `Allow` list.
 */

export type Params = Record<string, string>;

/** `pattern` is the route as registered (`/v1/pets/{petId}`): a bounded label for metrics. */
export type RouteMatch<H> =
  | { kind: 'found'; handler: H; params: Params; pattern: string }
  | { kind: 'method_not_allowed'; allow: string; pattern: string };

export interface Router<H> {
  add(method: string, pattern: string, handler: H): void;
  /** `null` when no route has this path; `method_not_allowed` when others methods do. */
  find(method: string, path: string): RouteMatch<H> | null;
  /** The methods of a path, as its `Allow` value (HEAD beside GET); `null` when no route has it. */
  allowed(path: string): string | null;
  /** Every route added, as method and pattern, in the order added. */
  routes(): { method: string; pattern: string }[];
}

interface PathEntry<H> {
  pattern: string;
  handlers: Map<string, H>;
  /** Precomputed `Allow` value: the methods in the order they were added, HEAD right after GET. */
  allow: string;
}

interface PatternEntry<H> extends PathEntry<H> {
  /** Literal segment, or `null` where a parameter captures the segment. */
  segments: (string | null)[];
  names: string[];
}

const METHOD = /^[A-Z]+$/;
const PARAM = /^\{([A-Za-z_][A-Za-z0-9_]*)\}$/;
const EMPTY_PARAMS: Params = Object.freeze({}) as Params;

/**
 * Creates an empty router. `H` is whatever the application calls a handler. One closure, longer
 * than a screen, because both route tables are shared by `add`, `find`, `allowed` and `routes`.
 */
export function createRouter<H>(): Router<H> {
  const staticRoutes = new Map<string, PathEntry<H>>();
  const patternRoutes: PatternEntry<H>[] = [];

  function addTo(entry: PathEntry<H>, method: string, pattern: string, handler: H): void {
    if (entry.handlers.has(method)) throw new Error(`duplicate route ${method} ${pattern}`);
    entry.handlers.set(method, handler);
    entry.allow = [...entry.handlers.keys()].flatMap((name) => (name === 'GET' ? ['GET', 'HEAD'] : [name])).join(', ');
  }

  /** The route entry that has `path`, with the parameters it captures. */
  function locate(path: string): { entry: PathEntry<H>; params: Params } | null {
    const exact = staticRoutes.get(path);
    if (exact) return { entry: exact, params: EMPTY_PARAMS };
    if (patternRoutes.length === 0) return null;
    const parts = path.split('/');
    for (const route of patternRoutes) {
      if (parts.length !== route.segments.length + 1 || parts[0] !== '') continue;
      let params: Params | null = {};
      let name = 0;
      for (let i = 0; i < route.segments.length; i++) {
        const literal = route.segments[i];
        const part = parts[i + 1]!;
        if (literal === null) {
          if (part === '') { params = null; break; }
          params[route.names[name++]!] = part;
        } else if (literal !== part) {
          params = null;
          break;
        }
      }
      if (params) return { entry: route, params };
    }
    return null;
  }

  return {
    add(method, pattern, handler) {
      if (!METHOD.test(method)) throw new Error(`invalid method "${method}"`);
      if (method === 'HEAD') throw new Error('HEAD is served by the GET route; do not register it');
      if (!pattern.startsWith('/')) throw new Error(`route "${pattern}" must start with "/"`);
      const parts = pattern.split('/').slice(1);
      if (!pattern.includes('{')) {
        let entry = staticRoutes.get(pattern);
        if (!entry) staticRoutes.set(pattern, (entry = { pattern, handlers: new Map(), allow: '' }));
        addTo(entry, method, pattern, handler);
        return;
      }
      const names: string[] = [];
      const segments = parts.map((part) => {
        const param = PARAM.exec(part);
        if (param) {
          if (names.includes(param[1]!)) throw new Error(`route "${pattern}" repeats {${param[1]}}`);
          names.push(param[1]!);
          return null;
        }
        if (part.includes('{') || part.includes('}')) throw new Error(`route "${pattern}" has a malformed parameter`);
        return part;
      });
      let entry = patternRoutes.find((route) => route.pattern === pattern);
      if (!entry) {
        entry = { pattern, segments, names, handlers: new Map(), allow: '' };
        patternRoutes.push(entry);
      }
      addTo(entry, method, pattern, handler);
    },

    find(method, path) {
      const located = locate(path);
      return located === null ? null : pick(located.entry, method, located.params);
    },

    allowed(path) {
      return locate(path)?.entry.allow ?? null;
    },

    routes() {
      return [...staticRoutes.values(), ...patternRoutes].flatMap((entry) => [...entry.handlers.keys()].map((method) => ({ method, pattern: entry.pattern })));
    },
  };
}

function pick<H>(entry: PathEntry<H>, method: string, params: Params): RouteMatch<H> {
  const handler = entry.handlers.get(method) ?? (method === 'HEAD' ? entry.handlers.get('GET') : undefined);
  if (handler === undefined) return { kind: 'method_not_allowed', allow: entry.allow, pattern: entry.pattern };
  return { kind: 'found', handler, params, pattern: entry.pattern };
}
