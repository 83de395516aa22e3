/**
 * Properties of the If-Match parser over hostile input: any header value gives a condition or
 * `400 bad_request`, never another error, and a value is accepted exactly when RFC 9110's grammar, written out here independently as one
 * regular expression, says so, with the same strong tags.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ApiError } from '../../src/http/api-error.ts';
import { parseIfMatch } from '../../src/http/if-match.ts';
import { IF_MATCH_GRAMMAR, settings, strongTagsOf } from '../support/property.ts';

/** Header values from plausible to absurd, as Node hands them over (latin1: one char per byte). */
const piece = fc.oneof(
  fc.constantFrom('"7.1"', '"7.2"', 'W/"7.2"', '""', '"a,b"', '*', ',', ', ', ' ,', ',,', ' ', '\t', 'W/', 'w/"x"', '"', 'x', '"\u00e9"', '"a b"'),
  fc.string({ unit: fc.integer({ min: 0, max: 0xff }).map((code) => String.fromCharCode(code)), maxLength: 6 }),
  fc.string({ unit: fc.constantFrom('"', ',', ' ', 'W', '/', '*', 'a', '\t'), maxLength: 8 }),
);
const headerValue = fc.array(piece, { maxLength: 8 }).map((pieces) => pieces.join(''));

test('any header value is a condition or 400 bad_request, exactly as the grammar says, with the same strong tags', () => {
  fc.assert(
    fc.property(headerValue, (value) => {
      let parsed: ReturnType<typeof parseIfMatch> = null;
      let code: string | null = null;
      try {
        parsed = parseIfMatch(value);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error; // anything else would be a 500
        code = error.code;
      }
      if (!IF_MATCH_GRAMMAR.test(value)) {
        assert.equal(code, 'bad_request', JSON.stringify(value));
        return;
      }
      assert.equal(code, null, JSON.stringify(value));
      if (value.trim() === '*') assert.deepEqual(parsed, { any: true });
      else assert.deepEqual(parsed, { any: false, tags: strongTagsOf(value) }, JSON.stringify(value));
    }),
    settings(5000),
  );
});
