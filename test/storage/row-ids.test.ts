import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rowId } from '../../src/storage/row-ids.ts';

test('an id up to 2^53 - 1 is the number it reads as, from a number, text or a bigint', () => {
  assert.equal(rowId(1), 1);
  assert.equal(rowId('9007199254740991'), Number.MAX_SAFE_INTEGER);
  assert.equal(rowId(9_007_199_254_740_991n), Number.MAX_SAFE_INTEGER);
});

test('an id from 2^53 on is refused, whatever form it comes in, rather than rounded', () => {
  // 2^53 + 1 reads as 2^53 in a double: the neighbour's id.
  for (const value of ['9007199254740992', '9007199254740993', 2 ** 53, 2n ** 53n + 1n, '9223372036854775807']) {
    assert.throws(() => rowId(value), RangeError, String(value));
  }
  assert.throws(() => rowId('not a number'), RangeError);
});
