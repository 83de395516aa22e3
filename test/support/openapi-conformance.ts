/**
 * Checks a real HTTP response against the OpenAPI document the server serves, so that the
 * document cannot promise what the service does not do, nor the service answer what the
 * document does not describe. test-server.ts runs it on every response of the HTTP suite.
 *
 * A response conforms when its status is one the document gives for the operation, every header
 * it carries (beyond the transport ones) is described and matches its schema, every header the
 * document marks `required` is present, and its body matches the response's media type and
 * schema (JSON Schema 2020-12, checked with ajv). HEAD is checked as the GET it mirrors
 * (RFC 9110, 9.3.2), with an empty body.
 *
 * Responses that belong to no operation of the document are checked against what the document
 * says about them, never waved through:
 * - a path under the base address that no operation has: the shared `NotFound` response, or
 *   `Unauthorized`/`TooManyRequests`, which come first (docs/api.md: authentication precedes
 *   routing);
 * - a method that no operation of a path has: `MethodNotAllowed`, whose `Allow` must list the
 *   path's operations (plus HEAD beside GET);
 * - paths outside the base address (`/healthz`, `/docs`, `/`, `/pets`): the contract puts them
 *   "outside the API operations", and describing `/healthz` as a path would make generated clients
 *   call it under `/v1`, where it does not exist. `GET /healthz` must answer `200 {"status":"ok"}`
 *   (the document's info says so) and `GET /docs` an HTML page with its Content-Security-Policy,
 *   both without the rate-limit headers; any other request outside the base address is limited
 *   per address, so it must be `NotFound`, `MethodNotAllowed` or `TooManyRequests`
 *   with their headers.
 *
 * The CORS headers of an answer (`Access-Control-Allow-Origin`, `-Expose-Headers`, `Vary`) are
 * described as optional on every response, so they are checked like the others; a preflight's
 * (`OPTIONS`, `Access-Control-Allow-Methods`, ...) is the browser's protocol, no operation of the
 * document, and is left to its own tests (test/app-cors.test.ts), which send it without this check.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';

/** A parsed JSON document; shapes are checked where they are read. */
type Json = Record<string, any>;

/** Headers that HTTP itself adds; the document describes the rest. */
const TRANSPORT_HEADERS = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding']);
/** Optional on every response when CORS_ALLOWED_ORIGINS is set. */
const CORS_HEADERS = ['Access-Control-Allow-Origin', 'Access-Control-Expose-Headers', 'Vary'];
/** Paths outside the base address that answer GET and HEAD (docs/api.md), and how their 200 is checked. */
const OUTSIDE_PAGES: Readonly<Record<string, Pick<Expected, 'body' | 'bodyText' | 'pageHeaders'>>> = {
  '/healthz': { body: (value) => (JSON.stringify(value) === '{"status":"ok"}' ? null : `body ${JSON.stringify(value)} is not {"status":"ok"}`) },
  '/docs': {
    bodyText: (text, mediaType) =>
      mediaType !== 'text/html' ? `Content-Type ${mediaType} is not text/html` : text.startsWith('<!doctype html>') ? null : 'the body is not an HTML page',
    // Its policy is tested in test/app-docs.test.ts and, for what it allows, in a browser.
    pageHeaders: new Set(['content-security-policy', 'referrer-policy']),
  },
};
const OUTSIDE_PATHS = new Set(Object.keys(OUTSIDE_PAGES));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
/** Responses that any request under the base address may get before it is routed. */
const BEFORE_ROUTING: Readonly<Record<number, string>> = {
  401: 'Unauthorized',
  408: 'AnsweredByServer',
  429: 'TooManyRequests',
  431: 'AnsweredByServer',
  500: 'InternalError',
  503: 'Unavailable',
};
const DOCUMENT_ID = 'https://openapi.invalid/document.json';

export interface Exchange {
  method: string;
  /** The absolute URL requested. */
  url: string;
}

export interface ConformanceChecker {
  /** Throws an Error saying which response and why, when `response` does not conform. */
  check(exchange: Exchange, response: Response): Promise<void>;
}

const escapePointer = (segment: string) => segment.replaceAll('~', '~0').replaceAll('/', '~1');

/** A response or header object with the JSON pointer it was found at (after following `$ref`). */
interface Located {
  pointer: string;
  object: Json;
}

interface Expected {
  described: Located;
  /** For messages: what this response is in the document. */
  what: string;
  /** Header names (lower case) not required here although the document requires them. */
  optionalHeaders?: (name: string) => boolean;
  /** Checks the body instead of the described content (for `/healthz`). */
  body?: (value: unknown) => string | null;
  /** Set when only the operation's `default` response can describe this status: said first if it does not fit. */
  unlisted?: string;
  /** Checks a body that is not JSON, with its media type, instead of the described content (for `/docs`). */
  bodyText?: (text: string, mediaType: string) => string | null;
  /** Headers (lower case) of a page outside the API, checked by that page's own tests. */
  pageHeaders?: ReadonlySet<string>;
}

/** Builds a checker for one serialised document; compiled schemas are kept per document. */
export function createConformanceChecker(documentText: string): ConformanceChecker {
  const document = JSON.parse(documentText) as Json;
  const ajv = new Ajv2020({ allErrors: true, strict: true });
  // The document's own keywords, so that strict mode accepts it as the root of its schemas.
  ajv.addVocabulary(['openapi', 'info', 'jsonSchemaDialect', 'servers', 'paths', 'webhooks', 'components', 'security', 'tags', 'externalDocs']);
  // OpenAPI's own schema keyword: an annotation that names which `oneOf` branch a value is; the
  // branches themselves say it (each its `type`), so it validates nothing more.
  ajv.addVocabulary(['discriminator']);
  // OpenAPI's format: an integer that fits 64 bits (JSON.parse already rounded larger digits).
  ajv.addFormat('int64', { type: 'number', validate: (value: number) => Number.isInteger(value) && Math.abs(value) <= 2 ** 63 });
  ajv.addFormat('int32', { type: 'number', validate: (value: number) => Number.isInteger(value) && value >= -(2 ** 31) && value < 2 ** 31 });
  ajv.addSchema(document, DOCUMENT_ID);

  const basePath = new URL((document.servers?.[0]?.url as string | undefined) ?? '/', 'http://base.invalid').pathname.replace(/\/$/, '');
  const templates = Object.keys(document.paths ?? {}).map((template) => ({
    template,
    pattern: new RegExp(`^${template.split(/\{[^}]+\}/).map((part) => part.replace(/[.*+?^$()|[\]\\]/g, '\\$&')).join('[^/]+')}$`),
    literal: !template.includes('{'),
  }));
  // Literal paths first, as the router does.
  templates.sort((a, b) => Number(b.literal) - Number(a.literal));

  function resolve(pointer: string): Located {
    let object: unknown = document;
    let at = pointer;
    for (let hops = 0; hops < 10; hops++) {
      object = at.split('/').slice(1).reduce<any>((node, segment) => node?.[segment.replaceAll('~1', '/').replaceAll('~0', '~')], document);
      if (object === undefined || object === null || typeof object !== 'object') throw new Error(`the document has nothing at #${at}`);
      const target = (object as Json).$ref;
      if (typeof target !== 'string') return { pointer: at, object: object as Json };
      if (!target.startsWith('#/')) throw new Error(`external $ref ${target} at #${at}`);
      at = target.slice(1);
    }
    throw new Error(`$ref loop at #${pointer}`);
  }

  const sharedResponse = (name: string, why: string): Expected => ({
    described: resolve(`/components/responses/${escapePointer(name)}`),
    what: `components.responses.${name} (${why})`,
  });

  function validate(pointer: string, value: unknown): string | null {
    const validator = ajv.getSchema(`${DOCUMENT_ID}#${pointer}`);
    if (!validator) return `no schema at #${pointer}`;
    if (validator(value)) return null;
    return ajv.errorsText(validator.errors, { dataVar: 'value' });
  }

  /** What the document says about this request's response, or why it says nothing. */
  function expect(method: string, path: string, status: number): Expected | string {
    const underBase = path === basePath || path.startsWith(`${basePath}/`);
    if (!underBase) return outsideBase(method, path, status);
    const relative = path.slice(basePath.length);
    const match = templates.find(({ pattern }) => pattern.test(relative));
    if (!match) {
      const name = status === 404 ? 'NotFound' : BEFORE_ROUTING[status];
      if (!name) return `${status} for a path that no operation has (only 404, or an answer before routing: ${Object.keys(BEFORE_ROUTING).join(', ')})`;
      return sharedResponse(name, 'a path that no operation has');
    }
    const itemPointer = `/paths/${escapePointer(match.template)}`;
    const item = resolve(itemPointer).object;
    const lower = method.toLowerCase();
    const operationMethod = item[lower] ? lower : lower === 'head' && item.get ? 'get' : null;
    if (operationMethod === null) {
      const name = status === 405 ? 'MethodNotAllowed' : BEFORE_ROUTING[status];
      if (!name) return `${status} for ${method} on ${match.template}, which has no such operation (only 405, or an answer before routing)`;
      return sharedResponse(name, `${method} ${match.template} is no operation`);
    }
    const operationPointer = `${itemPointer}/${operationMethod}`;
    const responses = (item[operationMethod] as Json).responses as Json;
    const key = [String(status), `${String(status)[0]}XX`, 'default'].find((candidate) => responses[candidate] !== undefined);
    if (key === undefined) {
      return `${status} is not a response of ${operationMethod.toUpperCase()} ${match.template} (described: ${Object.keys(responses).join(', ')})`;
    }
    const what = `${operationMethod.toUpperCase()} ${match.template}`;
    return {
      described: resolve(`${operationPointer}/responses/${escapePointer(key)}`),
      what: `${what} ${key}`,
      ...(key === 'default' ? { unlisted: `${status} is not a response of ${what} (described: ${Object.keys(responses).join(', ')}), and its default does not fit it` } : {}),
    };
  }

  function outsideBase(method: string, path: string, status: number): Expected | string {
    const notLimited = (name: string) => name.startsWith('x-ratelimit-') || name.startsWith('ratelimit');
    if (status === 503) return { ...sharedResponse('Unavailable', 'shutting down'), optionalHeaders: notLimited };
    // GET and HEAD of these pages are never limited; any other request outside /v1 is.
    const page = OUTSIDE_PAGES[path];
    if (page !== undefined && (method === 'GET' || method === 'HEAD')) {
      if (status !== 200) return `${status} for ${method} ${path}, which answers 200`;
      // Described in info.description or the contract only (see the comment at the top); the
      // common headers are the document's.
      const every = ['X-Request-Id', 'Cache-Control', 'X-Content-Type-Options', ...CORS_HEADERS];
      return {
        described: { pointer: '', object: { headers: Object.fromEntries(every.map((name) => [name, { $ref: `#/components/headers/${name}` }])) } },
        what: `GET ${path} (outside the API)`,
        ...page,
      };
    }
    if (OUTSIDE_PATHS.has(path) && status === 405) return sharedResponse('MethodNotAllowed', `${method} ${path}`);
    if (status === 404) return sharedResponse('NotFound', 'a path outside the API');
    if (status === 429) return sharedResponse('TooManyRequests', 'a path outside the API, limited per address');
    return `${status} for ${method} ${path}, outside the API (only 404, 405 on ${[...OUTSIDE_PATHS].join(' or ')}, 429, or 503)`;
  }

  function checkHeaders(expected: Expected, response: Response, allow: string | null): string[] {
    const problems: string[] = [];
    const described = new Map<string, Located & { name: string }>();
    for (const [name, header] of Object.entries((expected.described.object.headers ?? {}) as Json)) {
      const pointer = `${expected.described.pointer}/headers/${escapePointer(name)}`;
      const located = header.$ref ? resolve(header.$ref.slice(1)) : { pointer, object: header as Json };
      described.set(name.toLowerCase(), { ...located, name });
    }
    for (const [name, value] of response.headers) {
      if (TRANSPORT_HEADERS.has(name) || expected.pageHeaders?.has(name)) continue;
      const header = described.get(name);
      if (!header) {
        problems.push(`header ${name}: ${JSON.stringify(value)} is not described`);
        continue;
      }
      const schema = header.object.schema as Json;
      // Header values are text; an integer header must be plain decimal digits.
      const typed = (schema.type === 'integer' || schema.type === 'number') && /^-?[0-9]+$/.test(value) ? Number(value) : value;
      const problem = validate(`${header.pointer}/schema`, typed);
      if (problem) problems.push(`header ${header.name}: ${JSON.stringify(value)} does not match #${header.pointer}/schema: ${problem}`);
    }
    for (const [name, header] of described) {
      if (header.object.required === true && !response.headers.has(name) && !expected.optionalHeaders?.(name)) {
        problems.push(`header ${header.name} is required (#${header.pointer}) but missing`);
      }
    }
    if (allow !== null && response.headers.get('allow') !== allow) {
      problems.push(`Allow is ${JSON.stringify(response.headers.get('allow'))}, the document's operations give ${JSON.stringify(allow)}`);
    }
    return problems;
  }

  function checkBody(expected: Expected, response: Response, text: string, head: boolean): string[] {
    if (head) return text === '' ? [] : ['a HEAD response has a body'];
    const content = expected.described.object.content as Json | undefined;
    if (expected.bodyText !== undefined) {
      const problem = expected.bodyText(text, (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase());
      return problem === null ? [] : [`${problem} (${expected.what})`];
    }
    if (content === undefined && expected.body === undefined) return text === '' ? [] : [`body ${JSON.stringify(text.slice(0, 200))} is not described`];
    const mediaType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (content !== undefined && content[mediaType] === undefined) {
      return [`Content-Type ${JSON.stringify(response.headers.get('content-type'))} is not one of ${Object.keys(content).join(', ')}`];
    }
    if (expected.body !== undefined && mediaType !== 'application/json') return [`Content-Type ${mediaType} is not application/json`];
    // A stream is never read here: it does not end. Its frames are the tests' own business.
    if (mediaType === 'text/event-stream') return [];
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return [`body ${JSON.stringify(text.slice(0, 200))} is not JSON`];
    }
    const problem = expected.body
      ? expected.body(value)
      : validate(`${expected.described.pointer}/content/${escapePointer(mediaType)}/schema`, value);
    return problem ? [`body ${JSON.stringify(text.slice(0, 300))} does not match the schema of ${expected.what}: ${problem}`] : [];
  }

  /**
   * The `Allow` a 405 must carry: the path's operations in the document's order, with HEAD right
   * after GET, as the router lists them (docs/api.md: `GET, HEAD, PATCH, DELETE` on a pet).
   */
  function allowFor(path: string): string | null {
    const relative = path.slice(basePath.length);
    const match = templates.find(({ pattern }) => pattern.test(relative));
    if (!match) return OUTSIDE_PATHS.has(path) ? 'GET, HEAD' : null;
    const item = document.paths[match.template] as Json;
    const methods = Object.keys(item).filter((method) => METHODS.includes(method)).map((method) => method.toUpperCase());
    return methods.flatMap((method) => (method === 'GET' ? ['GET', 'HEAD'] : [method])).join(', ');
  }

  return {
    async check({ method, url }, response) {
      const upper = method.toUpperCase();
      const { pathname, search } = new URL(url);
      const label = `${upper} ${pathname}${search} -> ${response.status}`;
      const streamed = (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
      const text = streamed ? '' : await response.text();
      const expected = expect(upper, pathname, response.status);
      const problems = typeof expected === 'string'
        ? [expected]
        : [
            ...checkHeaders(expected, response, response.status === 405 ? allowFor(pathname) : null),
            ...checkBody(expected, response, text, upper === 'HEAD'),
          ];
      if (problems.length > 0) {
        if (typeof expected !== 'string' && expected.unlisted) problems.unshift(expected.unlisted);
        const against = typeof expected === 'string' ? 'nothing in the document' : expected.what;
        throw new Error(`Response not described by the OpenAPI document: ${label} (checked against ${against})\n  - ${problems.join('\n  - ')}`);
      }
    },
  };
}

const checkers = new Map<string, ConformanceChecker>();

/** The checker for a document text, built once per distinct document. */
export function conformanceChecker(documentText: string): ConformanceChecker {
  let checker = checkers.get(documentText);
  if (!checker) checkers.set(documentText, (checker = createConformanceChecker(documentText)));
  return checker;
}
