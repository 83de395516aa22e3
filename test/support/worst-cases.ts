/**
 * The worst cases of every surface that takes client input, as requests of any size up to the
 * service's caps: the query, the path parameters, the header parameters and the body of every
 * operation of the table (src/api/operations.ts), and the headers and the request target that
 * the service reads on every request. The complexity test sends each at n and 4n bytes, the
 * property tests send them at random sizes and with random pieces.
 *
 * Built from the table and the served OpenAPI document, so a new operation, parameter or body
 * property is covered without a word here, as long as it is of a kind this file knows: an
 * integer or a string parameter, a body object of integer, string and string-array properties, the headers
 * named in HEADER_PARAMETERS. Anything else throws, naming what needs a generator, so that a
 * new surface cannot go unmeasured.
 */
import { BASE_PATH, type OperationSpec } from '../../src/api/operation.ts';
import { OPERATIONS } from '../../src/api/operations.ts';
import type { ObjectSchema, Parameter } from '../../src/api/schemas.ts';

/** An entry of the table with its operationId (the table is keyed by it). */
export type ListedOperation = OperationSpec & { operationId: string };

/** The table's entries as a list, each with its operationId. */
export const LISTED_OPERATIONS: readonly ListedOperation[] = Object.entries(OPERATIONS).map(([operationId, spec]) => ({ operationId, ...spec }));

/** Every request's head must fit in 16 KiB: the part under attack gets this much of it. */
export const HEAD_CAP = 14_000;
/** Every body must fit in 16 KiB. */
export const BODY_CAP = 16_000;

/** A request before it is written as bytes. */
export interface RequestParts {
  method: string;
  /** The path and query, as sent. */
  target: string;
  headers: readonly (readonly [name: string, value: string])[];
  /** Header lines written as they are, each ending in CRLF. */
  rawLines?: string;
  body?: string;
}

/** The `index`-th piece of a worst case; a pair opens and closes, for nesting. */
export type Unit = (index: number) => string | readonly [open: string, close: string];

/** A place where the client's bytes go, and the request that carries them there. */
export interface Surface {
  /** For reports: `query of GET /v1/pets`, `If-Match of PATCH /v1/pets/{petId}`. */
  label: string;
  /** Most bytes the content may have within the service's caps. */
  cap: number;
  /** Where the content goes: which bytes may stand there. */
  kind: 'target' | 'header' | 'body' | 'lines';
  /** The operation it belongs to, whose answers are the ones allowed; null for the service's own headers. */
  operation: ListedOperation | null;
  request(content: string): RequestParts;
}

/** A shape of content: `head`, the units (opening pairs), `middle`, the pairs' closings, `tail`. */
export interface Shape {
  name: string;
  head?: string;
  unit: Unit;
  middle?: string;
  tail?: string;
}

export interface WorstCase {
  surface: Surface;
  shape: Shape;
}

/** What the requests need from the server they go to. */
export interface Fixtures {
  /** A key with every scope. */
  key: string;
  /** The document the server serves (GET /v1/openapi.json), parsed. */
  document: { components: { schemas: Record<string, JsonSchema> } };
  /** Values of path parameters that name a resource the key may change, by parameter name. */
  pathValues: Readonly<Record<string, string>>;
  /** An Origin that CORS_ALLOWED_ORIGINS lists, and a Host that ALLOWED_HOSTS lists. */
  origin: string;
  host: string;
}

interface JsonSchema {
  type?: string;
  $ref?: string;
  enum?: string[];
  pattern?: string;
  maxLength?: number;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean;
}

/** The content of `shape` with as many units as fit in `size` bytes. */
export function fill(shape: Shape, size: number): string {
  const { head = '', middle = '', tail = '' } = shape;
  const opens: string[] = [];
  const closes: string[] = [];
  let bytes = Buffer.byteLength(head + middle + tail);
  for (let index = 0; ; index++) {
    const piece = shape.unit(index);
    const [open, close] = typeof piece === 'string' ? [piece, ''] : piece;
    const more = Buffer.byteLength(open) + Buffer.byteLength(close);
    if (bytes + more > size || more === 0) break;
    opens.push(open);
    closes.push(close);
    bytes += more;
  }
  return head + opens.join('') + middle + closes.reverse().join('') + tail;
}

/** The bytes of a request, closing its connection after the answer. */
export function requestBytes(parts: RequestParts): Buffer {
  const lines = [`${parts.method} ${parts.target} HTTP/1.1`, ...parts.headers.map(([name, value]) => `${name}: ${value}`), 'Connection: close'];
  const body = parts.body === undefined ? null : Buffer.from(parts.body, 'utf8');
  if (body !== null) lines.push(`Content-Length: ${body.length}`);
  const head = Buffer.from(`${lines.join('\r\n')}\r\n${parts.rawLines ?? ''}\r\n`, 'latin1');
  return body === null ? head : Buffer.concat([head, body]);
}

/** The request of a worst case at `size` bytes. */
export function worstRequest({ surface, shape }: WorstCase, size: number): Buffer {
  return requestBytes(surface.request(fill(shape, size)));
}

// --- Shapes -----------------------------------------------------------------------------------

const repeat = (text: string): Unit => () => text;
/** `text(index)` joined by `separator`. */
const list = (separator: string, text: (index: number) => string): Unit => (index) => (index === 0 ? '' : separator) + text(index);

/** Values of a parameter by its schema's kind. */
function valueShapes(parameter: Parameter, prefix: string): Shape[] {
  const { schema } = parameter;
  if (schema.type === 'integer') {
    return [
      { name: `${parameter.name}: leading zeros`, head: prefix, unit: repeat('0'), tail: '999999' },
      { name: `${parameter.name}: thousands of digits`, head: prefix, unit: repeat('9') },
      { name: `${parameter.name}: a minus and zeros`, head: `${prefix}-`, unit: repeat('0') },
      { name: `${parameter.name}: percent-encoded digits`, head: prefix, unit: repeat('%31') },
    ];
  }
  if (schema.type === 'string') {
    if (schema.pattern !== undefined && schema.maxLength === undefined) {
      throw new Error(`${parameter.name}: a pattern without maxLength runs on the whole input; give it a maxLength, or a worst case here`);
    }
    return [
      { name: `${parameter.name}: a long value`, head: prefix, unit: repeat('a') },
      { name: `${parameter.name}: percent-encoded bytes`, head: prefix, unit: repeat('%C3%A9') },
      { name: `${parameter.name}: invalid percent-encoding`, head: prefix, unit: repeat('%FF') },
      { name: `${parameter.name}: separators`, head: prefix, unit: repeat(',;=') },
    ];
  }
  if (schema.type === 'array') {
    return [
      { name: `${parameter.name}: thousands of items`, head: prefix, unit: list(',', (index) => `i${index}`) },
      { name: `${parameter.name}: commas alone`, head: prefix, unit: repeat(',') },
      ...valueShapes({ ...parameter, schema: schema.items }, prefix),
    ];
  }
  throw new Error(`no worst-case generator for parameter ${parameter.name} of type ${(schema as { type: string }).type}`);
}

/** The query of any operation: names repeated, unknown, empty, and each of its own parameters' values. */
function queryShapes(operation: ListedOperation): Shape[] {
  const own = (operation.parameters ?? []).filter((parameter) => parameter.in === 'query');
  const first = own[0]?.name ?? 'limit';
  return [
    { name: 'one name repeated', unit: list('&', () => `${first}=1`) },
    { name: 'distinct unknown names', unit: list('&', (index) => `u${index}=`) },
    { name: 'each name sent twice', unit: list('&', (index) => `n${index >> 1}=`) },
    { name: 'empty pieces', unit: repeat('&') },
    { name: 'one long percent-encoded name', unit: repeat('%41') },
    ...own.flatMap((parameter) => valueShapes(parameter, `${parameter.name}=`)),
  ];
}

/**
 * The headers that are parameters of operations, by name: a new one needs its worst cases here.
 * Each gets hundreds of list elements, one huge element, and the separators alone.
 */
const HEADER_PARAMETERS: Readonly<Record<string, readonly Shape[]>> = {
  'If-Match': [
    // Version 0 is no resource's: no tag here ever matches, so nothing is ever changed or removed.
    { name: 'hundreds of tags', unit: list(', ', (index) => `"${index}.0"`) },
    { name: 'hundreds of weak tags', unit: list(',', (index) => `W/"${index}"`) },
    { name: 'one long tag', head: '"', unit: repeat('x'), tail: '"' },
    { name: 'an unterminated tag', head: '"', unit: repeat('x') },
    { name: 'commas and blanks', head: '"1.0"', unit: repeat(' ,\t') },
  ],
  'Idempotency-Key': [
    { name: 'a long key', unit: repeat('!') },
    { name: 'a long quoted key', head: '"', unit: repeat('k'), tail: '"' },
    { name: 'quotes', unit: repeat('"') },
    { name: 'blanks inside', head: 'k', unit: repeat(' \tk') },
  ],
  // Read only for a stream (HEADERS_THAT_READ_IT): an id of thousands of digits would be a position past int64.
  'Last-Event-ID': [
    { name: 'thousands of digits', unit: repeat('7') },
    { name: 'digits, then a letter', unit: repeat('1'), tail: 'x' },
    { name: 'blanks between digits', head: '1', unit: repeat(' \t'), tail: '1' },
  ],
};

/** The headers without which an operation ignores a header parameter: sent with its worst cases. */
const HEADERS_THAT_READ_IT: Readonly<Record<string, readonly (readonly [string, string])[]>> = {
  'Last-Event-ID': [['Accept', 'text/event-stream']],
};

/** The body schema of an operation: the very object its validator reads (the table's entry). */
function bodySchema(operation: ListedOperation): ObjectSchema {
  const schema: ObjectSchema = operation.requestBody!.schema;
  if (schema.type !== 'object') throw new Error(`no worst-case generator for a body of type ${(schema as { type: string }).type} (${operation.operationId})`);
  return schema;
}

/** The worst cases of a property of a body, by its kind. */
function propertyShapes(name: string, property: { type?: string }): Shape[] {
  const key = JSON.stringify(name);
  const asArray: Shape = { name: `${name}: an array of thousands`, head: `{${key}:[`, unit: list(',', () => '0'), tail: ']}' };
  if (property.type === 'integer') {
    return [
      { name: `${name}: thousands of digits`, head: `{${key}:`, unit: repeat('7'), tail: '}' },
      { name: `${name}: thousands of digits, negative`, head: `{${key}:-`, unit: repeat('7'), tail: '}' },
      { name: `${name}: a fraction of thousands of digits`, head: `{${key}:1.`, unit: repeat('0'), tail: 'e5}' },
      asArray,
    ];
  }
  if (property.type === 'string') {
    return [
      { name: `${name}: a string of escapes`, head: `{${key}:"`, unit: repeat('\\u00e9'), tail: '"}' },
      { name: `${name}: a string of escaped quotes`, head: `{${key}:"`, unit: repeat('\\"'), tail: '"}' },
      { name: `${name}: a long string`, head: `{${key}:"`, unit: repeat('é'), tail: '"}' },
      asArray,
    ];
  }
  if (property.type === 'array') {
    return [
      { name: `${name}: thousands of the same string`, head: `{${key}:[`, unit: list(',', () => '"pet.created"'), tail: ']}' },
      { name: `${name}: thousands of distinct strings`, head: `{${key}:[`, unit: list(',', (index) => `"s${index}"`), tail: ']}' },
      { name: `${name}: one long string`, head: `{${key}:["`, unit: repeat('é'), tail: '"]}' },
      { name: `${name}: nested arrays`, head: `{${key}:`, unit: () => ['[', ']'], tail: '}' },
      { name: `${name}: thousands of nulls`, head: `{${key}:[`, unit: list(',', () => 'null'), tail: ']}' },
    ];
  }
  throw new Error(`no worst-case generator for body property ${name} of type ${property.type ?? JSON.stringify(property)}`);
}

/** A body of any shape, then every property's worst values. */
function bodyShapes(operation: ListedOperation): Shape[] {
  const schema = bodySchema(operation);
  return [
    { name: 'unknown properties', head: '{', unit: list(',', (index) => `"p${index}":0`), tail: '}' },
    { name: 'a repeated name after thousands', head: '{"p":0', unit: (index) => `,"p${index}":0`, tail: ',"p":1}' },
    { name: 'one name repeated', head: '{"p":0', unit: repeat(',"p":0'), tail: '}' },
    { name: 'nested arrays', head: '{"p":', unit: () => ['[', ']'], tail: '}' },
    { name: 'nested objects', unit: () => ['{"p":', '}'], middle: '0' },
    { name: 'a name of escapes', head: '{"', unit: repeat('\\u0041'), tail: '":0}' },
    { name: 'names of escapes', head: '{', unit: list(',', (index) => `"\\u0041${index}":0`), tail: '}' },
    { name: 'an array of numbers', head: '[', unit: list(',', () => '1'), tail: ']' },
    { name: 'an array of objects', head: '[', unit: list(',', () => '{}'), tail: ']' },
    { name: 'blanks', head: '{', unit: repeat(' \n\t'), tail: '}' },
    { name: 'a number of thousands of digits, unknown', head: '{"p":', unit: repeat('1'), tail: '}' },
    ...Object.entries(schema.properties).flatMap(([name, property]) => propertyShapes(name, property)),
  ];
}

/** Every worst case of every operation of the table (or of `operations`), and of the headers every request may carry. */
export function worstCases(fixtures: Fixtures, operations: readonly ListedOperation[] = LISTED_OPERATIONS): WorstCase[] {
  return [...operations.flatMap((operation) => operationCases(operation, fixtures)), ...serviceCases(fixtures)];
}

/**
 * The headers every request of `operation` carries, a body's media type included. A removal is
 * made conditional on an ETag no resource has, so that the fixtures stay.
 */
function baseHeaders(operation: ListedOperation, fixtures: Fixtures): [string, string][] {
  const headers: [string, string][] = [['Host', fixtures.host], ['Authorization', `Bearer ${fixtures.key}`]];
  if (operation.requestBody) headers.push(['Content-Type', operation.requestBody.mediaTypes.types[0]!]);
  if (operation.method === 'DELETE') headers.push(['If-Match', '"0.0"']);
  return headers;
}

/** The path of `operation` with each parameter's fixture, or `content` for the one named. */
function pathOf(operation: ListedOperation, fixtures: Fixtures, name: string | null = null, content = ''): string {
  return BASE_PATH + operation.path.replace(/\{([^}]+)\}/g, (_, parameter: string) => {
    if (parameter === name) return content;
    const value = fixtures.pathValues[parameter];
    if (value === undefined) throw new Error(`no fixture for the path parameter ${parameter} (${operation.operationId})`);
    return value;
  });
}

function operationCases(operation: ListedOperation, fixtures: Fixtures): WorstCase[] {
  const label = `${operation.method} ${BASE_PATH}${operation.path}`;
  const headers = baseHeaders(operation, fixtures);
  // Requests that do not attack the body send one that every body operation refuses quickly.
  const body = operation.requestBody ? '{}' : undefined;
  const base = { method: operation.method, headers, ...(body === undefined ? {} : { body }) };
  const cases: WorstCase[] = [];
  const query: Surface = {
    label: `query of ${label}`, cap: HEAD_CAP, kind: 'target', operation,
    request: (content) => ({ ...base, target: `${pathOf(operation, fixtures)}?${content}` }),
  };
  cases.push(...queryShapes(operation).map((shape) => ({ surface: query, shape })));
  for (const parameter of operation.parameters ?? []) {
    if (parameter.in === 'path') {
      const surface: Surface = {
        label: `${parameter.name} of ${label}`, cap: HEAD_CAP, kind: 'target', operation,
        request: (content) => ({ ...base, target: pathOf(operation, fixtures, parameter.name, content) }),
      };
      cases.push(...valueShapes(parameter, '').map((shape) => ({ surface, shape })));
    } else if (parameter.in === 'header') {
      const shapes = HEADER_PARAMETERS[parameter.name];
      if (shapes === undefined) throw new Error(`no worst-case generator for the header ${parameter.name} (${operation.operationId}): add it to HEADER_PARAMETERS`);
      const surface: Surface = {
        label: `${parameter.name} of ${label}`, cap: HEAD_CAP, kind: 'header', operation,
        request: (content) => ({
          ...base, target: pathOf(operation, fixtures),
          headers: [...headers.filter(([name]) => name !== parameter.name), ...(HEADERS_THAT_READ_IT[parameter.name] ?? []), [parameter.name, content]],
        }),
      };
      cases.push(...shapes.map((shape) => ({ surface, shape })));
    } else if (parameter.in !== 'query') {
      throw new Error(`no worst-case generator for a parameter in ${String(parameter.in)} (${operation.operationId})`);
    }
  }
  if (operation.requestBody) {
    const surface: Surface = {
      label: `body of ${label}`, cap: BODY_CAP, kind: 'body', operation,
      request: (content) => ({ ...base, target: pathOf(operation, fixtures), body: content }),
    };
    cases.push(...bodyShapes(operation).map((shape) => ({ surface, shape })));
  }
  return cases;
}

/** The first operation with this id (the service's own headers are sent to it). */
function operation(id: string): ListedOperation {
  const found = LISTED_OPERATIONS.find((each) => each.operationId === id);
  if (!found) throw new Error(`no operation ${id}`);
  return found;
}

/** The headers and the target every request may carry, whatever its operation. */
function serviceCases(fixtures: Fixtures): WorstCase[] {
  const listing = operation('listPets');
  const create = operation('createPet');
  const change = operation('updatePet');
  const host: [string, string] = ['Host', fixtures.host];
  const key: [string, string] = ['Authorization', `Bearer ${fixtures.key}`];
  const header = (name: string, on: ListedOperation, others: [string, string][], method: string = on.method): Surface => ({
    // A preflight is answered before the operation: any contract answer goes.
    label: `${name} of ${method} ${BASE_PATH}${on.path}`, cap: HEAD_CAP, kind: 'header', operation: method === on.method ? on : null,
    request: (content) => ({
      method, target: pathOf(on, fixtures), headers: [...others, [name, content]],
      ...(on.requestBody && method !== 'OPTIONS' ? { body: '{}' } : {}),
    }),
  });
  const surfaces: [Surface, Shape[]][] = [
    [header('Authorization', listing, [host]), [
      { name: 'a long token', head: 'Bearer ', unit: repeat('A') },
      { name: 'blanks before the token', head: 'Bearer', unit: repeat(' \t'), tail: 'x' },
      { name: 'another scheme', head: 'Basic ', unit: repeat('QUJD') },
      { name: 'no scheme', unit: repeat('b') },
    ]],
    [header('X-Request-Id', listing, [host, key]), [
      { name: 'a long id', unit: repeat('a') },
      { name: 'a long id of separators', unit: repeat('.:-_') },
    ]],
    // Anonymous, so that the client address decides whose limit counts.
    [header('X-Forwarded-For', listing, [host]), [
      { name: 'hundreds of trusted hops', unit: list(', ', (index) => `10.0.${index % 250}.${index % 200}`) },
      { name: 'hundreds of IPv6 hops with ports', unit: list(',', (index) => `[fd00::${(index % 9999).toString(16)}]:443`) },
      { name: 'commas and blanks', unit: repeat(', ') },
      { name: 'one long hop', unit: repeat('9') },
    ]],
    [header('Origin', listing, [host, key]), [
      { name: 'a long origin', head: 'https://', unit: repeat('a') },
      { name: 'an allowed origin, then more', head: fixtures.origin, unit: repeat('a') },
    ]],
    [header('Origin', listing, [host, ['Access-Control-Request-Method', 'GET']], 'OPTIONS'), [
      { name: 'a preflight from a long origin', head: 'https://', unit: repeat('a') },
    ]],
    [header('Content-Type', create, [host, key]), [
      { name: 'blanks after the type', head: 'application/json', unit: repeat(' ') },
      { name: 'hundreds of parameters', head: 'application/json', unit: repeat('; charset=utf-8') },
      { name: 'blanks around the parameter', head: 'application/json;', unit: repeat(' '), tail: 'charset=utf-8' },
    ]],
    [header('Host', listing, [key]), [
      { name: 'a long name', unit: repeat('a') },
      { name: 'a long bracketed name', head: '[', unit: repeat(':'), tail: ']' },
      { name: 'many labels and a port', unit: repeat('a.'), tail: ':80' },
    ]],
    [{
      label: 'header lines of PATCH /v1/pets/{petId}', cap: HEAD_CAP, kind: 'lines', operation: change,
      request: (content) => ({ method: 'PATCH', target: pathOf(change, fixtures), headers: baseHeaders(change, fixtures), rawLines: content, body: '{}' }),
    }, [
      { name: 'hundreds of If-Match lines', unit: (index) => `If-Match: "${index}.0"\r\n` },
      { name: 'hundreds of unknown headers', unit: (index) => `X-Junk-${index}: 1\r\n` },
    ]],
    [{
      label: 'request target', cap: HEAD_CAP, kind: 'target', operation: null,
      request: (content) => ({ method: 'GET', target: content, headers: [host, key] }),
    }, [
      { name: 'a long path under /v1', head: '/v1/', unit: repeat('a/') },
      { name: 'a long path outside /v1', head: '/', unit: repeat('a') },
      { name: 'thousands of segments after a pet', head: '/v1/pets/1', unit: repeat('/') },
      { name: 'percent-encoding', head: '/v1/', unit: repeat('%2F') },
    ]],
  ];
  return surfaces.flatMap(([surface, shapes]) => shapes.map((shape) => ({ surface, shape })));
}
