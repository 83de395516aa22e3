import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../../src/http/api-error.ts';
import { parseJson } from '../../src/http/request-body.ts';

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

test('a byte-order mark before the JSON is invalid_json, not silently stripped (found by the property tests)', () => {
  // TextDecoder strips a leading BOM unless told not to, so `\uFEFF{...}` used to be accepted.
  const input = new Uint8Array([0xef, 0xbb, 0xbf, ...bytes('{"name":"Rex","categoryId":1}')]);
  assert.throws(() => parseJson(input), (error: unknown) => error instanceof ApiError && error.code === 'invalid_json');
});

test('a repeated member name is invalid_json, even escaped or nested (no parser differential)', () => {
  for (const text of ['{"name":"a","name":"b"}', '{"name":"a","n\\u0061me":"b"}', '{"x":[{"a":1,"a":1}]}', '{"":1,"":2}']) {
    assert.throws(() => parseJson(bytes(text)), (error: unknown) => error instanceof ApiError && error.code === 'invalid_json', text);
  }
  // The same name in different objects, or as a string value, is not a repetition.
  assert.deepEqual(parseJson(bytes('{"a":{"a":"a"},"b":["a","a"],"c":{"a":1}}')), { a: { a: 'a' }, b: ['a', 'a'], c: { a: 1n } });
});
