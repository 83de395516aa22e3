import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../../src/http/api-error.ts';
import { canonicalJson, fingerprintBody, parseIdempotencyKey } from '../../src/api/idempotency.ts';
import { parseJson } from '../../src/http/request-body.ts';

const body = (text: string) => parseJson(Buffer.from(text));

test('no Idempotency-Key header means no key', () => {
  assert.equal(parseIdempotencyKey(undefined), null);
});

test('a key is 1 to 255 visible ASCII characters, sent bare or quoted', () => {
  assert.equal(parseIdempotencyKey('a'), 'a');
  assert.equal(parseIdempotencyKey('!~{}"abc'), '!~{}"abc');
  assert.equal(parseIdempotencyKey('"abc"'), 'abc', 'the quotes are not part of the key');
  assert.equal(parseIdempotencyKey('x'.repeat(255)), 'x'.repeat(255));
  assert.equal(parseIdempotencyKey(`"${'x'.repeat(255)}"`), 'x'.repeat(255), 'the limit counts the key, not its quotes');
  assert.equal(parseIdempotencyKey('"'), '"', 'a lone quote is a bare one-character key');
});

test('an empty, too long or not visible-ASCII key is 400 invalid_idempotency_key', () => {
  const bad = ['', '""', 'x'.repeat(256), `"${'x'.repeat(256)}"`, 'a b', '" "', 'tab\there', 'caf\u00e9', 'a, b', '\u007f', ['a', 'b']];
  for (const header of bad) {
    assert.throws(() => parseIdempotencyKey(header), (error: unknown) => error instanceof ApiError && error.code === 'invalid_idempotency_key', JSON.stringify(header));
  }
});

test('the same fields with the same values, in any order, have the same fingerprint', () => {
  const a = fingerprintBody(body('{"name":"Rex","categoryId":1,"status":"sold"}'));
  const b = fingerprintBody(body('{"status":"sold","categoryId":1,"name":"R\\u0065x"}'));
  assert.equal(a, b);
});

test('an omitted status and an explicit "available" have different fingerprints', () => {
  const omitted = fingerprintBody(body('{"name":"Rex","categoryId":1}'));
  const explicit = fingerprintBody(body('{"name":"Rex","categoryId":1,"status":"available"}'));
  assert.notEqual(omitted, explicit);
});

test('integers above 2^53 are fingerprinted by their exact digits', () => {
  const a = fingerprintBody(body('{"name":"Rex","categoryId":9007199254740993}'));
  const b = fingerprintBody(body('{"name":"Rex","categoryId":9007199254740992}'));
  assert.notEqual(a, b);
  assert.equal(canonicalJson(body('{"b":9223372036854775807,"a":["x",null,true]}')), '{"a":["x",null,true],"b":9223372036854775807}');
});
