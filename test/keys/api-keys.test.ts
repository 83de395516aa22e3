import { test } from 'node:test';
import assert from 'node:assert/strict';
import { crc32 } from 'node:zlib';
import { API_KEY_LENGTH, apiKeyPrefix, createConnectionKeyHasher, generateApiKey, hashApiKey, isWellFormedApiKey } from '../../src/keys/api-keys.ts';

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** 32 bytes starting DE AD BE EF, the rest zero. */
function fixedRandom(size: number): Buffer {
  assert.equal(size, 32, 'a key takes 32 random bytes');
  const bytes = Buffer.alloc(size);
  bytes.writeUInt32BE(0xdeadbeef);
  return bytes;
}

test('the format is pinned: prefix, base64url of the 32 bytes, base64url of their CRC-32', () => {
  assert.equal(generateApiKey('development', fixedRandom), 'pk_test_3q2-7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAbhbdYw');
  assert.equal(generateApiKey('production', fixedRandom), 'pk_live_3q2-7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAbhbdYw');
});

test('production keys start pk_live_, staging and development keys pk_test_', () => {
  assert.equal(apiKeyPrefix('production'), 'pk_live_');
  assert.equal(apiKeyPrefix('staging'), 'pk_test_');
  assert.equal(apiKeyPrefix('development'), 'pk_test_');
  assert.match(generateApiKey('production'), /^pk_live_[A-Za-z0-9_-]{49}$/);
  assert.match(generateApiKey('staging'), /^pk_test_[A-Za-z0-9_-]{49}$/);
  assert.match(generateApiKey('development'), /^pk_test_[A-Za-z0-9_-]{49}$/);
});

test('a key is 57 characters: 8 of prefix, 43 random (at least the 32 the contract asks), 6 of checksum', () => {
  assert.equal(API_KEY_LENGTH, 57);
  assert.equal(generateApiKey('production').length, 57);
});

test('keys from the real random source differ', () => {
  const keys = new Set(Array.from({ length: 100 }, () => generateApiKey('production')));
  assert.equal(keys.size, 100);
});

test('generated keys are well-formed in their own environment', () => {
  for (const env of ['production', 'staging', 'development'] as const) {
    for (let i = 0; i < 50; i++) assert.ok(isWellFormedApiKey(generateApiKey(env), env));
  }
});

test('a key of another environment prefix is refused', () => {
  assert.equal(isWellFormedApiKey(generateApiKey('production'), 'development'), false);
  assert.equal(isWellFormedApiKey(generateApiKey('production'), 'staging'), false);
  assert.equal(isWellFormedApiKey(generateApiKey('staging'), 'production'), false);
  assert.equal(isWellFormedApiKey(generateApiKey('development'), 'production'), false);
});

test('the checksum refuses every one-character change of the random part or the checksum', () => {
  const key = generateApiKey('production');
  for (let position = 8; position < key.length; position++) {
    for (const replacement of BASE64URL) {
      if (replacement === key[position]) continue;
      const typo = key.slice(0, position) + replacement + key.slice(position + 1);
      assert.equal(isWellFormedApiKey(typo, 'production'), false, `changed position ${position} to ${replacement}`);
    }
  }
});

test('the checksum refuses swapped neighbours', () => {
  const key = generateApiKey('production');
  let swaps = 0;
  for (let position = 8; position < key.length - 1; position++) {
    if (key[position] === key[position + 1]) continue;
    const typo = key.slice(0, position) + key[position + 1] + key[position] + key.slice(position + 2);
    assert.equal(isWellFormedApiKey(typo, 'production'), false, `swapped positions ${position} and ${position + 1}`);
    swaps++;
  }
  assert.ok(swaps > 30);
});

test('a made-up key of the right shape is refused', () => {
  assert.equal(isWellFormedApiKey(`pk_live_${'A'.repeat(49)}`, 'production'), false);
  assert.equal(isWellFormedApiKey(`pk_test_${'x'.repeat(49)}`, 'development'), false);
});

test('wrong length, characters outside base64url and empty keys are refused', () => {
  const key = generateApiKey('staging');
  assert.equal(isWellFormedApiKey('', 'staging'), false);
  assert.equal(isWellFormedApiKey('pk_test_', 'staging'), false);
  assert.equal(isWellFormedApiKey(key.slice(0, -1), 'staging'), false);
  assert.equal(isWellFormedApiKey(`${key}A`, 'staging'), false);
  assert.equal(isWellFormedApiKey(` ${key.slice(1)}`, 'staging'), false);
  for (const bad of ['+', '/', '=', ' ', '.', 'é']) {
    assert.equal(isWellFormedApiKey(key.slice(0, 20) + bad + key.slice(21), 'staging'), false, bad);
    assert.equal(isWellFormedApiKey(key.slice(0, 55) + bad + key.slice(56), 'staging'), false, bad);
  }
  assert.equal(isWellFormedApiKey(key.toUpperCase(), 'staging'), false);
});

test('the hash is SHA-256 in lowercase hex', () => {
  assert.equal(hashApiKey('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  const key = generateApiKey('production');
  assert.match(hashApiKey(key), /^[0-9a-f]{64}$/);
  assert.equal(hashApiKey(key), hashApiKey(key));
  assert.notEqual(hashApiKey(key), hashApiKey(generateApiKey('production')));
});

test('a made-up key with a valid CRC-32 is well formed and goes on to the lookup: the checksum is for typos and scanners, not a defence', () => {
  const random = 'M'.repeat(43);
  const checksum = Buffer.alloc(4);
  checksum.writeUInt32BE(crc32(random));
  const madeUp = `pk_test_${random}${checksum.toString('base64url')}`;
  assert.equal(isWellFormedApiKey(madeUp, 'development'), true);
  // A typo in it is caught without a lookup.
  assert.equal(isWellFormedApiKey(`${madeUp.slice(0, 20)}N${madeUp.slice(21)}`, 'development'), false);
});

test('the connection key hasher answers hashApiKey of a well-formed key, null otherwise, per connection and per token', () => {
  const keyHashOf = createConnectionKeyHasher('development');
  const first = generateApiKey('development');
  const second = generateApiKey('development');
  const madeUp = 'pk_test_' + 'A'.repeat(49);
  const one = {};
  const other = {};
  assert.equal(keyHashOf(first, one), hashApiKey(first));
  assert.equal(keyHashOf(first, one), hashApiKey(first), 'the same token again on the same connection');
  assert.equal(keyHashOf(second, one), hashApiKey(second), 'another token on the same connection is hashed anew');
  assert.equal(keyHashOf(madeUp, one), null);
  assert.equal(keyHashOf(madeUp, one), null);
  assert.equal(keyHashOf(first, one), hashApiKey(first), 'back to the first token');
  assert.equal(keyHashOf(second, other), hashApiKey(second), 'each connection remembers its own token');
  assert.equal(keyHashOf(first, one), hashApiKey(first));
  assert.equal(createConnectionKeyHasher('production')(first, one), null, 'a development key is malformed in production');
});
