import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../src/api-error.ts';
import { parseJson } from '../src/request-body.ts';

const bytes = (text: string) => new TextEncoder().encode(text);

test('integer literals become exact bigints; other numbers stay numbers', () => {
  assert.deepEqual(parseJson(bytes('{"a":9223372036854775807,"b":1.0,"c":1e2,"d":-3,"e":[2]}')), {
    a: 9223372036854775807n, b: 1, c: 100, d: -3n, e: [2n],
  });
});

test('invalid UTF-8 and malformed JSON are invalid_json', () => {
  for (const input of [new Uint8Array([0x7b, 0xff, 0x7d]), bytes('{'), bytes(' '), bytes('{"a":1}}')]) {
    assert.throws(() => parseJson(input), (error: unknown) => error instanceof ApiError && error.code === 'invalid_json');
  }
});

test('nesting deep enough to exhaust the stack is invalid_json, not a crash', () => {
  const deep = '['.repeat(100_000) + ']'.repeat(100_000);
  assert.throws(() => parseJson(bytes(deep)), (error: unknown) => error instanceof ApiError && error.code === 'invalid_json');
});

test('a __proto__ key is an own property, not a prototype', () => {
  const value = parseJson(bytes('{"__proto__":{"polluted":1}}')) as Record<string, unknown>;
  assert.ok(Object.hasOwn(value, '__proto__'));
  assert.equal(({} as Record<string, unknown>).polluted, undefined);
});
