/**
 * Which socket peers are our own proxies (`TRUST_PROXY`): only their `X-Forwarded-For` is read,
 * and only they are exempt from the per-address connection cap (their clients are limited per
 * forwarded address, per request, instead). Anyone else who reaches the port is the client
 * itself, whatever header it sends.
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';

/** The proxies' addresses and ranges, compiled once; asked once per connection. */
export interface ProxyTrust {
  /** Whether the socket's peer is one of the listed proxies (remembered per socket). */
  trustsPeer(socket: { readonly remoteAddress?: string | undefined }): boolean;
  /** Whether a forwarded hop (already an IP address, as written) is one of the listed proxies. */
  trustsAddress(address: string): boolean;
}

/**
 * The trust of a `TRUST_PROXY` value: `false` (nobody), `true` (any peer, its last hop only: the
 * old meaning, kept for compatibility), or a compiled list of addresses and CIDR ranges (IPv4 and
 * IPv6; an IPv4-mapped IPv6 peer matches its IPv4 entry).
 */
export function proxyTrust(setting: boolean | readonly string[]): boolean | ProxyTrust {
  if (typeof setting === 'boolean') return setting;
  const list = new BlockList();
  for (const entry of setting) {
    const slash = entry.indexOf('/');
    const address = slash === -1 ? entry : entry.slice(0, slash);
    const family = isIPv4(address) ? 'ipv4' : 'ipv6';
    if (slash === -1) list.addAddress(address, family);
    else list.addSubnet(address, Number(entry.slice(slash + 1)), family);
  }
  const trustsAddress = (address: string): boolean => {
    if (isIPv4(address)) return list.check(address, 'ipv4');
    return isIPv6(address) && list.check(address, 'ipv6');
  };
  const verdicts = new WeakMap<object, boolean>();
  return {
    trustsPeer(socket) {
      let verdict = verdicts.get(socket);
      if (verdict === undefined) {
        const peer = socket.remoteAddress;
        verdict = peer !== undefined && trustsAddress(stripZone(peer));
        verdicts.set(socket, verdict);
      }
      return verdict;
    },
    trustsAddress,
  };
}

/** `fe80::1%eth0` is `fe80::1`: BlockList does not take a zone. */
function stripZone(address: string): string {
  const zone = address.indexOf('%');
  return zone === -1 ? address : address.slice(0, zone);
}
