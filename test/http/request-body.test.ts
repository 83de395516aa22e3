import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../../src/http/api-error.ts';
import { parseJson } from '../../src/http/request-body.ts';

const bytes = (text: string) => new TextEncoder().encode(text);

test('the integer literals of a top-level object\'s members become exact bigints; other numbers stay numbers', () => {
  assert.deepEqual(parseJson(bytes('{"a":9223372036854775807,"b":1.0,"c":1e2,"d":-3,"e":[2],"f":{"g":3}, "h" :\n 0,"i":-0.5E-3}')), {
    a: 9223372036854775807n, b: 1, c: 100, d: -3n, e: [2], f: { g: 3 }, h: 0n, i: -0.0005,
  });
  // Bodies are flat objects: nothing below the top level, and no other top level, needs the digits.
  assert.deepEqual(parseJson(bytes('[1,{"a":2}]')), [1, { a: 2 }]);
  assert.equal(parseJson(bytes('7')), 7);
  assert.equal((parseJson(bytes(`{"n":${'9'.repeat(5_000)}}`)) as { n: bigint }).n, BigInt('9'.repeat(5_000)));
});

test('invalid UTF-8 and malformed JSON are invalid_json', () => {
  for (const input of [new Uint8Array([0x7b, 0xff, 0x7d]), bytes('{'), bytes(' '), bytes('{"a":1}}')]) {
    assert.throws(() => parseJson(input), (error: unknown) => error instanceof ApiError && error.code === 'invalid_json');
  }
});

test('nesting deep enough to exhaust a recursive parser is no crash: parsed when balanced, else invalid_json', () => {
  let value = parseJson(bytes('['.repeat(100_000) + ']'.repeat(100_000)));
  for (let depth = 0; depth < 100_000; depth++) value = (value as unknown[])[0] ?? 'bottom';
  assert.equal(value, 'bottom');
  assert.ok(typeof parseJson(bytes(`${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`)) === 'object');
  assert.throws(() => parseJson(bytes('['.repeat(100_000))), (error: unknown) => error instanceof ApiError && error.code === 'invalid_json');
});

test('a __proto__ member whose value is an integer is an own bigint property, not a prototype', () => {
  const value = parseJson(bytes('{"__proto__":5}')) as Record<string, unknown>;
  assert.ok(Object.hasOwn(value, '__proto__'));
  assert.equal(value['__proto__'], 5n);
  assert.equal(Object.getPrototypeOf(value), Object.prototype);
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
  assert.deepEqual(parseJson(bytes('{"a":{"a":"a"},"b":["a","a"],"c":{"a":1}}')), { a: { a: 'a' }, b: ['a', 'a'], c: { a: 1 } });
});
