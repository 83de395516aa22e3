/** CRC-32 of a string's UTF-8 bytes (src/lib/crc32.ts), against node:zlib's own. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { crc32 as zlibCrc32 } from 'node:zlib';
import { crc32 } from '../../src/lib/crc32.ts';

test('the check value of CRC-32 and the empty string', () => {
  assert.equal(crc32('123456789'), 0xcbf43926);
  assert.equal(crc32(''), 0);
});

test('the same number as node:zlib for keys, ASCII, characters of two to four bytes and lone surrogates', () => {
  const texts = [
    'a', 'abc', 'The quick brown fox jumps over the lazy dog', '\u0000\u007f',
    'Ã©tÃ©', 'été', 'naïve café', '日本語', '🐕🐈', 'a\ud800b', '\udc00', 'x'.repeat(10_000),
    ...Array.from({ length: 200 }, () => randomBytes(32).toString('base64url')),
    ...Array.from({ length: 50 }, (_, n) => randomBytes(n).toString('latin1')),
  ];
  for (const text of texts) assert.equal(crc32(text), zlibCrc32(text), JSON.stringify(text.slice(0, 40)));
});
