/**
 * TRUST_PROXY with a list: X-Forwarded-For is read only from a listed peer, and then from the
 * right, through the listed proxies, to the first hop that is not one of them.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import fc from 'fast-check';
import { clientAddress, normalizeAddress } from '../../src/http/client-address.ts';
import { proxyTrust, type ProxyTrust } from '../../src/http/trusted-proxies.ts';
import { settings } from '../support/property.ts';

const request = (peer: string, forwarded?: string) =>
  ({ headers: forwarded === undefined ? {} : { 'x-forwarded-for': forwarded }, socket: { remoteAddress: peer } }) as unknown as IncomingMessage;

const trust = proxyTrust(['10.0.0.5', '10.1.0.0/16', 'fd00::/8']) as ProxyTrust;

test('a listed peer: the last hop that is not a listed proxy is the client', () => {
  assert.equal(clientAddress(request('10.0.0.5', '203.0.113.7'), trust), '203.0.113.7');
  assert.equal(clientAddress(request('::ffff:10.0.0.5', '203.0.113.7'), trust), '203.0.113.7', 'a mapped peer matches its IPv4 entry');
  assert.equal(clientAddress(request('10.1.200.3', '198.51.100.1, 203.0.113.7'), trust), '203.0.113.7', 'earlier hops are the client\'s word');
  assert.equal(clientAddress(request('10.0.0.5', '203.0.113.7, 10.1.4.4'), trust), '203.0.113.7', 'a chain of listed proxies is walked through');
  assert.equal(clientAddress(request('fd12::1', '2001:db8:0:1::99, [fd00::7]:443'), trust), '2001:db8:0:1::/64');
  assert.equal(clientAddress(request('10.0.0.5', '10.1.0.9, 10.0.0.5'), trust), '10.1.0.9', 'only listed proxies: the leftmost hop');
  assert.equal(clientAddress(request('10.0.0.5'), trust), '10.0.0.5', 'no header: the peer');
});

test('a listed peer with junk in the header: the proxy that wrote the junk down is the caller', () => {
  assert.equal(clientAddress(request('10.0.0.5', 'junk'), trust), '10.0.0.5');
  assert.equal(clientAddress(request('10.0.0.5', '203.0.113.7, junk, 10.1.0.9'), trust), '10.1.0.9');
  assert.equal(clientAddress(request('10.0.0.5', ''), trust), '10.0.0.5');
});

test('a peer that is not listed is the client, whatever X-Forwarded-For it sends', () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 200 }), fc.constantFrom('192.0.2.1', '10.0.0.6', '10.2.0.1', '::ffff:192.0.2.1', '2001:db8::1'), (forwarded, peer) => {
      const expected = clientAddress(request(peer), false);
      assert.equal(clientAddress(request(peer, forwarded), trust), expected);
    }),
    settings(1000),
  );
});

test('any header from a listed peer gives a normalised address, never more than the header or the peer', () => {
  fc.assert(
    fc.property(fc.array(fc.oneof(fc.constantFrom('10.0.0.5', '10.1.3.3', '203.0.113.7', '[fd00::1]:80', '2001:db8::5', 'junk', ' ', '09.9.9.9'), fc.string({ maxLength: 20 })), { maxLength: 40 }), (hops) => {
      const forwarded = hops.join(',');
      const address = clientAddress(request('10.0.0.5', forwarded), trust);
      const candidates = new Set(['10.0.0.5', ...forwarded.split(',').map((hop) => normalizeAddress(hop.trim()))]);
      assert.ok(candidates.has(address), address);
    }),
    settings(1000),
  );
});

test('the verdict on a peer is taken once per connection', () => {
  const socket = { remoteAddress: '10.0.0.5' };
  assert.equal(trust.trustsPeer(socket), true);
  socket.remoteAddress = '192.0.2.1';
  assert.equal(trust.trustsPeer(socket), true, 'remembered');
  assert.equal(trust.trustsPeer({ remoteAddress: undefined }), false);
  assert.equal(proxyTrust(true), true);
  assert.equal(proxyTrust(false), false);
});
