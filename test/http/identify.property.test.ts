/**
 * Properties of the caller's identification over hostile headers (issue #7): any Authorization,
 * X-Request-Id or X-Forwarded-For value is read without throwing, and only the forms the
 * contract names are taken at their word.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { clientAddress, readCredentials, requestId } from '../../src/http/identify.ts';
import { settings } from '../support/property.ts';

/**
 * Header text: any character a header value can hold once Node has parsed it (RFC 9110 field
 * value: HTAB, SP to `~`, obs-text 0x80-0xFF; Node refuses CR, LF, NUL and other controls with
 * 400 before we see them, which the HTTP-level properties cover), with HTTP whitespace often.
 */
const fieldCharacter = fc.oneof(
  fc.constant('\t'),
  fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)),
  fc.integer({ min: 0x80, max: 0xff }).map((code) => String.fromCharCode(code)),
);
const headerText = fc.string({
  unit: fc.oneof(
    { weight: 3, arbitrary: fieldCharacter },
    { weight: 1, arbitrary: fc.constantFrom(' ', '\t', ',', '"', '=', 'Bearer', 'bearer', 'BEARER ', 'pk_test_', 'pk_live_') },
  ),
  maxLength: 80,
});

test('any Authorization value is missing or a non-empty trimmed bearer token, and Bearer is case-insensitive', () => {
  fc.assert(
    fc.property(fc.option(headerText, { nil: undefined }), (header) => {
      // The oracle, said differently: "bearer" in any case, then a space or tab, then the token.
      const isBearer = header !== undefined && header.slice(0, 6).toLowerCase() === 'bearer' && (header.length === 6 || header[6] === ' ' || header[6] === '\t');
      const token = isBearer ? header.slice(7).trim() : '';
      assert.deepEqual(readCredentials(header), token === '' ? { kind: 'missing' } : { kind: 'bearer', token }, JSON.stringify(header));
    }),
    settings(3000),
  );
});

test('a client X-Request-Id is echoed only when it is 1 to 128 safe characters, whatever is sent', () => {
  fc.assert(
    fc.property(fc.oneof(headerText, fc.stringMatching(/^[A-Za-z0-9._:-]{0,140}$/), fc.array(headerText, { maxLength: 2 })), (header) => {
      const id = requestId(header, () => 'generated');
      const safe = typeof header === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(header);
      assert.equal(id, safe ? header : 'generated');
    }),
    settings(2000),
  );
});

test('with TRUST_PROXY, any X-Forwarded-For gives a string address: the last hop, or the socket peer', () => {
  fc.assert(
    fc.property(fc.option(fc.oneof(headerText, fc.array(headerText, { maxLength: 2 })), { nil: undefined }), fc.boolean(), (forwarded, trustProxy) => {
      const req = { headers: { 'x-forwarded-for': forwarded }, socket: { remoteAddress: '127.0.0.1' } } as unknown as IncomingMessage;
      const address = clientAddress(req, trustProxy);
      assert.equal(typeof address, 'string');
      assert.notEqual(address, '');
      if (!trustProxy || typeof forwarded !== 'string') assert.equal(address, '127.0.0.1');
      else assert.ok(address === '127.0.0.1' || forwarded.endsWith(address) || forwarded.trimEnd().endsWith(address));
    }),
    settings(1000),
  );
});
