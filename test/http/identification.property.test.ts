/**
 * Properties of the caller's identification over hostile headers: any Authorization,
 * X-Request-Id or X-Forwarded-For value is read without throwing, and only the forms the
 * contract names are taken at their word.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { readCredentials } from '../../src/http/bearer.ts';
import { clientAddress, normalizeAddress, peerAddress } from '../../src/http/client-address.ts';
import { requestId } from '../../src/http/request-id.ts';
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

test('with TRUST_PROXY, any X-Forwarded-For gives a normalised address: its last hop when that is an IP address, else the socket peer', () => {
  fc.assert(
    fc.property(fc.option(fc.oneof(headerText, fc.array(headerText, { maxLength: 2 })), { nil: undefined }), fc.boolean(), (forwarded, trustProxy) => {
      const req = { headers: { 'x-forwarded-for': forwarded }, socket: { remoteAddress: '::ffff:127.0.0.1' } } as unknown as IncomingMessage;
      const address = clientAddress(req, trustProxy);
      if (!trustProxy || typeof forwarded !== 'string') assert.equal(address, '127.0.0.1');
      else assert.equal(address, normalizeAddress(forwarded.slice(forwarded.lastIndexOf(',') + 1).trim()) ?? '127.0.0.1');
      assert.equal(normalizeAddress(address), address, 'a normalised address is its own normal form');
    }),
    settings(1000),
  );
});

const octet = fc.integer({ min: 0, max: 255 });
const ipv4 = fc.tuple(octet, octet, octet, octet);
const group = fc.integer({ min: 0, max: 0xffff });
const ipv6 = fc.array(group, { minLength: 8, maxLength: 8 });
const hex = (value: number) => value.toString(16);

test('every spelling of an IPv4 address is one caller: mapped, with a port, with leading zeros, in brackets', () => {
  fc.assert(
    fc.property(ipv4, fc.integer({ min: 0, max: 65_535 }), (parts, port) => {
      const plain = parts.join('.');
      const [a, b, c, d] = parts;
      const spellings = [
        plain,
        `${plain}:${port}`,
        parts.map((part) => String(part).padStart(3, '0')).join('.'),
        `::ffff:${plain}`,
        `::FFFF:${plain}`,
        `0:0:0:0:0:ffff:${plain}`,
        `::ffff:${hex((a << 8) | b)}:${hex((c << 8) | d)}`,
        `[::ffff:${plain}]:${port}`,
        `[::ffff:${plain}]`,
      ];
      for (const spelling of spellings) assert.equal(normalizeAddress(spelling), plain, spelling);
    }),
    settings(500),
  );
});

test('IPv6 addresses are grouped by /64: the same first four groups are one caller, however written; different ones are not', () => {
  fc.assert(
    fc.property(ipv6, ipv6, fc.integer({ min: 0, max: 65_535 }), (address, other, port) => {
      fc.pre(!(address.slice(0, 5).every((value) => value === 0) && address[5] === 0xffff));
      const full = address.map(hex).join(':');
      const network = normalizeAddress(full);
      assert.ok(network?.endsWith('::/64'), String(network));
      const sameNetwork = [...address.slice(0, 4), ...other.slice(4)];
      fc.pre(!(sameNetwork.slice(0, 5).every((value) => value === 0) && sameNetwork[5] === 0xffff));
      for (const spelling of [full.toUpperCase(), `[${full}]:${port}`, `${full}%eth0`, address.map((value) => hex(value).padStart(4, '0')).join(':'), sameNetwork.map(hex).join(':')]) {
        assert.equal(normalizeAddress(spelling), network, spelling);
      }
      const otherNetwork = normalizeAddress(other.map(hex).join(':'));
      if (other.slice(0, 4).join() !== address.slice(0, 4).join() && otherNetwork?.endsWith('/64')) assert.notEqual(otherNetwork, network);
    }),
    settings(500),
  );
});

test('compressed IPv6 forms are read like their full forms', () => {
  assert.equal(normalizeAddress('2001:db8::1'), '2001:db8:0:0::/64');
  assert.equal(normalizeAddress('2001:db8:0:0:1::'), '2001:db8:0:0::/64');
  assert.equal(normalizeAddress('::1'), '0:0:0:0::/64');
  assert.equal(normalizeAddress('::ffff:0909:0909'), '9.9.9.9');
  assert.equal(normalizeAddress('fe80::1%eth0'), 'fe80:0:0:0::/64');
});

test('text that is not an IP address is null, so the peer address is used instead', () => {
  for (const text of ['', 'unknown', 'garbage', '9.9.9.9.9', '9.9.9.256', '0009.9.9.9', '9.9.9', '9.9.9.9:', '9.9.9.9:123456', '9.9.9.9:x',
    '[9.9.9.9]', '[::1', '[::1]x', '[::1]:', '1::2::3', '1:2:3:4:5:6:7:8:9', 'fe80::g', '::ffff:9.9.9.256', `${'1:'.repeat(60)}1`, '_hidden']) {
    assert.equal(normalizeAddress(text), null, JSON.stringify(text));
  }
  assert.equal(peerAddress({ remoteAddress: undefined }), 'unknown');
  assert.equal(peerAddress({ remoteAddress: '::ffff:127.0.0.2' }), '127.0.0.2');
  assert.equal(peerAddress({ remoteAddress: '2001:db8::5' }), '2001:db8:0:0::/64');
});
