/**
 * The Idempotency-Key of POST /v1/pets, as the contract defines it: the header's syntax, how long
 * a key is remembered, and what "the same body" means (the same fields with the same values, in
 * any order), reduced to a fingerprint that can be stored and compared.
 */
import type { ApiError } from '../http/api-error.ts';
import { apiError } from './errors.ts';
import { createPetParameters } from './schemas.ts';

const { createHash } = process.getBuiltinModule('node:crypto');

/**
 * The header's syntax comes from the schema that the OpenAPI document publishes, so the two
 * cannot drift: 1 to 255 visible ASCII characters (`!` to `~`), bare or in double quotes.
 */
const HEADER_SYNTAX = new RegExp(
  (createPetParameters.find((parameter) => parameter.name === 'Idempotency-Key')!.schema as { pattern: string }).pattern,
);

/** A request that carries an Idempotency-Key, as the create operation needs it. */
export interface IdempotentRequest {
  key: string;
  /** `fingerprintBody` of the parsed request body, before defaults are applied. */
  fingerprint: string;
}

/**
 * The key sent in the Idempotency-Key header, or null when there is none. The key may be sent
 * bare or as a quoted string whose quotes are not part of it (`"abc"` is the key `abc`). Empty
 * (`""` included), longer than 255 characters or not visible ASCII: 400 invalid_idempotency_key.
 * A repeated header reaches us joined with ", ", whose space makes it invalid too.
 */
export function parseIdempotencyKey(header: string | string[] | undefined): string | null {
  if (header === undefined) return null;
  if (typeof header !== 'string') throw invalidKey();
  if (!HEADER_SYNTAX.test(header)) throw invalidKey();
  const quoted = header.length >= 2 && header.startsWith('"') && header.endsWith('"');
  return quoted ? header.slice(1, -1) : header;
}

function invalidKey(): ApiError {
  return apiError('invalid_idempotency_key');
}

/**
 * SHA-256 (base64url) of the body in a canonical form: object keys sorted, strings as JSON,
 * integers by their exact digits (the body parser gives bigints). Computed on the body as sent,
 * not after defaults, so an omitted `status` and an explicit "available" differ.
 */
export function fingerprintBody(body: unknown): string {
  return createHash('sha256').update(canonicalJson(body)).digest('base64url');
}

/** One text per JSON value, whatever the order of its object members. */
export function canonicalJson(value: unknown): string {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const members = Object.keys(value)
      .sort()
      .map((name) => `${JSON.stringify(name)}:${canonicalJson((value as Record<string, unknown>)[name])}`);
    return `{${members.join(',')}}`;
  }
  // Strings, finite numbers, booleans and null: JSON.stringify is already canonical for them.
  return JSON.stringify(value);
}
