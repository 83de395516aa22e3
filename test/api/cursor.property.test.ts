/**
 * Properties of the list cursor over hostile input: any text decodes to a position
 * this service could have issued, or is `invalid_query`; a position round-trips.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ApiError } from '../../src/http/api-error.ts';
import { decodeCursor, encodeCursor } from '../../src/api/cursor.ts';
import { anyCodePoint, INT64_MAX, settings } from '../support/property.ts';

test('any text is a cursor this service issued (and then re-encodes to itself) or invalid_query', () => {
  const nearCursor = fc.oneof(
    fc.string({ unit: anyCodePoint, maxLength: 70 }),
    fc.base64String({ maxLength: 40 }),
    fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map((id) => Buffer.from(`after:${id}`).toString('base64url')),
    fc.tuple(fc.bigInt({ min: 0n, max: INT64_MAX }), fc.string({ maxLength: 3 })).map(([id, junk]) => encodeCursor(id) + junk),
    fc.stringMatching(/^[A-Za-z0-9_=+/-]{0,40}$/),
  );
  fc.assert(
    fc.property(nearCursor, (cursor) => {
      let id: bigint | undefined;
      try {
        id = decodeCursor(cursor);
      } catch (error) {
        if (!(error instanceof ApiError && error.code === 'invalid_query')) throw error;
        return;
      }
      assert.ok(id >= 0n && id <= INT64_MAX);
      assert.equal(encodeCursor(id), cursor);
    }),
    settings(1500),
  );
});

test('every position from 0 to 2^63 - 1 round-trips', () => {
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: INT64_MAX }), (id) => {
      assert.equal(decodeCursor(encodeCursor(id)), id);
    }),
    settings(2000),
  );
});
