import { test } from 'node:test';
import assert from 'node:assert/strict';
import { quote, QUOTED_BYTES } from '../../src/lib/quote.ts';

test('a short name is quoted whole, as JSON', () => {
  assert.equal(quote('limit'), '"limit"');
  assert.equal(quote('a"b\\c\n'), '"a\\"b\\\\c\\n"');
  assert.equal(quote(''), '""');
});

test('a long name is cut after 32 bytes of its escaped form, between code points, and marked', () => {
  assert.equal(quote('x'.repeat(33)), `"${'x'.repeat(32)}..."`);
  assert.equal(quote('x'.repeat(32)), `"${'x'.repeat(32)}"`);
  // Six bytes an escape: five fit, the sixth is not cut in half.
  assert.equal(quote('\u0001'.repeat(10)), `"${'\\u0001'.repeat(5)}..."`);
  // Four bytes a dog: eight fit, the pair of the ninth is not split.
  assert.equal(quote('🐶'.repeat(8)), `"${'🐶'.repeat(8)}"`);
  assert.equal(quote(`${'🐶'.repeat(7)}xx🐶`), `"${'🐶'.repeat(7)}xx..."`);
  // A lone surrogate is escaped, so the quote is well-formed text.
  assert.equal(quote('\ud800x'), '"\\ud800x"');
});

test('whatever the name, the quote is at most 32 bytes and 5 more, and reading it costs only those bytes', () => {
  for (const name of ['é'.repeat(10_000), '"'.repeat(10_000), '\ud800'.repeat(10_000), '\u4e00'.repeat(10_000), 'a'.repeat(1_000_000)]) {
    const quoted = quote(name);
    assert.ok(Buffer.byteLength(quoted) <= QUOTED_BYTES + 5, quoted);
    assert.ok(quoted.endsWith('..."'));
  }
});
