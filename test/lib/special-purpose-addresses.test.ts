/**
 * The special-purpose ranges: every range of IANA's two registries (and multicast, and IPv6
 * outside 2000::/3) is known at both of its ends, an address is named by its most specific
 * range, ordinary public addresses are in none, and the IPv6 transition forms give back the
 * IPv4 address they carry.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatIp, parseIp, type IpAddress, type IpRange } from '../../src/lib/ip-address.ts';
import { specialRanges, specialRangeOf } from '../../src/lib/special-purpose-addresses.ts';

/** The last address of a range: every bit past its prefix set. */
function lastOf({ address, prefix }: IpRange): IpAddress {
  const bits = (address.version === 4 ? 96 : 0) + prefix;
  const bytes = Uint8Array.from(address.bytes, (byte, i) => byte | (0xff >> Math.max(0, Math.min(8, bits - 8 * i))));
  return { version: address.version, bytes };
}

const at = (text: string) => parseIp(text)!;

test('both ends of every special-purpose range are special, named by that range or a more specific one', () => {
  assert.ok(specialRanges().length >= 55, `only ${specialRanges().length} ranges`);
  for (const special of specialRanges()) {
    for (const address of [special.range.address, lastOf(special.range)]) {
      const found = specialRangeOf(address);
      assert.ok(found !== null, `${formatIp(address)} of ${special.text}`);
      // Compared in the IPv6 space: an IPv4-mapped address is named by an IPv4 range.
      const bits = (range: IpRange) => (range.address.version === 4 ? 96 : 0) + range.prefix;
      assert.ok(bits(found.range) >= bits(special.range), `${formatIp(address)}: ${found.text} is less specific than ${special.text}`);
    }
  }
});

test('the registries\' ranges are all there', () => {
  const listed = new Set(specialRanges().map((special) => special.text));
  const registries = [
    '0.0.0.0/8', '0.0.0.0/32', '10.0.0.0/8', '100.64.0.0/10', '127.0.0.0/8', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.0.0.0/29',
    '192.0.0.8/32', '192.0.0.9/32', '192.0.0.10/32', '192.0.0.170/32', '192.0.0.171/32', '192.0.2.0/24', '192.31.196.0/24', '192.52.193.0/24',
    '192.88.99.0/24', '192.168.0.0/16', '192.175.48.0/24', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '240.0.0.0/4', '255.255.255.255/32',
    '::1/128', '::/128', '::ffff:0:0/96', '64:ff9b::/96', '64:ff9b:1::/48', '100::/64', '2001::/23', '2001::/32', '2001:1::1/128', '2001:1::2/128',
    '2001:2::/48', '2001:3::/32', '2001:4:112::/48', '2001:10::/28', '2001:20::/28', '2001:db8::/32', '2002::/16', '2620:4f:8000::/48', 'fc00::/7', 'fe80::/10',
    '224.0.0.0/4', 'ff00::/8', '3fff::/20', '5f00::/16',
  ];
  for (const range of registries) assert.ok(listed.has(range), range);
});

test('an address is named by its most specific range', () => {
  const cases: [string, string][] = [
    ['127.0.0.1', 'loopback'], ['169.254.169.254', 'link-local'], ['10.1.2.3', 'private-use'], ['192.0.0.9', 'port control protocol'],
    ['192.0.0.77', 'IETF protocol assignments'], ['0.0.0.0', 'this host on this network'], ['0.1.2.3', 'this network'], ['::1', 'loopback'],
    ['::', 'unspecified'], ['2001:0:1::', 'Teredo'], ['2001:1::1', 'port control protocol'], ['2001:1ff::1', 'IETF protocol assignments'],
    ['fd00::1', 'unique local'], ['fe80::1', 'link-local'], ['ff02::1', 'multicast'], ['239.255.255.250', 'multicast'],
    ['::7f00:1', 'IPv4-compatible'], ['4000::1', 'outside the global unicast'], ['fec0::1', 'site-local'],
    ['::ffff:127.0.0.1', 'loopback'], ['::ffff:a9fe:a9fe', 'link-local'],
  ];
  for (const [text, name] of cases) assert.match(specialRangeOf(at(text))?.name ?? 'none', new RegExp(name), text);
});

test('ordinary public addresses are in no range, in either family and in the IPv4-mapped spelling', () => {
  for (const text of ['8.8.8.8', '1.1.1.1', '93.184.216.34', '100.63.255.255', '100.128.0.0', '172.15.255.255', '172.32.0.0', '192.167.255.255', '223.255.255.255', '::ffff:8.8.8.8', '2606:4700:4700::1111', '2a00:1450:4001:830::200e', '2001:200::1', '3fff:1000::1', '2620:4f:8001::1']) {
    assert.equal(specialRangeOf(at(text)), null, text);
  }
});

test('the IPv6 transition forms give back the IPv4 addresses they carry', () => {
  const embedded = (text: string) => specialRangeOf(at(text))!.embeds!(at(text)).map(formatIp);
  assert.deepEqual(embedded('64:ff9b::7f00:1'), ['127.0.0.1']);
  assert.deepEqual(embedded('64:ff9b::169.254.169.254'), ['169.254.169.254']);
  assert.deepEqual(embedded('2002:a9fe:a9fe::1'), ['169.254.169.254']);
  assert.deepEqual(embedded('::10.0.0.1'), ['10.0.0.1']);
  assert.deepEqual(embedded('::ffff:0:7f00:1'), ['127.0.0.1']);
  // RFC 4380 section 4's example: server 65.54.227.120, client 192.0.2.45 stored with every bit flipped.
  assert.deepEqual(embedded('2001:0:4136:e378:8000:63bf:3fff:fdd2'), ['65.54.227.120', '192.0.2.45']);
});
