/**
 * The client address that anonymous callers are limited by and connections are counted by,
 * normalised so that no spelling of an address, and no junk, opens a fresh bucket. Nothing here
 * is built from the Host header.
 */
import type { IncomingMessage } from 'node:http';
import { isIPv6 } from 'node:net';
import type { ProxyTrust } from './trusted-proxies.ts';

/** Most `X-Forwarded-For` hops walked through trusted proxies; a longer chain is someone's junk. */
const MAX_TRUSTED_HOPS = 16;

/**
 * The client's address, normalised (see `normalizeAddress`):
 * - without trust (`false`), or when the socket's peer is not a listed proxy: the peer itself,
 *   whatever X-Forwarded-For says (anyone who reaches the port directly is the client);
 * - with `true` (any peer; the old meaning): the last hop of X-Forwarded-For;
 * - with a list, from a listed peer: the hops are read from the right, skipping those that are
 *   listed proxies too, and the first one that is not is the client.
 * A hop that is not an IP address counts as the proxy that wrote it down, so no spelling of an
 * address, and no junk, opens a fresh bucket.
 */
export function clientAddress(req: IncomingMessage, trust: boolean | ProxyTrust): string {
  if (trust === false) return peerAddress(req.socket);
  const forwarded = req.headers['x-forwarded-for'];
  if (typeof forwarded !== 'string') return peerAddress(req.socket);
  if (trust === true) return normalizeAddress(forwarded.slice(forwarded.lastIndexOf(',') + 1).trim()) ?? peerAddress(req.socket);
  if (!trust.trustsPeer(req.socket)) return peerAddress(req.socket);
  let client = peerAddress(req.socket);
  let end = forwarded.length;
  for (let hops = 0; hops < MAX_TRUSTED_HOPS && end > 0; hops++) {
    const start = forwarded.lastIndexOf(',', end - 1) + 1;
    const hop = forwarded.slice(start, end).trim();
    const normalized = normalizeAddress(hop);
    if (normalized === null) return client;
    client = normalized;
    if (!trust.trustsAddress(plainAddress(hop))) return client;
    end = start - 1;
  }
  return client;
}

/** The IP address of a hop that `normalizeAddress` accepted, without brackets, port or zone. */
function plainAddress(hop: string): string {
  let address = hop;
  if (address.startsWith('[')) address = address.slice(1, address.indexOf(']'));
  else if (address.indexOf(':') !== -1 && address.indexOf(':') === address.lastIndexOf(':')) address = address.slice(0, address.indexOf(':'));
  const zone = address.indexOf('%');
  return zone === -1 ? address : address.slice(0, zone);
}

/** The socket's peer address, normalised; `unknown` once the socket is gone. */
export function peerAddress(socket: { readonly remoteAddress?: string | undefined }): string {
  const peer = socket.remoteAddress;
  return (peer !== undefined && normalizeAddress(peer)) || 'unknown';
}

/** Longest text worth parsing: `[` + a full IPv6 address with an IPv4 tail + `%` + a zone + `]:65535`. */
const MAX_ADDRESS_LENGTH = 100;

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

const PORT = /^\d{1,5}$/;

const MAPPED_PREFIX = /^::ffff:\d/i;

/**
 * The form in which anonymous callers are counted (docs/security.md, "Limits that hold under floods"),
 * or null for text that is not an IP address:
 * - IPv4 in dotted decimal: `09.9.9.9` is `9.9.9.9` (parts are read as decimal, never octal);
 * - an IPv4-mapped IPv6 address is its IPv4 address: `::ffff:9.9.9.9` is `9.9.9.9`;
 * - any other IPv6 address is its /64, `2001:db8:0:1::/64`: one subscriber usually holds a
 *   whole /64, so counting single addresses would give it 2^64 buckets;
 * - a port (`9.9.9.9:1234`, `[2001:db8::1]:443`, as some proxies write) and an IPv6 zone
 *   (`fe80::1%eth0`) are dropped.
 */
export function normalizeAddress(text: string): string | null {
  if (text.length === 0 || text.length > MAX_ADDRESS_LENGTH) return null;
  if (text.startsWith('[')) {
    const end = text.indexOf(']');
    if (end === -1) return null;
    const rest = text.slice(end + 1);
    if (rest !== '' && !(rest.startsWith(':') && PORT.test(rest.slice(1)))) return null;
    return normalizeIPv6(text.slice(1, end));
  }
  const colon = text.indexOf(':');
  if (colon === -1) return normalizeIPv4(text);
  // How a dual-stack socket shows every IPv4 peer; the general IPv6 path costs 2 us (measured).
  if (MAPPED_PREFIX.test(text)) {
    const ipv4 = normalizeIPv4(text.slice(7));
    if (ipv4 !== null) return ipv4;
  }
  // One colon: IPv4 with a port. IPv6 has at least two.
  if (text.indexOf(':', colon + 1) === -1) return PORT.test(text.slice(colon + 1)) ? normalizeIPv4(text.slice(0, colon)) : null;
  return normalizeIPv6(text);
}

function normalizeIPv4(text: string): string | null {
  const match = IPV4.exec(text);
  if (match === null) return null;
  let canonical = true;
  for (let i = 1; i <= 4; i++) {
    const part = match[i]!;
    if (Number(part) > 255) return null;
    if (part.length > 1 && part.startsWith('0')) canonical = false;
  }
  // The usual case, a peer address as the kernel writes it, allocates nothing new.
  return canonical ? text : match.slice(1, 5).map(Number).join('.');
}

function normalizeIPv6(text: string): string | null {
  const zone = text.indexOf('%');
  const address = zone === -1 ? text : text.slice(0, zone);
  if (!isIPv6(address)) return null;
  const groups = ipv6Groups(address);
  if (groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 255}.${groups[7]! >> 8}.${groups[7]! & 255}`;
  }
  return `${groups.slice(0, 4).map((group) => group.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of an address that `isIPv6` accepted (no zone). */
function ipv6Groups(address: string): number[] {
  const toGroups = (part: string): number[] => {
    if (part === '') return [];
    const groups: number[] = [];
    for (const piece of part.split(':')) {
      if (piece.includes('.')) {
        const [a, b, c, d] = piece.split('.').map(Number) as [number, number, number, number];
        groups.push((a << 8) | b, (c << 8) | d);
      } else {
        groups.push(Number.parseInt(piece, 16));
      }
    }
    return groups;
  };
  const gap = address.indexOf('::');
  if (gap === -1) return toGroups(address);
  const head = toGroups(address.slice(0, gap));
  const tail = toGroups(address.slice(gap + 2));
  return [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
}
