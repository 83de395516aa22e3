/**
 * Which webhook URLs the service may call, and which addresses it may connect to for them, so
 * that a webhook cannot make the service a proxy into places only it can reach (server-side
 * request forgery: `http://169.254.169.254/` for the cloud's credentials, `127.0.0.1:5432`).
 *
 * A URL is absolute, `https:`, at most 2,048 characters, without user information or fragment.
 * An address is public: in none of the special-purpose ranges (lib/special-purpose-addresses.ts),
 * however the URL spells it (the WHATWG URL parser reads `0x7f.1`, `2130706433`, `0177.0.0.1`,
 * `127.1`, `127.0.0.1.` and `%31%32%37.0.0.1` as 127.0.0.1, and IPv6 forms of an IPv4 address
 * are judged by the IPv4 address they stand for). The operator's WEBHOOK_ALLOWED_NETWORKS lift
 * this for their own networks, where plain `http:` is allowed too. A name is judged by every
 * address it resolves to, at creation and again at every attempt (outbound-resolution.ts).
 */
import { formatIp, parseIp, parseRange, rangeContains, type IpAddress, type IpRange } from '../lib/ip-address.ts';
import { quote } from '../lib/quote.ts';
import { specialRangeOf } from '../lib/special-purpose-addresses.ts';
import { resolveChecked, type Resolver } from '../http/outbound-resolution.ts';
import { MAX_URL_LENGTH } from './terms.ts';

/** A URL the policy accepted. */
export interface WebhookTarget {
  /** The URL as the WHATWG parser normalises it: `url.href` is the form to store and to call. */
  readonly url: URL;
  /** The host to resolve and to name in TLS and `Host`, without the brackets of an IPv6 address. */
  readonly hostname: string;
  /** Plain `http:`, allowed only into the operator's networks. */
  readonly plain: boolean;
}

/** What a check found: the value, or why not, as a clause for a `400 invalid_body` message (`url must ...`). */
export type Checked<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly reason: string };

export interface AddressPolicy {
  /** Whether `text` may be a webhook's URL, before any lookup: its form, and its host if that is an address. */
  checkUrl(text: string): Checked<WebhookTarget>;
  /** Why `target` may not connect to `address` (a clause starting `is ...`), or null when it may. */
  refusal(target: WebhookTarget, address: IpAddress): string | null;
}

/** The policy of WEBHOOK_ALLOWED_NETWORKS (valid ranges, as the configuration checked them). */
export function createAddressPolicy(allowedNetworks: readonly string[]): AddressPolicy {
  const allowed = allowedNetworks.map((text) => {
    const range = parseRange(text);
    if (typeof range === 'string') throw new Error(`not a range: ${text}`);
    return range;
  });
  const refusal = (target: WebhookTarget, address: IpAddress) => addressRefusal(address, allowed, target.plain);
  return {
    checkUrl(text) {
      const form = urlForm(text);
      if (!form.ok) return form;
      const literal = parseIp(form.value.hostname);
      const because = literal === null ? null : refusal(form.value, literal);
      return because === null ? form : { ok: false, reason: `url's host ${formatIp(literal!)} ${because}` };
    },
    refusal,
  };
}

/** The rules of a URL's form, host aside. */
function urlForm(text: string): Checked<WebhookTarget> {
  const refuse = (reason: string): Checked<WebhookTarget> => ({ ok: false, reason });
  if (text.length > MAX_URL_LENGTH) return refuse(`url must be at most ${MAX_URL_LENGTH} characters`);
  // The URL parser would drop some of these silently: what is stored would not be what was sent.
  if (/[\u0000-\u0020\u007f\\]/.test(text)) return refuse('url must not contain spaces, control characters or backslashes');
  const url = URL.parse(text);
  if (url === null || !/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) return refuse('url must be an absolute URL such as https://hooks.example/store');
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return refuse('url must use https:');
  if (url.username !== '' || url.password !== '') return refuse('url must not contain user information');
  if (url.href.includes('#')) return refuse('url must not have a fragment');
  if (url.href.length > MAX_URL_LENGTH) return refuse(`url must be at most ${MAX_URL_LENGTH} characters once percent-encoded`);
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return { ok: true, value: { url, hostname, plain: url.protocol === 'http:' } };
}

const NOT_PUBLIC = 'not a public address';
const PLAIN_HTTP = 'outside the networks the operator allows, where alone http: may be used: use https:';

/**
 * Why `address` may not be connected to: an IPv4 address an IPv6 form stands for that is
 * refused in its own right (even inside an allowed network, unless it is allowed too); an address
 * outside the allowed networks that is special-purpose, or any, for plain http.
 */
function addressRefusal(address: IpAddress, allowed: readonly IpRange[], plain: boolean): string | null {
  const special = specialRangeOf(address);
  for (const inner of special?.embeds?.(address) ?? []) {
    const because = addressRefusal(inner, allowed, plain);
    if (because !== null) return `is the ${special!.name} form of ${formatIp(inner)}, which ${because}`;
  }
  // An IPv4 range holds the IPv4-mapped spelling of its addresses too (ip-address.ts).
  if (allowed.some((range) => rangeContains(range, address))) return null;
  if (special !== null) return `is ${special.name}, ${NOT_PUBLIC}`;
  return plain ? `is ${PLAIN_HTTP}` : null;
}

/**
 * Whether `text` may be a webhook's URL at creation: its form, then every address its host
 * resolves to now (a host that does not resolve is refused too). The same rules run again at
 * each attempt, since what a name resolves to can change.
 */
export async function vetWebhookUrl(text: string, policy: AddressPolicy, resolve: Resolver, signal: AbortSignal): Promise<Checked<WebhookTarget>> {
  const checked = policy.checkUrl(text);
  if (!checked.ok) return checked;
  const target = checked.value;
  const resolution = await resolveChecked(target.hostname, { resolve, refusal: (address) => policy.refusal(target, address), signal });
  if ('refused' in resolution) return { ok: false, reason: `url's host ${resolution.refused}` };
  if ('failed' in resolution) return { ok: false, reason: `url's host ${quote(target.hostname)} does not resolve (${resolution.failed})` };
  return checked;
}
