/**
 * The client address that anonymous callers are limited by and connections are counted by,
 * normalised so that no spelling of an address, and no junk, opens a fresh bucket. Nothing here
 * is built from the Host header.
 */
import type { IncomingMessage } from 'node:http';
import { formatIp, parseIp, unmapped } from '../lib/ip-address.ts';
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
    if (!trust.trustsAddress(hostOf(hop)!)) return client;
    end = start - 1;
  }
  return client;
}

/**
 * The address part of a hop: without the brackets of `[2001:db8::1]:443` and without a port
 * (`9.9.9.9:1234`, as some proxies write); null for a bracket or a port out of place.
 */
function hostOf(hop: string): string | null {
  if (hop.startsWith('[')) {
    const end = hop.indexOf(']');
    if (end === -1) return null;
    const rest = hop.slice(end + 1);
    if (rest !== '' && !(rest.startsWith(':') && PORT.test(rest.slice(1)))) return null;
    const host = hop.slice(1, end);
    // Brackets hold an IPv6 address only.
    return host.includes(':') ? host : null;
  }
  const colon = hop.indexOf(':');
  // One colon: IPv4 with a port. IPv6 has at least two.
  if (colon !== -1 && hop.indexOf(':', colon + 1) === -1) return PORT.test(hop.slice(colon + 1)) ? hop.slice(0, colon) : null;
  return hop;
}

/** The socket's peer address, normalised; `unknown` once the socket is gone. */
export function peerAddress(socket: { readonly remoteAddress?: string | undefined }): string {
  const peer = socket.remoteAddress;
  return (peer !== undefined && normalizeAddress(peer)) || 'unknown';
}

/** Longest text worth parsing: `[` + a full IPv6 address with an IPv4 tail + `%` + a zone + `]:65535`. */
const MAX_ADDRESS_LENGTH = 100;

const PORT = /^\d{1,5}$/;

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
  const host = hostOf(text);
  const address = host === null ? null : parseIp(host, { leadingZeros: true });
  if (address === null) return null;
  const caller = unmapped(address);
  if (caller.version === 4) return formatIp(caller);
  const { bytes } = caller;
  const network = [0, 2, 4, 6].map((i) => ((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  return `${network.join(':')}::/64`;
}
