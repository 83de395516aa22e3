/**
 * IP addresses and CIDR ranges, IPv4 and IPv6: parsing (RFC 4291 section 2.2 text forms, an
 * IPv6 zone dropped), the canonical text (RFC 5952), and whether a range holds an address. One
 * module for the configuration (TRUST_PROXY), the trusted proxies, the client address and the
 * Host check, so that they all read an address alike.
 *
 * Every function costs time linear in its input, bounded anyway: text longer than any address
 * with a zone is refused before it is read. An address is its 16 bytes in the IPv6 space, an IPv4
 * address as its IPv4-mapped form (`::ffff:a.b.c.d`, RFC 4291 section 2.5.5.2), so that a range
 * of one family holds the other family's spelling of its addresses, as Node's BlockList does.
 */

/** An IP address: its family as written, and its 16 bytes in the IPv6 space. */
export interface IpAddress {
  readonly version: 4 | 6;
  readonly bytes: Uint8Array;
}

/** A CIDR range: its first address and how many leading bits every address of it shares. */
export interface IpRange {
  readonly address: IpAddress;
  /** Of the family as written: 0 to 32 for IPv4, 0 to 128 for IPv6. */
  readonly prefix: number;
}

export interface ParseOptions {
  /**
   * Read an IPv4 part with leading zeros as decimal (`09.9.9.9` is `9.9.9.9`, never octal), as
   * some proxies write them. Off by default: Node's own parser, and so `listen`, refuse them.
   */
  leadingZeros?: boolean;
}

/** Longer text is no address: a full IPv6 address with an IPv4 tail is 45 characters, and a zone is short. */
const MAX_TEXT_LENGTH = 100;

const MAPPED_PREFIX = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] as const;

/** The address written in `text`, or null. An IPv6 zone (`fe80::1%eth0`) is accepted and dropped. */
export function parseIp(text: string, options: ParseOptions = {}): IpAddress | null {
  if (text.length === 0 || text.length > MAX_TEXT_LENGTH) return null;
  if (!text.includes(':')) {
    const ipv4 = parseIPv4(text, options);
    if (ipv4 === null) return null;
    const bytes = new Uint8Array(16);
    bytes.set(MAPPED_PREFIX);
    bytes.set(ipv4, 12);
    return { version: 4, bytes };
  }
  const zone = text.indexOf('%');
  if (zone !== -1 && !ZONE.test(text.slice(zone + 1))) return null;
  const bytes = parseIPv6(zone === -1 ? text : text.slice(0, zone), options);
  return bytes === null ? null : { version: 6, bytes };
}

/** A zone: what Node's own parser (node:net isIP) takes after `%`. */
const ZONE = /^[0-9A-Za-z.:-]+$/;

/** Four decimal parts of 0 to 255; null for anything else. */
function parseIPv4(text: string, { leadingZeros = false }: ParseOptions): number[] | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const bytes: number[] = [];
  for (const part of parts) {
    if (!/^[0-9]{1,3}$/.test(part) || (!leadingZeros && part.length > 1 && part.startsWith('0'))) return null;
    const value = Number(part);
    if (value > 255) return null;
    bytes.push(value);
  }
  return bytes;
}

/**
 * Up to eight groups of 1 to 4 hex digits separated by `:`, at most one `::` standing for one or
 * more groups of zeros, and optionally an IPv4 address as the last two groups.
 */
function parseIPv6(text: string, options: ParseOptions): Uint8Array | null {
  const gap = text.indexOf('::');
  if (gap !== -1 && text.indexOf('::', gap + 1) !== -1) return null;
  const head = gap === -1 ? text : text.slice(0, gap);
  const tail = gap === -1 ? '' : text.slice(gap + 2);
  const before = groupsOf(head, options, gap === -1);
  const after = groupsOf(tail, options, true);
  if (before === null || after === null) return null;
  const explicit = before.length + after.length;
  if (gap === -1 ? explicit !== 8 : explicit > 7) return null;
  const groups = [...before, ...new Array<number>(8 - explicit).fill(0), ...after];
  const bytes = new Uint8Array(16);
  groups.forEach((group, i) => {
    bytes[2 * i] = group >> 8;
    bytes[2 * i + 1] = group & 0xff;
  });
  return bytes;
}

/** The 16-bit groups of one side of `::` (an IPv4 address last counts as two when `mayEndInIPv4`). */
function groupsOf(side: string, options: ParseOptions, mayEndInIPv4: boolean): number[] | null {
  if (side === '') return [];
  const pieces = side.split(':');
  const groups: number[] = [];
  for (const [i, piece] of pieces.entries()) {
    if (piece.includes('.')) {
      const ipv4 = i === pieces.length - 1 && mayEndInIPv4 ? parseIPv4(piece, options) : null;
      if (ipv4 === null) return null;
      groups.push((ipv4[0]! << 8) | ipv4[1]!, (ipv4[2]! << 8) | ipv4[3]!);
    } else {
      if (!/^[0-9A-Fa-f]{1,4}$/.test(piece)) return null;
      groups.push(Number.parseInt(piece, 16));
    }
  }
  return groups;
}

/** The 16-bit groups of an address. */
function groups(address: IpAddress): number[] {
  return Array.from({ length: 8 }, (_, i) => (address.bytes[2 * i]! << 8) | address.bytes[2 * i + 1]!);
}

/** Whether an address of the IPv6 family is IPv4-mapped (`::ffff:a.b.c.d`). */
export function isIPv4Mapped(address: IpAddress): boolean {
  return MAPPED_PREFIX.every((byte, i) => address.bytes[i] === byte);
}

/** The IPv4 address of an IPv4-mapped one (`::ffff:9.9.9.9` is `9.9.9.9`); any other as it is. */
export function unmapped(address: IpAddress): IpAddress {
  return address.version === 6 && isIPv4Mapped(address) ? { version: 4, bytes: address.bytes } : address;
}

/**
 * The IPv4 address written in four bytes of `address` from byte `offset`, each bit flipped when
 * `inverted`: how IPv6 transition forms embed one (NAT64 and IPv4-compatible at byte 12, 6to4
 * at byte 2, Teredo's server at byte 4 and its client, inverted, at byte 12).
 */
export function ipv4At(address: IpAddress, offset: number, inverted = false): IpAddress {
  const bytes = new Uint8Array(16);
  bytes.set(MAPPED_PREFIX);
  for (let i = 0; i < 4; i++) bytes[12 + i] = inverted ? address.bytes[offset + i]! ^ 0xff : address.bytes[offset + i]!;
  return { version: 4, bytes };
}

/**
 * The canonical text of an address: dotted decimal for IPv4; for IPv6, RFC 5952's form (lower
 * case, no leading zeros, the longest run of two or more zero groups as `::`, the first on a tie,
 * an IPv4-mapped address with its IPv4 tail).
 */
export function formatIp(address: IpAddress): string {
  const { bytes } = address;
  const dotted = `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}`;
  if (address.version === 4) return dotted;
  if (isIPv4Mapped(address)) return `::ffff:${dotted}`;
  const all = groups(address);
  let [start, length] = [-1, 1];
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && all[j] === 0) j++;
    if (j - i > length) [start, length] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = (list: number[]) => list.map((group) => group.toString(16)).join(':');
  return start === -1 ? hex(all) : `${hex(all.slice(0, start))}::${hex(all.slice(start + length))}`;
}

/** Why a range is refused: not an address, a prefix out of bounds, or an address that is not the range's first. */
export type RangeProblem = 'not_an_address' | 'bad_prefix' | 'not_first_address';

/**
 * A CIDR range (`10.1.0.0/16`, `fd00::/8`), or a single address (`10.0.0.5`, the range of it
 * alone). Its address must be the range's first: `10.1.2.3/16` is refused rather than widened
 * or narrowed silently.
 */
export function parseRange(text: string): IpRange | RangeProblem {
  const slash = text.indexOf('/');
  const address = parseIp(slash === -1 ? text : text.slice(0, slash));
  if (address === null) return 'not_an_address';
  const bits = address.version === 4 ? 32 : 128;
  if (slash === -1) return { address, prefix: bits };
  const written = text.slice(slash + 1);
  const prefix = /^[0-9]{1,3}$/.test(written) ? Number(written) : Number.NaN;
  if (!(prefix >= 0 && prefix <= bits)) return 'bad_prefix';
  const range = { address, prefix };
  return sharesPrefix(address.bytes, firstOf(range), 128) ? range : 'not_first_address';
}

/** The range's prefix in the 128-bit space (an IPv4 range's bits follow the 96 of the mapped prefix). */
function spacePrefix({ address, prefix }: IpRange): number {
  return address.version === 4 ? 96 + prefix : prefix;
}

/** The first address of a range: its address with every bit past the prefix set to 0. */
function firstOf(range: IpRange): Uint8Array {
  const prefix = spacePrefix(range);
  const first = new Uint8Array(16);
  for (let i = 0; i < 16; i++) first[i] = range.address.bytes[i]! & maskOf(prefix - 8 * i);
  return first;
}

/** The mask of a byte whose first `bits` bits (clamped to 0 to 8) are kept. */
function maskOf(bits: number): number {
  return (0xff << (8 - Math.min(8, Math.max(0, bits)))) & 0xff;
}

/** Whether two addresses' bytes agree on their first `prefix` bits. */
function sharesPrefix(a: Uint8Array, b: Uint8Array, prefix: number): boolean {
  for (let i = 0; i < 16 && 8 * i < prefix; i++) {
    const mask = maskOf(prefix - 8 * i);
    if ((a[i]! & mask) !== (b[i]! & mask)) return false;
  }
  return true;
}

/**
 * Whether `range` holds `address`. Both are compared in the IPv6 space, so an IPv4 range holds
 * the IPv4-mapped spelling of its addresses and an IPv6 range that covers `::ffff:0:0/96` holds
 * IPv4 addresses, as Node's BlockList has it.
 */
export function rangeContains(range: IpRange, address: IpAddress): boolean {
  return sharesPrefix(range.address.bytes, address.bytes, spacePrefix(range));
}
