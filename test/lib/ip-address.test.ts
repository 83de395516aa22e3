/**
 * The IP-address module against Node's own parser and BlockList (node:net) as oracles: it
 * accepts exactly the addresses Node accepts, reads ranges as BlockList matches them, and writes
 * the canonical form of RFC 5952.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BlockList, isIP } from 'node:net';
import fc from 'fast-check';
import { formatIp, ipv4At, parseIp, parseRange, rangeContains, unmapped, type IpRange } from '../../src/lib/ip-address.ts';
import { settings } from '../support/property.ts';

const octet = fc.integer({ min: 0, max: 255 });
const ipv4 = fc.tuple(octet, octet, octet, octet).map((parts) => parts.join('.'));
const group = fc.integer({ min: 0, max: 0xffff });
const groups = fc.array(group, { minLength: 8, maxLength: 8 });
/** An IPv6 address in any of its spellings: full, padded, upper case, compressed anywhere, with an IPv4 tail. */
const ipv6 = fc.tuple(groups, fc.nat(8), fc.nat(8), fc.boolean(), fc.boolean(), fc.boolean()).map(([values, from, length, upper, padded, tail]) => {
  const text = values.map((value) => (padded ? value.toString(16).padStart(4, '0') : value.toString(16)));
  if (tail) text.splice(6, 2, `${values[6]! >> 8}.${values[6]! & 255}.${values[7]! >> 8}.${values[7]! & 255}`);
  const start = Math.min(from, text.length);
  const end = Math.min(text.length, start + length);
  const written = length >= 1 && end > start ? `${text.slice(0, start).join(':')}::${text.slice(end).join(':')}` : text.join(':');
  return upper ? written.toUpperCase() : written;
});
/** Text near addresses: their characters in any order, and near misses of real ones. */
const junk = fc.oneof(
  fc.string({ unit: fc.constantFrom(...'0123456789abcdefABCDEF:.%/x '), maxLength: 50 }),
  fc.tuple(fc.oneof(ipv4, ipv6), fc.nat(50), fc.constantFrom('', ':', '.', '::', '0', '00000', '%', '%eth0', '1.2', '.')).map(([text, at, insert]) => {
    const i = at % (text.length + 1);
    return text.slice(0, i) + insert + text.slice(i);
  }),
);

test('an address is accepted exactly when Node accepts it', () => {
  fc.assert(
    fc.property(fc.oneof(ipv4, ipv6, junk), (text) => {
      assert.equal(parseIp(text) !== null, isIP(text) !== 0, JSON.stringify(text));
      if (isIP(text) !== 0) assert.equal(parseIp(text)!.version, isIP(text));
    }),
    settings(5000),
  );
  for (const text of ['::', '::1', '1::', '1:2:3:4:5:6:7::', '::2:3:4:5:6:7:8', 'fe80::1%eth0', '::ffff:9.9.9.9', '0000:0:0:0:0:0:0:1']) assert.ok(parseIp(text), text);
  for (const text of ['', '1::2::3', '1:2:3:4:5:6:7::8', ':1::', '1:', '00000::1', '1.2.3', '09.9.9.9', '256.1.1.1', '1.2.3.4%x', '[::1]', '1:2:3:4:5:6:1.2.3.4:8']) {
    assert.equal(parseIp(text), null, text);
  }
});

test('leading zeros in IPv4 parts are read as decimal only when asked, never as octal', () => {
  assert.equal(parseIp('09.9.9.010'), null);
  assert.equal(formatIp(parseIp('09.9.9.010', { leadingZeros: true })!), '9.9.9.10');
  assert.equal(parseIp('0009.9.9.9', { leadingZeros: true }), null, 'at most three digits');
  assert.equal(formatIp(unmapped(parseIp('::ffff:09.9.9.9', { leadingZeros: true })!)), '9.9.9.9');
});

test('the canonical text is RFC 5952\'s and reads back as the same address', () => {
  const cases: [string, string][] = [
    ['2001:0DB8:0000:0000:0000:0000:0002:0001', '2001:db8::2:1'],
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
    ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['0:0:0:0:0:0:0:0', '::'],
    ['::0:1', '::1'],
    ['::ffff:0909:0909', '::ffff:9.9.9.9'],
    ['fe80::1%eth0', 'fe80::1'],
    ['10.0.0.1', '10.0.0.1'],
  ];
  for (const [text, canonical] of cases) assert.equal(formatIp(parseIp(text)!), canonical, text);
  fc.assert(
    fc.property(fc.oneof(ipv4, ipv6), (text) => {
      const address = parseIp(text)!;
      const canonical = formatIp(address);
      assert.deepEqual(parseIp(canonical), address, `${text} -> ${canonical}`);
      if (address.version === 6 && !canonical.startsWith('::ffff:')) assert.equal(canonical, new URL(`http://[${text}]/`).hostname.slice(1, -1), text);
    }),
    settings(3000),
  );
});

test('a range is refused unless written with its first address and a prefix of its family', () => {
  assert.deepEqual(parseRange('10.1.0.0/16'), { address: parseIp('10.1.0.0'), prefix: 16 });
  assert.deepEqual(parseRange('10.0.0.5'), { address: parseIp('10.0.0.5'), prefix: 32 });
  assert.deepEqual(parseRange('fd00::/8'), { address: parseIp('fd00::'), prefix: 8 });
  assert.equal(parseRange('10.1.2.3/16'), 'not_first_address');
  assert.equal(parseRange('fd00::1/8'), 'not_first_address');
  for (const text of ['10.0.0.0/33', 'fd00::/129', '10.0.0.0/', '10.0.0.0/x', '10.0.0.0/-1', '10.0.0.0/0010']) assert.equal(parseRange(text), 'bad_prefix', text);
  for (const text of ['proxy.example', '10.0.0.5:80', '/8', '']) assert.equal(parseRange(text), 'not_an_address', text);
});

test('a range holds an address exactly as Node\'s BlockList says, across the two families', () => {
  const family = (text: string) => (isIP(text) === 4 ? 'ipv4' : 'ipv6');
  const range = fc.tuple(fc.oneof(ipv4, ipv6), fc.nat(128)).map(([text, bits]): [string, IpRange] => {
    const address = parseIp(text)!;
    const prefix = bits % ((address.version === 4 ? 32 : 128) + 1);
    // Its first address, as BlockList takes any address of the range.
    const first = formatIp(address);
    return [first, { address, prefix }];
  });
  fc.assert(
    fc.property(range, fc.oneof(ipv4, ipv6, fc.constantFrom('::ffff:10.0.0.1', '10.0.0.1', '::1', '::')), ([written, candidate], text) => {
      const list = new BlockList();
      list.addSubnet(written, candidate.prefix, family(written));
      assert.equal(rangeContains(candidate, parseIp(text)!), list.check(text, family(text)), `${written}/${candidate.prefix} ${text}`);
    }),
    settings(5000),
  );
});

test('text of any length costs one bounded pass: a megabyte of it is refused at once', () => {
  const long = `${'1:'.repeat(500_000)}1`;
  assert.equal(parseIp(long), null);
  assert.equal(parseRange(`${long}/8`), 'not_an_address');
});

test('an IPv4 address embedded in an IPv6 one is read at its offset, its bits flipped when asked', () => {
  const address = parseIp('2001:0:4136:e378:8000:63bf:3fff:fdd2')!;
  assert.equal(formatIp(ipv4At(address, 4)), '65.54.227.120');
  assert.equal(formatIp(ipv4At(address, 12, true)), '192.0.2.45');
  assert.equal(formatIp(ipv4At(parseIp('2002:c000:22d::1')!, 2)), '192.0.2.45');
  assert.deepEqual(ipv4At(parseIp('64:ff9b::7f00:1')!, 12), parseIp('127.0.0.1'));
});
