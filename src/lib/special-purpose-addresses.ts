/**
 * The address ranges that are not ordinary public unicast: every range of IANA's two
 * special-purpose address registries, and the few ranges of the address-space registries that
 * the special-purpose ones leave out (multicast, and IPv6 outside the global unicast 2000::/3).
 * An outbound request to a URL a client chose (a webhook) may reach none of them unless the
 * operator allows it, since behind them are this machine, its private networks and the cloud's
 * metadata service.
 *
 * Sources, as of their 2025 updates:
 * - IANA IPv4 Special-Purpose Address Registry (RFC 6890, RFC 8190):
 *   https://www.iana.org/assignments/iana-ipv4-special-registry/
 * - IANA IPv6 Special-Purpose Address Registry (RFC 6890, RFC 8190):
 *   https://www.iana.org/assignments/iana-ipv6-special-registry/
 * - IANA IPv4 Address Space Registry (224.0.0.0/4 multicast, RFC 5771):
 *   https://www.iana.org/assignments/ipv4-address-space/
 * - IANA Internet Protocol Version 6 Address Space (only 2000::/3 is global unicast; ff00::/8
 *   multicast; the IPv4-compatible ::/96 of RFC 4291 section 2.5.5.1, deprecated):
 *   https://www.iana.org/assignments/ipv6-address-space/
 *
 * A registry range is listed even where a wider one already holds it (192.0.0.9 inside
 * 192.0.0.0/24), so that an address is named by its most specific range, as the registries
 * intend. Whether a range is "globally reachable" there does not matter here: every one is refused.
 */
import { ipv4At, parseRange, rangeContains, unmapped, type IpAddress, type IpRange } from './ip-address.ts';

export interface SpecialRange {
  /** The range as the registry writes it (`127.0.0.0/8`). */
  readonly text: string;
  /** What the range is, as an error message names it (`loopback`). */
  readonly name: string;
  readonly range: IpRange;
  /**
   * The IPv4 addresses an address of this IPv6 range stands for (NAT64, 6to4, Teredo, the
   * IPv4-compatible and IPv4-translated forms), which a caller judges in their own right: a
   * packet sent to `64:ff9b::7f00:1` is delivered to 127.0.0.1 by the translator.
   */
  readonly embeds?: (address: IpAddress) => readonly IpAddress[];
}

const lastFour = (address: IpAddress) => [ipv4At(address, 12)];

/** [range, name, embeds] of each registry entry; the ranges are checked when this module loads. */
const ENTRIES: readonly (readonly [string, string, SpecialRange['embeds']?])[] = [
  // IPv4 Special-Purpose Address Registry.
  ['0.0.0.0/8', '"this network" (RFC 791)'],
  ['0.0.0.0/32', '"this host on this network" (RFC 1122)'],
  ['10.0.0.0/8', 'private-use (RFC 1918)'],
  ['100.64.0.0/10', 'shared address space (RFC 6598)'],
  ['127.0.0.0/8', 'loopback (RFC 1122)'],
  ['169.254.0.0/16', 'link-local, where cloud metadata services answer (RFC 3927)'],
  ['172.16.0.0/12', 'private-use (RFC 1918)'],
  ['192.0.0.0/24', 'IETF protocol assignments (RFC 6890)'],
  ['192.0.0.0/29', 'IPv4 service continuity (RFC 7335)'],
  ['192.0.0.8/32', 'the IPv4 dummy address (RFC 7600)'],
  ['192.0.0.9/32', 'port control protocol anycast (RFC 7723)'],
  ['192.0.0.10/32', 'TURN anycast (RFC 8155)'],
  ['192.0.0.170/32', 'NAT64/DNS64 discovery (RFC 8880)'],
  ['192.0.0.171/32', 'NAT64/DNS64 discovery (RFC 8880)'],
  ['192.0.2.0/24', 'documentation, TEST-NET-1 (RFC 5737)'],
  ['192.31.196.0/24', 'AS112 (RFC 7535)'],
  ['192.52.193.0/24', 'automatic multicast tunneling (RFC 7450)'],
  ['192.88.99.0/24', 'the deprecated 6to4 relay anycast (RFC 7526)'],
  ['192.88.99.2/32', '6a44 relay anycast (RFC 6751)'],
  ['192.168.0.0/16', 'private-use (RFC 1918)'],
  ['192.175.48.0/24', 'AS112 direct delegation (RFC 7534)'],
  ['198.18.0.0/15', 'benchmarking (RFC 2544)'],
  ['198.51.100.0/24', 'documentation, TEST-NET-2 (RFC 5737)'],
  ['203.0.113.0/24', 'documentation, TEST-NET-3 (RFC 5737)'],
  ['240.0.0.0/4', 'reserved (RFC 1112)'],
  ['255.255.255.255/32', 'limited broadcast (RFC 8190)'],
  // IPv4 Address Space Registry.
  ['224.0.0.0/4', 'multicast (RFC 5771)'],
  // IPv6 Special-Purpose Address Registry.
  ['::1/128', 'loopback (RFC 4291)'],
  ['::/128', 'unspecified (RFC 4291)'],
  // Never the answer: an IPv4-mapped address is judged as the IPv4 address it is (below).
  ['::ffff:0:0/96', 'IPv4-mapped (RFC 4291)'],
  ['64:ff9b::/96', 'NAT64 (RFC 6052)', lastFour],
  // Where a local-use prefix puts the IPv4 address depends on the prefix length the network
  // chose (RFC 6052 section 2.2), which is not known here: the range is refused as a whole.
  ['64:ff9b:1::/48', 'local-use NAT64 (RFC 8215)'],
  ['100::/64', 'discard-only (RFC 6666)'],
  ['100:0:0:1::/64', 'the IPv6 dummy prefix (RFC 9780)'],
  ['2001::/23', 'IETF protocol assignments (RFC 2928)'],
  ['2001::/32', 'Teredo (RFC 4380)', (address) => [ipv4At(address, 4), ipv4At(address, 12, true)]],
  ['2001:1::1/128', 'port control protocol anycast (RFC 7723)'],
  ['2001:1::2/128', 'TURN anycast (RFC 8155)'],
  ['2001:1::3/128', 'DNS-SD service registration anycast (RFC 9665)'],
  ['2001:2::/48', 'benchmarking (RFC 5180)'],
  ['2001:3::/32', 'automatic multicast tunneling (RFC 7450)'],
  ['2001:4:112::/48', 'AS112 (RFC 7535)'],
  ['2001:10::/28', 'the deprecated ORCHID (RFC 4843)'],
  ['2001:20::/28', 'ORCHIDv2 (RFC 7343)'],
  ['2001:30::/28', 'drone remote ID entity tags (RFC 9374)'],
  ['2001:db8::/32', 'documentation (RFC 3849)'],
  ['2002::/16', '6to4 (RFC 3056)', (address) => [ipv4At(address, 2)]],
  ['2620:4f:8000::/48', 'AS112 direct delegation (RFC 7534)'],
  ['3fff::/20', 'documentation (RFC 9637)'],
  ['5f00::/16', 'segment routing SIDs (RFC 9602)'],
  ['fc00::/7', 'unique local (RFC 4193)'],
  ['fe80::/10', 'link-local (RFC 4291)'],
  // IPv6 Address Space: all but 2000::/3 is reserved, local or multicast.
  ['::/96', 'IPv4-compatible, deprecated (RFC 4291)', lastFour],
  ['::ffff:0:0:0/96', 'IPv4-translated (RFC 2765)', lastFour],
  ['fec0::/10', 'the deprecated site-local (RFC 3879)'],
  ['ff00::/8', 'multicast (RFC 4291)'],
  ['::/3', 'reserved by the IETF, outside the global unicast 2000::/3 (RFC 4291)'],
  ['4000::/2', 'reserved by the IETF, outside the global unicast 2000::/3 (RFC 4291)'],
  ['8000::/1', 'reserved by the IETF, outside the global unicast 2000::/3 (RFC 4291)'],
];

let parsed: readonly SpecialRange[] | undefined;

/**
 * Every special-purpose range, IPv4 first. Parsed on first use (a webhook's URL or address
 * checked), not when the module loads: every start loads it, and parsing took about 2 ms of a start.
 */
export function specialRanges(): readonly SpecialRange[] {
  return (parsed ??= ENTRIES.map(([text, name, embeds]) => {
    const range = parseRange(text);
    if (typeof range === 'string') throw new Error(`special-purpose range ${text}: ${range}`);
    return embeds === undefined ? { text, name, range } : { text, name, range, embeds };
  }));
}

/**
 * The most specific special-purpose range that holds `address`, or null for an ordinary public
 * address. An IPv4-mapped address (`::ffff:127.0.0.1`) is judged as the IPv4 address it is, and
 * an address only against the ranges of its own family: an IPv4 range never holds an IPv6
 * address, nor `::/3` an IPv4 one. A fixed number of comparisons of 16 bytes each.
 */
export function specialRangeOf(address: IpAddress): SpecialRange | null {
  const plain = unmapped(address);
  let found: SpecialRange | null = null;
  for (const special of specialRanges()) {
    if (special.range.address.version !== plain.version || !rangeContains(special.range, plain)) continue;
    if (found === null || special.range.prefix > found.range.prefix) found = special;
  }
  return found;
}
