/**
 * A PostgreSQL connection URL as the driver reads it: `postgres://user:password@host:port/database`,
 * or with several hosts, `postgres://user@h1:5432,h2:5432/database?target_session_attrs=read-write`,
 * which the driver tries in turn until one is a primary. WHATWG's URL parser refuses the second
 * form (a comma in the port), so the host list is read here and the rest by URL, as the driver does.
 */
const { isIP } = process.getBuiltinModule('node:net');

/** RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens (config.ts's too). */
export const HOST_NAME = /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/**
 * The values of target_session_attrs that lead to a server the service can write to. The driver
 * knows read-only, standby and prefer-standby too: the service would fail every write there.
 */
export const WRITABLE_SESSION_ATTRS = ['read-write', 'primary'] as const;

/** PostgreSQL's port when the URL names none. */
const DEFAULT_PORT = 5432;

export interface PostgresUrl {
  /** Each server, in the order they are tried. */
  hosts: readonly { host: string; port: number }[];
  targetSessionAttrs: string | null;
}

/** Why `raw` is not a URL the service can use, in words that never repeat it; or the URL read. */
export function parsePostgresUrl(raw: string): PostgresUrl | { invalid: string } {
  const scheme = /^(postgres|postgresql):\/\//.exec(raw);
  if (scheme === null) return { invalid: 'must be a postgres:// or postgresql:// URL with a host' };
  const rest = raw.slice(scheme[0].length);
  const end = rest.search(/[/?#]|$/);
  const authority = rest.slice(0, end);
  if (authority.split('@').length > 2) return { invalid: 'has an @ in its user or password: write it as %40' };
  const at = authority.indexOf('@');
  const entries = authority.slice(at + 1).split(',');
  if (entries.length > 1 && !entries.every(hostAndPort)) {
    return { invalid: 'lists several hosts, each of which must be a host name or an IPv4 address with an optional :port (no IPv6 address in a list)' };
  }
  // The rest of the URL as WHATWG reads it, with the first host standing for the list.
  const url = URL.parse(`${scheme[0]}${authority.slice(0, at + 1)}${entries[0]}${rest.slice(end)}`);
  if (url === null || url.hostname === '') return { invalid: 'must be a postgres:// or postgresql:// URL with a host' };
  const targetSessionAttrs = url.searchParams.get('target_session_attrs');
  if (targetSessionAttrs !== null && !(WRITABLE_SESSION_ATTRS as readonly string[]).includes(targetSessionAttrs)) {
    return { invalid: `has a target_session_attrs that may lead to a server the service cannot write to: use ${WRITABLE_SESSION_ATTRS.join(' or ')}` };
  }
  if (entries.length === 1) return { hosts: [{ host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port || DEFAULT_PORT) }], targetSessionAttrs };
  if (targetSessionAttrs === null) {
    return { invalid: 'lists several hosts but no target_session_attrs: add ?target_session_attrs=read-write, so that the service connects to the one that is the primary' };
  }
  const hosts = entries.map((entry) => {
    const [host, port] = entry.split(':');
    return { host: host!, port: Number(port ?? DEFAULT_PORT) };
  });
  return { hosts, targetSessionAttrs };
}

/** One entry of a list of hosts, as the driver splits it: `host` or `host:port`. */
function hostAndPort(entry: string): boolean {
  const [host = '', port, ...rest] = entry.split(':');
  const portValid = port === undefined || (/^[0-9]{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65_535);
  return rest.length === 0 && portValid && (isIP(host) === 4 || HOST_NAME.test(host));
}

/**
 * `raw` with one server, `host`:`port`, instead of its list, and without target_session_attrs (the
 * driver reads it from the URL only to choose among hosts): a URL for that one server, whatever it
 * is. Whether it must be a primary is the caller's to tell the driver.
 */
export function withOneHost(raw: string, host: string, port: number): string {
  const scheme = /^(postgres|postgresql):\/\//.exec(raw)![0];
  const rest = raw.slice(scheme.length);
  const end = rest.search(/[/?#]|$/);
  const authority = rest.slice(0, end);
  const url = new URL(`${scheme}${authority.slice(0, authority.lastIndexOf('@') + 1)}${host}:${port}${rest.slice(end)}`);
  url.searchParams.delete('target_session_attrs');
  return url.toString();
}

/** `raw` without its password (in the user part, or a `password` parameter), to be shown or logged. */
export function withoutPassword(raw: string): string {
  const scheme = /^(postgres|postgresql):\/\//.exec(raw);
  if (scheme === null) return '(not a postgres:// URL)';
  const rest = raw.slice(scheme[0].length);
  const end = rest.search(/[/?#]|$/);
  const authority = rest.slice(0, end);
  const at = authority.lastIndexOf('@');
  const user = at === -1 ? '' : `${authority.slice(0, at).split(':')[0]}@`;
  const tail = rest.slice(end).replace(/([?&])password=[^&#]*/g, '$1password=(hidden)');
  return `${scheme[0]}${user}${authority.slice(at + 1)}${tail}`;
}
