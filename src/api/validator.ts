/**
 * Interprets the schema objects of schemas.ts. Every problem is collected so that one message
 * names every bad field, then one ApiError is thrown with the caller's code.
 */
import { httpError } from '../http/api-error.ts';
import { apiError } from './errors.ts';
import { INT64_MAX, INT64_MIN, type IntegerSchema, type ListSchema, type ObjectSchema, type Parameter, type StringSchema } from './schemas.ts';

/** Query and path integers: an optional minus and decimal digits (leading zeros allowed). */
const DECIMAL = /^-?[0-9]+$/;

const patterns = new Map<string, RegExp>();
function compiled(pattern: string): RegExp {
  let regexp = patterns.get(pattern);
  if (!regexp) patterns.set(pattern, (regexp = new RegExp(pattern, 'u')));
  return regexp;
}

/** Describes what a schema accepts, for messages: "an integer from 1 to 100". */
function expected(schema: StringSchema | IntegerSchema | ListSchema): string {
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
  const problems: string[] = [];
  const input = value as Record<string, unknown>;
  for (const key of Object.keys(input)) {
    if (!Object.hasOwn(schema.properties, key)) problems.push(`${JSON.stringify(key)} is not a known property`);
  }
  const output: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(schema.properties)) {
    if (!Object.hasOwn(input, name)) {
      if (schema.required.includes(name)) problems.push(`${name} is required`);
      else if (field.default !== undefined) output[name] = field.default;
      continue;
    }
    const fieldValue = input[name];
    const ok = field.type === 'string'
      ? checkString(fieldValue, field)
      : typeof fieldValue === 'bigint' && checkBounds(fieldValue, field);
    if (ok) output[name] = fieldValue;
    else problems.push(`${name} must be ${expected(field)}${describe(fieldValue, field)}`);
  }
  if (problems.length > 0) throw httpError('invalid_body', `Invalid body: ${problems.join('; ')}.`);
  return output;
}

/** Says why a value of the right kind was still wrong, where the schema alone would not. */
function describe(value: unknown, field: StringSchema | IntegerSchema): string {
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
 */
export function validateQuery(query: URLSearchParams, parameters: readonly Parameter[]): Record<string, unknown> {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const name of query.keys()) {
    if (seen.has(name)) {
      if (!problems.some((problem) => problem.startsWith(`${JSON.stringify(name)} is repeated`))) {
        problems.push(`${JSON.stringify(name)} is repeated`);
      }
      continue;
    }
    seen.add(name);
    if (!parameters.some((parameter) => parameter.name === name)) {
      problems.push(`${JSON.stringify(name)} is not a known parameter`);
    }
  }
  const output: Record<string, unknown> = {};
  for (const parameter of parameters) {
    const raw = query.get(parameter.name);
    if (raw === null) {
      if (parameter.required) problems.push(`${parameter.name} is required`);
      else if (parameter.schema.type !== 'array' && parameter.schema.default !== undefined) output[parameter.name] = parameter.schema.default;
      continue;
    }
    if (seen.has(parameter.name) && query.getAll(parameter.name).length > 1) continue;
    const value = parseParameter(raw, parameter.schema);
    if (value === undefined) problems.push(`${parameter.name} must be ${expected(parameter.schema)}`);
    else output[parameter.name] = value;
  }
  if (problems.length > 0) throw apiError('invalid_query', problems.join('; '));
  return output;
}

/** Validates path parameters captured by the router; a bad one is `invalid_path`. */
export function validatePath(params: Record<string, string>, parameters: readonly Parameter[]): Record<string, unknown> {
  const output: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const parameter of parameters) {
    const value = parseParameter(params[parameter.name] ?? '', parameter.schema);
    if (value === undefined) problems.push(`${parameter.name} must be ${expected(parameter.schema)}`);
    else output[parameter.name] = value;
  }
  if (problems.length > 0) throw apiError('invalid_path', problems.join('; '));
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
