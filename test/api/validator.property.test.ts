/**
 * Properties of the query and path validators over hostile input: any query string or
 * path segment gives typed values or `invalid_query` / `invalid_path`, never another error, and
 * exactly the values the contract allows get through.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ApiError } from '../../src/http/api-error.ts';
import { validatePath, validateQuery } from '../../src/api/validator.ts';
import { getPetParameters, listPetsParameters } from '../../src/api/schemas.ts';
import { anyCodePoint, INT64_MAX, settings } from '../support/property.ts';

function outcome<T>(action: () => T): { value: T } | { code: string } {
  try {
    return { value: action() };
  } catch (error) {
    if (error instanceof ApiError) return { code: error.code };
    throw error;
  }
}

/** Text that looks like a number more often than chance would make it. */
const numericText = fc.oneof(
  fc.stringMatching(/^-?0*[0-9]{0,22}$/),
  fc.constantFrom('', '-', '+1', '1.0', '1e2', ' 1', '1 ', '0x10', '１', '٣', '-0', '00', '9223372036854775807', '9223372036854775808', '-9223372036854775808', '-9223372036854775809'),
  fc.string({ unit: anyCodePoint, maxLength: 30 }),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
);

/** A raw query string: real parameter names, near misses, separators and percent escapes. */
const queryString = fc
  .array(
    fc.tuple(
      fc.oneof(fc.constantFrom('limit', 'status', 'cursor', 'LIMIT', 'limit ', 'lim%69t', 'offset', ''), fc.string({ maxLength: 8 })),
      fc.oneof(numericText, fc.constantFrom('available', 'pending', 'sold', 'Sold', 'available%00', '%', '%zz', '%E2%82', '+'), fc.string({ unit: anyCodePoint, maxLength: 70 })),
      fc.boolean(),
    ),
    { maxLength: 5 },
  )
  .map((pairs) => pairs.map(([name, value, bare]) => (bare ? name : `${name}=${value}`)).join('&'));

test('any query string gives the list parameters or invalid_query, never another error', () => {
  fc.assert(
    fc.property(queryString, (search) => {
      const query = new URLSearchParams(search);
      const result = outcome(() => validateQuery(query, listPetsParameters));
      const names = [...query.keys()];
      const expectValid =
        names.every((name) => ['limit', 'status', 'cursor'].includes(name)) &&
        new Set(names).size === names.length &&
        (query.get('limit') === null || (/^[0-9]+$/.test(query.get('limit')!) && BigInt(query.get('limit')!) >= 1n && BigInt(query.get('limit')!) <= 100n)) &&
        (query.get('status') === null || ['available', 'pending', 'sold'].includes(query.get('status')!)) &&
        (query.get('cursor') === null || (query.get('cursor')!.length >= 1 && [...query.get('cursor')!].length <= 64 && query.get('cursor')!.isWellFormed()));
      if (expectValid) {
        assert.ok('value' in result, `${search}: ${JSON.stringify(result)}`);
        const limit = query.get('limit');
        assert.equal(result.value.limit, limit === null ? 20 : Number(limit));
      } else {
        assert.deepEqual(result, { code: 'invalid_query' }, search);
      }
    }),
    settings(3000),
  );
});

test('petId is accepted exactly when it is an optional minus and decimal digits within int64', () => {
  fc.assert(
    fc.property(numericText, (petId) => {
      const result = outcome(() => validatePath({ petId }, getPetParameters));
      const valid = /^-?[0-9]+$/.test(petId) && BigInt(petId) >= -INT64_MAX - 1n && BigInt(petId) <= INT64_MAX;
      if (valid) assert.deepEqual(result, { value: { petId: BigInt(petId) } }, petId);
      else assert.deepEqual(result, { code: 'invalid_path' }, petId);
    }),
    settings(3000),
  );
});

test('a very long run of digits or zeros is refused or read exactly, without a slow BigInt', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 100_000 }), fc.constantFrom('0', '9', '1'), fc.boolean(), (length, digit, withLeadingZeros) => {
      const text = withLeadingZeros ? '0'.repeat(length) + '5' : digit.repeat(length);
      const path = outcome(() => validatePath({ petId: text }, getPetParameters));
      const query = outcome(() => validateQuery(new URLSearchParams({ limit: text }), listPetsParameters));
      const value = BigInt(text);
      assert.deepEqual(path, value <= INT64_MAX ? { value: { petId: value } } : { code: 'invalid_path' });
      if (value >= 1n && value <= 100n) assert.ok('value' in query && query.value.limit === Number(value));
      else assert.deepEqual(query, { code: 'invalid_query' });
    }),
    settings(200),
  );
});
