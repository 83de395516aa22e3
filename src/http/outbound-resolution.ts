/**
 * Resolving the host of an outbound request whose destination a client chose (a webhook), so
 * that it cannot be steered somewhere it may not go. Every address the name resolves to is
 * checked, and one refused address refuses the name: a name can resolve to several, and the
 * connection may use any. The request then connects through `lookupFrom`, which answers only
 * with the addresses checked: the name is never looked up a second time between the check and
 * the connection, so a DNS answer that changes in between (DNS rebinding) changes nothing.
 */
import { lookup } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { formatIp, parseIp, type IpAddress } from '../lib/ip-address.ts';
import { quote } from '../lib/quote.ts';

export interface ResolvedAddress {
  readonly address: string;
  readonly family: 4 | 6;
}

/** Every address of a host name, as `dns.lookup` with `all` gives them; tests pass their own. */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** The system's resolver (getaddrinfo: /etc/hosts, then DNS), in the order it answers. */
export const systemResolver: Resolver = async (hostname) =>
  (await lookup(hostname, { all: true, order: 'verbatim' })).map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));

/** The addresses a connection may use; or why the host is refused; or the code of a failed lookup. */
export type Resolution =
  | { readonly addresses: readonly ResolvedAddress[] }
  | { readonly refused: string }
  | { readonly failed: string };

export interface ResolveOptions {
  resolve: Resolver;
  /** Why a connection to `address` is refused (a clause starting `is ...`), or null when it may be made. */
  refusal(address: IpAddress): string | null;
  /** Aborted: the lookup is abandoned, and the resolution fails with `ABORT_ERR`. */
  signal: AbortSignal;
}

/**
 * The addresses of `hostname` (an IP address is its own, with no lookup), each of them allowed
 * by `refusal`. A refusal names the host and the address: `"hooks.example" resolves to
 * 10.0.0.5, which is private-use ...`, or `10.0.0.5 is private-use ...` for an address.
 */
export async function resolveChecked(hostname: string, { resolve, refusal, signal }: ResolveOptions): Promise<Resolution> {
  const literal = parseIp(hostname);
  if (literal !== null) {
    const because = refusal(literal);
    return because === null ? { addresses: [{ address: hostname, family: literal.version }] } : { refused: `${formatIp(literal)} ${because}` };
  }
  let answers: readonly ResolvedAddress[];
  try {
    answers = await abortable(() => resolve(hostname), signal);
  } catch (error) {
    return { failed: codeOf(error) };
  }
  if (answers.length === 0) return { failed: 'ENOTFOUND' };
  for (const answer of answers) {
    const address = parseIp(answer.address);
    const because = address === null ? 'is not an IP address' : refusal(address);
    if (because !== null) return { refused: `${quote(hostname)} resolves to ${address === null ? quote(answer.address) : formatIp(address)}, which ${because}` };
  }
  return { addresses: answers };
}

/** What `start` gives, or a rejection with `ABORT_ERR` as soon as `signal` aborts (at once, without starting, if it has). */
function abortable<T>(start: () => Promise<T>, signal: AbortSignal): Promise<T> {
  const aborted = () => Object.assign(new Error('aborted'), { code: 'ABORT_ERR' });
  if (signal.aborted) return Promise.reject(aborted());
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(aborted());
    signal.addEventListener('abort', abort, { once: true });
    start().then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

/** A system error's code (`ENOTFOUND`, `ECONNREFUSED` ...), or a fixed word for anything else: never its message. */
export function codeOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Z0-9_]{1,40}$/.test(code) ? code : 'UNKNOWN';
}

/**
 * A `lookup` for node:net that answers `hostname` with the checked `addresses` only (of the
 * family asked for, when one is) and any other name with ENOTFOUND, without asking DNS.
 */
export function lookupFrom(hostname: string, addresses: readonly ResolvedAddress[]): LookupFunction {
  return (name, options, callback) => {
    const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
    const usable = name === hostname ? addresses.filter((address) => family === 0 || address.family === family) : [];
    queueMicrotask(() => {
      if (usable.length === 0) callback(Object.assign(new Error(`no checked address for ${name}`), { code: 'ENOTFOUND' }), '', 0);
      else if (options.all === true) callback(null, usable.map(({ address, family }) => ({ address, family })));
      else callback(null, usable[0]!.address, usable[0]!.family);
    });
  };
}
