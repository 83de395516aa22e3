import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../../src/http/api-error.ts';
import { decodeCursor, encodeCursor } from '../../src/api/cursor.ts';

test('a cursor round-trips its position', () => {
  for (const id of [0n, 1n, 42n, 9223372036854775807n]) assert.equal(decodeCursor(encodeCursor(id)), id);
});

test('anything the service did not issue is invalid_query', () => {
  const forged = [
    '', 'x', '!!!!', encodeCursor(1n) + 'A', Buffer.from('after:-1').toString('base64url'), Buffer.from('after:01').toString('base64url'),
    Buffer.from('after:9223372036854775808').toString('base64url'), Buffer.from('before:1').toString('base64url'), Buffer.from('after:1').toString('base64'),
  ];
  for (const cursor of forged) {
    assert.throws(() => decodeCursor(cursor), (error: unknown) => error instanceof ApiError && error.code === 'invalid_query', cursor);
  }
});
