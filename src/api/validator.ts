/**
 * Interprets the schema objects of schemas.ts. The problems are collected so that one message
 * names every bad field, up to MAX_NAMED_PROBLEMS (the others are counted), then one ApiError is
 * thrown with the caller's code. Each check costs time linear in the input and each message is
 * bounded, whatever the client sends: a query or a body of thousands of names is one pass over
 * them and a message of a few hundred bytes.
 */
import { httpError } from '../http/api-error.ts';
import { quote } from '../lib/quote.ts';
import { apiError } from './errors.ts';
import {
  INT64_MAX, INT64_MIN, MOST_QUERY_PARAMETERS, type IntegerSchema, type ListSchema, type ObjectSchema, type Parameter, type PropertySchema,
  type StringArraySchema, type StringSchema,
} from './schemas.ts';

/** The most problems one message names; the others are counted ("and 12 more"). */
export const MAX_NAMED_PROBLEMS = 5;

/** The problems of one request, in the order found: the first few kept, all counted. */
interface Problems {
  readonly named: string[];
  count: number;
}

/** Counts a problem; its text is made only when it is among the first few, which are named. */
function add(problems: Problems, problem: () => string): void {
  if (problems.count++ < MAX_NAMED_PROBLEMS) problems.named.push(problem());
}

/**
 * The problems of `lists`, in that order, as a message names them: the first MAX_NAMED_PROBLEMS,
 * then how many more there were (when `counted`: a pass that stopped early does not know).
 */
function listed(lists: readonly Problems[], counted = true): string {
  const first = lists.flatMap((list) => list.named).slice(0, MAX_NAMED_PROBLEMS);
  const more = lists.reduce((sum, list) => sum + list.count, 0) - first.length;
  return `${first.join('; ')}${more > 0 && counted ? `; and ${more} more` : ''}`;
}

/** Query and path integers: an optional minus and decimal digits (leading zeros allowed). */
const DECIMAL = /^-?[0-9]+$/;

const patterns = new Map<string, RegExp>();
function compiled(pattern: string): RegExp {
  let regexp = patterns.get(pattern);
  if (!regexp) patterns.set(pattern, (regexp = new RegExp(pattern, 'u')));
  return regexp;
}

/** Describes what a schema accepts, for messages: "an integer from 1 to 100". */
function expected(schema: StringSchema | IntegerSchema | ListSchema | StringArraySchema): string {
  if (schema.type === 'array' && 'minItems' in schema) {
    return `an array of ${schema.minItems} to ${schema.maxItems}${schema.uniqueItems ? ' distinct' : ''} items, each ${expected(schema.items)}`;
  }
  if (schema.type === 'array') return `a comma-separated list of 1 to ${schema.maxItems} items, each ${expected(schema.items)}`;
  if (schema.type === 'string') {
    if (schema.enum) return `one of ${schema.enum.join(', ')}`;
    const { minLength: min = 0, maxLength: max } = schema;
    const length = max === undefined ? (min > 0 ? ` of at least ${min} characters` : '') : ` of ${min} to ${max} characters`;
    return schema.pattern ? `a string${length} with a visible character and no control characters` : `a string${length}`;
  }
  const min = schema.minimum ?? (schema.format === 'int64' ? INT64_MIN : undefined);
  const max = schema.maximum ?? (schema.format === 'int64' ? INT64_MAX : undefined);
  if (min !== undefined && max !== undefined) return `an integer from ${min} to ${max}`;
  if (min !== undefined) return `an integer of at least ${min}`;
  return 'an integer';
}

function countCodePoints(value: string): number {
  let count = 0;
  for (let i = 0; i < value.length; i++) {
    const unit = value.charCodeAt(i);
    // A high surrogate followed by a low one is one code point (lone ones are refused earlier).
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < value.length) i++;
    count++;
  }
  return count;
}

/** True when `value` satisfies a string schema. */
function checkString(value: unknown, schema: StringSchema): value is string {
  if (typeof value !== 'string' || !value.isWellFormed()) return false;
  if (schema.enum) return schema.enum.includes(value);
  if (schema.minLength !== undefined || schema.maxLength !== undefined) {
    const points = countCodePoints(value);
    if (schema.minLength !== undefined && points < schema.minLength) return false;
    if (schema.maxLength !== undefined && points > schema.maxLength) return false;
  }
  return schema.pattern === undefined || compiled(schema.pattern).test(value);
}

/** Checks an integer that is already a bigint or number against the schema's bounds. */
function checkBounds(value: bigint, schema: IntegerSchema): boolean {
  if (schema.format === 'int64' && (value < INT64_MIN || value > INT64_MAX)) return false;
  if (schema.minimum !== undefined && value < BigInt(schema.minimum)) return false;
  if (schema.maximum !== undefined && value > BigInt(schema.maximum)) return false;
  return true;
}

/**
 * Validates a parsed JSON body against an object schema and returns it with defaults applied.
 * Integers must be bigints: the body parser turns integer literals into bigints and leaves
 * `1.0` or `1e2` as numbers, which is how "plain decimal digits only" is enforced.
 */
export function validateBody(value: unknown, schema: ObjectSchema): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw httpError('invalid_body', 'The body must be a JSON object.');
  }
  const problems: Problems = { named: [], count: 0 };
  const input = value as Record<string, unknown>;
  const output: Record<string, unknown> = {};
  // The schema's own fields first: with thousands of unknown properties, a bad field is still named.
  for (const [name, field] of Object.entries(schema.properties)) {
    if (!Object.hasOwn(input, name)) {
      if (schema.required.includes(name)) add(problems, () => `${name} is required`);
      else if (field.default !== undefined) output[name] = field.default;
      continue;
    }
    const fieldValue = input[name];
    const ok = field.type === 'string'
      ? checkString(fieldValue, field)
      : field.type === 'array'
        ? checkArray(fieldValue, field)
        : typeof fieldValue === 'bigint' && checkBounds(fieldValue, field);
    if (ok) output[name] = fieldValue;
    else add(problems, () => `${name} must be ${expected(field)}${describe(fieldValue, field)}`);
  }
  for (const key of Object.keys(input)) {
    if (!Object.hasOwn(schema.properties, key)) add(problems, () => `${quote(key)} is not a known property`);
  }
  if (problems.count > 0) throw httpError('invalid_body', `Invalid body: ${listed([problems])}.`);
  return output;
}

/**
 * True when `value` is an array of `minItems` to `maxItems` strings of `items`, each once if
 * `uniqueItems`. Its length is checked first, so that a body of thousands of items costs nothing more.
 */
function checkArray(value: unknown, schema: StringArraySchema): value is string[] {
  if (!Array.isArray(value) || value.length < schema.minItems || value.length > schema.maxItems) return false;
  if (!value.every((item) => checkString(item, schema.items))) return false;
  return !schema.uniqueItems || new Set(value).size === value.length;
}

/** Says why a value of the right kind was still wrong, where the schema alone would not. */
function describe(value: unknown, field: PropertySchema): string {
  if (field.type === 'array') {
    if (!Array.isArray(value) || value.length > field.maxItems) return value === null ? ', not null' : '';
    if (value.length < field.minItems) return ', not an empty array';
    const repeated = value.find((item, index) => typeof item === 'string' && value.indexOf(item) !== index);
    if (field.uniqueItems && repeated !== undefined && value.every((item) => checkString(item, field.items))) return ` (${quote(repeated as string)} is repeated)`;
    return '';
  }
  if (field.type === 'integer') {
    if (typeof value === 'number') return ' written as plain digits (no fraction or exponent)';
    if (typeof value === 'string') return ', not a string';
  }
  if (field.type === 'string' && typeof value === 'string' && !value.isWellFormed()) return ' (no lone surrogates)';
  if (value === null) return ', not null';
  return '';
}

/**
 * Validates query parameters (a URLSearchParams) against parameter objects: an unknown or
 * repeated parameter, or a bad value, is an error naming the parameter. Returns the typed values,
 * with defaults applied: integers as numbers, or as bigints for `format: int64`.
 *
 * One pass over the names, each looked up in a Map and a Set, so the cost is linear in the query.
 * A query with more parameters than any operation takes is refused early: only its first few
 * names are read (enough to name some of its problems) and none of its values.
 */
export function validateQuery(query: URLSearchParams, parameters: readonly Parameter[]): Record<string, unknown> {
  const known = parametersByName(parameters);
  const tooMany = query.size > MOST_QUERY_PARAMETERS;
  // The first value of each of this operation's parameters, and how often it was sent.
  const sent = new Map<string, { value: string; times: number }>();
  const unknown = new Set<string>();
  const strangers: Problems = { named: [], count: 0 };
  let read = 0;
  for (const [name, value] of query) {
    // Past this many names, some are certainly repeated or unknown, and enough are read to name a few.
    if (tooMany && read++ === MOST_QUERY_PARAMETERS + MAX_NAMED_PROBLEMS) break;
    if (known.has(name)) {
      const entry = sent.get(name);
      if (entry === undefined) sent.set(name, { value, times: 1 });
      else entry.times++;
    } else if (!unknown.has(name)) {
      unknown.add(name);
      add(strangers, () => `${quote(name)} is not a known parameter`);
    }
  }
  // This operation's own parameters first: with thousands of unknown names, a bad one is still named.
  const problems: Problems = { named: [], count: 0 };
  if (tooMany) {
    for (const [name, { times }] of sent) if (times > 1) add(problems, () => `${quote(name)} is repeated`);
    throw apiError('invalid_query', `${query.size} parameters, more than any operation takes (${MOST_QUERY_PARAMETERS}): ${listed([problems, strangers], false)}`);
  }
  const output: Record<string, unknown> = {};
  for (const parameter of parameters) {
    const entry = sent.get(parameter.name);
    if (entry === undefined) {
      if (parameter.required) add(problems, () => `${parameter.name} is required`);
      else if (parameter.schema.type !== 'array' && parameter.schema.default !== undefined) output[parameter.name] = parameter.schema.default;
    } else if (entry.times > 1) {
      add(problems, () => `${quote(parameter.name)} is repeated`);
    } else {
      const value = parseParameter(entry.value, parameter.schema);
      if (value === undefined) add(problems, () => `${parameter.name} must be ${expected(parameter.schema)}`);
      else output[parameter.name] = value;
    }
  }
  if (problems.count + strangers.count > 0) throw apiError('invalid_query', listed([problems, strangers]));
  return output;
}

const byName = new WeakMap<readonly Parameter[], ReadonlyMap<string, Parameter>>();
/** The parameters of an operation by name, made once per list. */
function parametersByName(parameters: readonly Parameter[]): ReadonlyMap<string, Parameter> {
  let map = byName.get(parameters);
  if (map === undefined) byName.set(parameters, (map = new Map(parameters.map((parameter) => [parameter.name, parameter]))));
  return map;
}

/** Validates path parameters captured by the router; a bad one is `invalid_path`. */
export function validatePath(params: Record<string, string>, parameters: readonly Parameter[]): Record<string, unknown> {
  const output: Record<string, unknown> = {};
  const problems: Problems = { named: [], count: 0 };
  for (const parameter of parameters) {
    const value = parseParameter(params[parameter.name] ?? '', parameter.schema);
    if (value === undefined) add(problems, () => `${parameter.name} must be ${expected(parameter.schema)}`);
    else output[parameter.name] = value;
  }
  if (problems.count > 0) throw apiError('invalid_path', listed([problems]));
  return output;
}

/** Turns the text of a query or path parameter into its typed value, or `undefined`. */
function parseParameter(raw: string, schema: StringSchema | IntegerSchema | ListSchema): unknown {
  if (schema.type === 'array') return parseList(raw, schema);
  if (schema.type === 'string') return checkString(raw, schema) ? raw : undefined;
  // At most 19 digits after leading zeros: anything longer is out of int64 before BigInt runs.
  if (!DECIMAL.test(raw) || raw.replace(/^-?0+(?=\d)/, '').length > 20) return undefined;
  const value = BigInt(raw);
  if (!checkBounds(value, schema)) return undefined;
  return schema.format === 'int64' ? value : Number(value);
}

/**
 * A comma-separated list (`a,b`): 1 to `maxItems` items, each valid for `items`. Counted before it
 * is split, so that a value of a million commas costs one pass, not a million items.
 */
function parseList(raw: string, schema: ListSchema): unknown[] | undefined {
  let commas = 0;
  for (let at = raw.indexOf(','); at !== -1; at = raw.indexOf(',', at + 1)) if (++commas >= schema.maxItems) return undefined;
  const values: unknown[] = [];
  for (const item of raw.split(',')) {
    const value = parseParameter(item, schema.items);
    if (value === undefined) return undefined;
    values.push(value);
  }
  return values;
}
