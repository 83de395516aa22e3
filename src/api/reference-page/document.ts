/**
 * Reading an OpenAPI 3.1 document as the reference page needs it: references followed, operations
 * in the order a reader wants them, and every error code with the operations that can answer it.
 * Nothing here knows an operation, a path or a code by name: the page shows what the document says.
 */

/** A JSON object of the document; shapes are checked where they are read. */
export type Json = { readonly [key: string]: unknown };

export const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);
export const objectAt = (value: unknown, key: string): Json => (isObject(value) && isObject(value[key]) ? value[key] : {});
export const stringAt = (value: unknown, key: string): string | undefined =>
  isObject(value) && typeof value[key] === 'string' ? value[key] : undefined;
export const arrayAt = (value: unknown, key: string): readonly unknown[] => (isObject(value) && Array.isArray(value[key]) ? value[key] : []);

/** The HTTP methods an OpenAPI path item may hold, in the order a reader meets them. */
const METHODS = ['get', 'post', 'put', 'patch', 'delete', 'options', 'head', 'trace'] as const;

export interface OperationEntry {
  method: string;
  /** The path as the document writes it, relative to the base address. */
  path: string;
  operationId: string;
  operation: Json;
  /** The path item's parameters followed by the operation's own (OpenAPI: the operation's win). */
  parameters: Json[];
  deprecated: boolean;
}

export interface OperationGroup {
  tag: string;
  description: string | undefined;
  operations: OperationEntry[];
}

/** The name of the component a `$ref` points to (`#/components/schemas/Pet` is `Pet`), if any. */
export function refName(value: unknown): string | undefined {
  const ref = stringAt(value, '$ref');
  return ref === undefined ? undefined : decodeURIComponent(ref.slice(ref.lastIndexOf('/') + 1)).replaceAll('~1', '/').replaceAll('~0', '~');
}

/** Follows local `$ref`s (JSON pointers into the document) until a plain object. */
export function resolve(document: Json, value: unknown): Json {
  let current = value;
  for (let hops = 0; hops < 32; hops++) {
    const ref = stringAt(current, '$ref');
    if (ref === undefined) return isObject(current) ? current : {};
    if (!ref.startsWith('#/')) throw new Error(`the reference page follows local references only, not ${ref}`);
    current = ref
      .slice(2)
      .split('/')
      .map((segment) => decodeURIComponent(segment).replaceAll('~1', '/').replaceAll('~0', '~'))
      .reduce<unknown>((node, segment) => (isObject(node) ? node[segment] : undefined), document);
    if (current === undefined) throw new Error(`broken reference ${ref}`);
  }
  throw new Error('reference cycle');
}

function parametersOf(document: Json, pathItem: Json, operation: Json): Json[] {
  const byKey = new Map<string, Json>();
  for (const parameter of [...arrayAt(pathItem, 'parameters'), ...arrayAt(operation, 'parameters')]) {
    const resolved = resolve(document, parameter);
    byKey.set(`${stringAt(resolved, 'in')}:${stringAt(resolved, 'name')}`, resolved);
  }
  return [...byKey.values()];
}

/**
 * Operations grouped by their first tag, groups in the order of the document's `tags` (then any
 * other tag, then untagged ones). Within a group: what a reader uses first, so operations that
 * are not deprecated before deprecated ones, then the document's order of paths, then methods in
 * the order read, create, replace, change, delete.
 */
export function operationGroups(document: Json): OperationGroup[] {
  const entries: OperationEntry[] = [];
  const pathOrder = new Map<string, number>();
  for (const [path, pathItem] of Object.entries(objectAt(document, 'paths'))) {
    pathOrder.set(path, pathOrder.size);
    for (const method of METHODS) {
      const operation = objectAt(pathItem, method);
      if (Object.keys(operation).length === 0) continue;
      entries.push({
        method: method.toUpperCase(),
        path,
        operationId: stringAt(operation, 'operationId') ?? `${method}-${path}`,
        operation,
        parameters: parametersOf(document, isObject(pathItem) ? pathItem : {}, operation),
        deprecated: operation.deprecated === true,
      });
    }
  }
  const rank = (entry: OperationEntry) => [
    entry.deprecated ? 1 : 0,
    pathOrder.get(entry.path)!,
    METHODS.indexOf(entry.method.toLowerCase() as (typeof METHODS)[number]),
  ];
  entries.sort((a, b) => {
    const [ra, rb] = [rank(a), rank(b)];
    for (let i = 0; i < ra.length; i++) if (ra[i] !== rb[i]) return ra[i]! - rb[i]!;
    return 0;
  });

  const declared = arrayAt(document, 'tags').filter(isObject);
  const groups = new Map<string, OperationGroup>();
  for (const tag of declared) {
    const name = stringAt(tag, 'name');
    if (name !== undefined) groups.set(name, { tag: name, description: stringAt(tag, 'description'), operations: [] });
  }
  for (const entry of entries) {
    const tag = arrayAt(entry.operation, 'tags').find((name) => typeof name === 'string') ?? 'other';
    if (!groups.has(tag)) groups.set(tag, { tag, description: undefined, operations: [] });
    groups.get(tag)!.operations.push(entry);
  }
  return [...groups.values()].filter((group) => group.operations.length > 0);
}

/**
 * The error codes an error response can carry, each with its status, read from its narrowed
 * schema: one narrowing, or a `oneOf` of them when the response has several statuses (the
 * `default` response of what the HTTP server answers itself).
 */
export function responseErrors(document: Json, response: unknown): { code: string; status: number | undefined }[] {
  const schema = resolve(document, objectAt(objectAt(objectAt(resolve(document, response), 'content'), 'application/json'), 'schema'));
  const narrowed = (part: unknown) => {
    const properties = objectAt(part, 'properties');
    const status = objectAt(properties, 'status').const;
    const codes = arrayAt(objectAt(properties, 'code'), 'enum').filter((code) => typeof code === 'string');
    return codes.map((code) => ({ code, status: typeof status === 'number' ? status : undefined }));
  };
  for (const part of [schema, ...arrayAt(schema, 'allOf')]) {
    if (refName(part) !== undefined) continue;
    const errors = [part, ...arrayAt(part, 'oneOf')].flatMap(narrowed);
    if (errors.length > 0) return errors;
  }
  return [];
}

export interface ErrorCodeEntry {
  code: string;
  status: number | undefined;
  /** Operations whose responses can carry the code. */
  operations: OperationEntry[];
  /** Shared responses (components) that carry it and that no operation refers to, by description. */
  elsewhere: string[];
}

/**
 * Every code of the `Error` schema's enum, in its order, with its status and the operations that
 * can answer it; a code that only a shared response no operation refers to carries (a path or
 * method that has no operation) comes with that response's description.
 */
export function errorCodes(document: Json, groups: readonly OperationGroup[]): ErrorCodeEntry[] {
  const components = objectAt(objectAt(document, 'components'), 'responses');
  const errorSchema = objectAt(objectAt(objectAt(document, 'components'), 'schemas'), 'Error');
  const entries = new Map<string, ErrorCodeEntry>();
  for (const code of arrayAt(objectAt(objectAt(errorSchema, 'properties'), 'code'), 'enum')) {
    if (typeof code === 'string') entries.set(code, { code, status: undefined, operations: [], elsewhere: [] });
  }
  const referenced = new Set<string>();
  const note = (response: unknown, each: (entry: ErrorCodeEntry) => void) => {
    for (const { code, status } of responseErrors(document, response)) {
      const entry = entries.get(code);
      if (entry === undefined) continue;
      entry.status ??= status;
      each(entry);
    }
  };
  for (const operation of groups.flatMap((group) => group.operations)) {
    for (const response of Object.values(objectAt(operation.operation, 'responses'))) {
      const name = refName(response);
      if (name !== undefined) referenced.add(name);
      note(response, (entry) => {
        if (!entry.operations.includes(operation)) entry.operations.push(operation);
      });
    }
  }
  for (const [name, response] of Object.entries(components)) {
    if (!referenced.has(name)) note(response, (entry) => entry.elsewhere.push(stringAt(response, 'description') ?? name));
  }
  return [...entries.values()];
}
