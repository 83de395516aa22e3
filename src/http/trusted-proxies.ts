/**
 * Which socket peers are our own proxies (`TRUST_PROXY`): only their `X-Forwarded-For` is read,
 * and only they are exempt from the per-address connection cap (their clients are limited per
 * forwarded address, per request, instead). Anyone else who reaches the port is the client
 * itself, whatever header it sends.
 */
import { parseIp, parseRange, rangeContains, type IpRange } from '../lib/ip-address.ts';

/** The proxies' addresses and ranges, compiled once; asked once per connection. */
export interface ProxyTrust {
  /** Whether the socket's peer is one of the listed proxies (remembered per socket). */
  trustsPeer(socket: { readonly remoteAddress?: string | undefined }): boolean;
  /** Whether a forwarded hop (an IP address as written, without port or brackets) is one of the listed proxies. */
  trustsAddress(address: string): boolean;
}

/**
 * The trust of a `TRUST_PROXY` value: `false` (nobody), `true` (any peer, its last hop only: the
 * old meaning, kept for compatibility), or a compiled list of addresses and CIDR ranges (IPv4 and
 * IPv6; an IPv4-mapped IPv6 peer matches its IPv4 entry). The configuration has checked each
 * entry; one that is not a range here is a programmer error, thrown at start.
 */
export function proxyTrust(setting: boolean | readonly string[]): boolean | ProxyTrust {
  if (typeof setting === 'boolean') return setting;
  const ranges = setting.map((entry): IpRange => {
    const range = parseRange(entry);
    if (typeof range === 'string') throw new Error(`TRUST_PROXY entry ${JSON.stringify(entry)}: ${range}`);
    return range;
  });
  const trustsAddress = (text: string): boolean => {
    const address = parseIp(text);
    return address !== null && ranges.some((range) => rangeContains(range, address));
  };
  const verdicts = new WeakMap<object, boolean>();
  return {
    trustsPeer(socket) {
      let verdict = verdicts.get(socket);
      if (verdict === undefined) {
        const peer = socket.remoteAddress;
        verdict = peer !== undefined && trustsAddress(peer);
        verdicts.set(socket, verdict);
      }
      return verdict;
    },
    trustsAddress,
  };
}
