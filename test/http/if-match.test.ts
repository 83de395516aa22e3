import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ApiError } from '../../src/http/api-error.ts';
import { ifMatchHolds, parseIfMatch } from '../../src/http/if-match.ts';

function malformed(value: string): void {
  assert.throws(() => parseIfMatch(value), (error: unknown) => error instanceof ApiError && error.code === 'bad_request' && error.status === 400, JSON.stringify(value));
}

test('no header is no condition', () => {
  assert.equal(parseIfMatch(undefined), null);
});

test('* is any current representation, with optional whitespace around it', () => {
  for (const value of ['*', ' *', '*\t', '  *  ']) assert.deepEqual(parseIfMatch(value), { any: true }, JSON.stringify(value));
});

test('a list of strong tags keeps each tag with its quotes, in order', () => {
  assert.deepEqual(parseIfMatch('"7.2"'), { any: false, tags: ['"7.2"'] });
  assert.deepEqual(parseIfMatch('"a", "b","c" ,\t"d"'), { any: false, tags: ['"a"', '"b"', '"c"', '"d"'] });
  assert.deepEqual(parseIfMatch('""'), { any: false, tags: ['""'] }, 'an empty opaque-tag is a tag');
});

test('an opaque-tag may hold any visible ASCII but the quote, commas and obs-text included (RFC 9110, 8.8.3)', () => {
  assert.deepEqual(parseIfMatch('"a,b", "x"'), { any: false, tags: ['"a,b"', '"x"'] }, 'a comma inside a tag does not split it');
  assert.deepEqual(parseIfMatch('"!#$%&\'()*+-./:;<=>?@[\\]^_`{|}~"'), { any: false, tags: ['"!#$%&\'()*+-./:;<=>?@[\\]^_`{|}~"'] });
  assert.deepEqual(parseIfMatch('"\u00e9\u00ff\u0080"'), { any: false, tags: ['"\u00e9\u00ff\u0080"'] }, 'obs-text, as Node hands it over (latin1)');
  assert.deepEqual(parseIfMatch('"*"'), { any: false, tags: ['"*"'] }, 'a quoted star is a tag, not the wildcard');
});

test('weak tags are valid syntax but are dropped: If-Match compares strongly, so they never match', () => {
  assert.deepEqual(parseIfMatch('W/"7.2"'), { any: false, tags: [] });
  assert.deepEqual(parseIfMatch('W/"7.1", "7.2"'), { any: false, tags: ['"7.2"'] });
});

test('empty list elements are ignored (RFC 9110, 5.6.1.2); an empty list matches nothing', () => {
  assert.deepEqual(parseIfMatch(', "a",, ,"b",'), { any: false, tags: ['"a"', '"b"'] });
  for (const value of ['', ' ', ',', ' , ,\t']) assert.deepEqual(parseIfMatch(value), { any: false, tags: [] }, JSON.stringify(value));
  assert.equal(ifMatchHolds({ any: false, tags: [] }, '"1.1"'), false);
});

test('anything else is malformed: 400 bad_request', () => {
  for (const value of [
    '7.2', // unquoted
    '"7.2', '7.2"', '"a"b"', // unbalanced or stray quotes
    '"a" "b"', '"a""b"', '"a" x', // two tags without a comma, or junk after one
    'w/"7.2"', 'W /"7.2"', 'W/ "7.2"', 'W/7.2', 'W/', // weak is exactly W/ then the tag
    '*, "a"', '"a", *', '**', '* *', // * stands alone
    '"a b"', '"a\tb"', '"\u0000"', '"\u007f"', // no space, tab or control inside a tag
    '"\u0100"', '"\u20ac"', // above a byte: cannot come from the wire
    'W/"a" W/"b"',
  ]) {
    malformed(value);
  }
});

test('strong comparison: a tag matches only the same opaque-tag, character for character', () => {
  const condition = parseIfMatch('"7.1", "7.2"')!;
  assert.equal(ifMatchHolds(condition, '"7.2"'), true);
  assert.equal(ifMatchHolds(condition, '"7.3"'), false);
  assert.equal(ifMatchHolds(condition, '"17.2"'), false);
  assert.equal(ifMatchHolds(parseIfMatch('W/"7.2"')!, '"7.2"'), false, 'weak never matches');
  assert.equal(ifMatchHolds(parseIfMatch('*')!, '"anything"'), true);
});

test('a long list is read whole, and a bad last element still makes it malformed', () => {
  const value = Array.from({ length: 2000 }, (_, i) => `"tag,${i}"`).join(', ');
  const condition = parseIfMatch(value);
  assert.ok(condition && !condition.any && condition.tags.length === 2000 && condition.tags[1999] === '"tag,1999"');
  malformed(`${value}, x`);
});
