/**
 * The server's configuration, read from environment variables only (contract, "Environments and
 * configuration"). Parsing is strict: a typo must stop the server at start with a message naming
 * the variable, not run it with a surprising default.
 */
import { cgroupCpuQuota } from './lib/cpu-quota.ts';
import { parseIp, parseRange, type RangeProblem } from './lib/ip-address.ts';
import { HOST_NAME, parsePostgresUrl } from './lib/postgres-url.ts';

const { availableParallelism } = process.getBuiltinModule('node:os');

/** Origins whose pages may read our answers: any (`*`), or exactly these serialised origins. */
export type AllowedOrigins = '*' | readonly string[];

/**
 * The longest origin accepted: `https://`, a DNS name (at most 253 characters) and `:65535`. The
 * OpenAPI document bounds `Access-Control-Allow-Origin` by it.
 */
export const MAX_ORIGIN_LENGTH = 8 + 253 + 6;

export const APP_ENVS = ['production', 'staging', 'development'] as const;
export type AppEnv = (typeof APP_ENVS)[number];

export const DATABASE_POOLERS = ['none', 'transaction'] as const;
export type DatabasePooler = (typeof DATABASE_POOLERS)[number];

export const WRITER_MODES = ['auto', 'inline', 'thread'] as const;
export type WriterMode = Exclude<(typeof WRITER_MODES)[number], 'auto'>;

export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  port: number;
  host: string;
  appEnv: AppEnv;
  /** A file path, or `:memory:`. Unused when `databaseUrl` is set. */
  databasePath: string;
  /** `DATABASE_PATH` was not set: the file is in the service's own `data/` folder. */
  databasePathIsDefault: boolean;
  /**
   * `postgres://` or `postgresql://` URL: PostgreSQL instead of SQLite (contract 1.1, scale-out),
   * with one host, or several and `target_session_attrs` (lib/postgres-url.ts).
   */
  databaseUrl: string | null;
  /** Most connections each instance opens to PostgreSQL (`DATABASE_POOL_SIZE`). */
  databasePoolSize: number;
  /**
   * `DATABASE_POOLER`: `transaction` when a pooler in transaction mode (PgBouncer's
   * `pool_mode = transaction`) stands between the service and PostgreSQL; `none` otherwise.
   */
  databasePooler: DatabasePooler;
  /** Absolute http(s) URL ending in `/v1`, or null when not configured. */
  publicBaseUrl: string | null;
  stagingBaseUrl: string | null;
  /**
   * `TRUST_PROXY`: false; true (any peer's last X-Forwarded-For hop, the old meaning); or the
   * addresses and CIDR ranges of the proxies whose X-Forwarded-For is read (see http/trusted-proxies.ts).
   */
  trustProxy: boolean | readonly string[];
  rateLimitBanThreshold: number;
  rateLimitBanSeconds: number;
  /** Open connections one client address may hold at once (`MAX_CONNECTIONS_PER_ADDRESS`). */
  maxConnectionsPerAddress: number;
  logLevel: LogLevel;
  /** The port of the `/metrics` listener (on `host`), or null for none. */
  metricsPort: number | null;
  /**
   * `ALLOWED_HOSTS`: the host names (lower case, no port) the API answers to besides IP
   * addresses and localhost, or null (unset: the API answers any Host). The metrics listener
   * always checks Host, against these names.
   */
  allowedHosts: readonly string[] | null;
  /** `CORS_ALLOWED_ORIGINS`: `*`, a list of exact origins, or null (unset: no CORS header ever). */
  corsAllowedOrigins: AllowedOrigins | null;
  /**
   * `WORKERS`: HTTP workers (threads) serving one port over one SQLite file; 1 is the plain
   * single process (see src/cluster/). `auto` is resolved here to the cores the process may use.
   */
  workers: number;
  /**
   * `WRITER`: how the writes to a SQLite file are made. `thread`: by a writer thread, which
   * commits while the request threads go on serving (with two cores or more, and always with
   * WORKERS above 1); `inline`: on the request thread's own connection, made durable by an
   * `fdatasync` of the WAL, on the event loop while the disk syncs quickly and in libuv's thread
   * pool while it does not (one core: no thread to hand messages to and wake).
   * `auto` is resolved here from the cores and the CPU quota.
   */
  writer: WriterMode;
  /**
   * `WEBHOOK_ALLOWED_NETWORKS`: the IP addresses and CIDR ranges, as written and without
   * repeats, that a webhook URL may point into although they are not public; inside them
   * `http:` is allowed too (see webhooks/address-policy.ts).
   */
  webhookAllowedNetworks: readonly string[];
  /** `WEBHOOK_RETRY_SCHEDULE`: the seconds to wait before each retry of a failed delivery, in order. */
  webhookRetrySchedule: readonly number[];
  /** `ORDER_HOLD_SECONDS`: how long a placed order holds its pet before the service cancels it. */
  orderHoldSeconds: number;
  /** `MAX_OPEN_ORDERS_PER_ACCOUNT`: open (placed or approved) orders one account may have at once. */
  maxOpenOrdersPerAccount: number;
  /** `EVENTS_RETENTION_DAYS`: how long the event log keeps an event. */
  eventsRetentionDays: number;
}

/** The contract caps every ban at 24 h, so a longer first ban could never be honoured. */
const MAX_BAN_SECONDS = 86_400;
/** The limiter keeps one timestamp per recent 429 of a caller, up to this many. */
const MAX_BAN_THRESHOLD = 10_000;
/**
 * The server's cap on all open connections (`SERVER_LIMITS.maxConnections` in http/server.ts,
 * which sits above this file): a per-address cap beyond it would never bind.
 */
const MAX_CONNECTIONS = 1024;

/**
 * Connections per instance: enough for the batched limiter and key lookups, group-committed
 * creates and reads to overlap, few enough that ten instances stay inside PostgreSQL's default
 * max_connections of 100.
 */
export const DEFAULT_POOL_SIZE = 8;
const MAX_POOL_SIZE = 1000;
/** A hold of 48 h by default; at most 30 days, after which an unanswered order is no request at all. */
export const DEFAULT_HOLD_SECONDS = 172_800;
const MAX_HOLD_SECONDS = 2_592_000;
/** Open orders per account by default, and at most (a shelter's own staff use `orders:manage`, never capped). */
export const DEFAULT_MAX_OPEN_ORDERS = 3;
const MAX_OPEN_ORDERS = 1000;
/** A month of events by default: a consumer away longer starts again from a full read. At most ten years. */
export const DEFAULT_EVENTS_RETENTION_DAYS = 30;
const MAX_EVENTS_RETENTION_DAYS = 3650;
/** More threads than this would only queue on the cores and on the one limiter thread. */
export const MAX_WORKERS = 256;

/** An invalid environment variable; `variable` names it so callers and tests need not parse the message. */
export class ConfigError extends Error {
  readonly variable: string;

  constructor(variable: string, message: string) {
    super(message);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

type Env = Readonly<Record<string, string | undefined>>;

/** What `WORKERS=auto` and `WRITER=auto` read of the machine; tests pass their own. */
export interface Machine {
  availableParallelism(): number;
  /** The CPU quota of the process's cgroup in cores (1.5 for one and a half), or null for none. */
  cpuQuota(): number | null;
}

const THIS_MACHINE: Machine = { availableParallelism, cpuQuota: () => cgroupCpuQuota() };

/**
 * Reads and validates the configuration. Throws `ConfigError` (one line, naming the variable) on
 * the first invalid value. An empty variable counts as unset, so `PORT= npm start` means the default.
 */
export function loadConfig(env: Env, machine: Machine = THIS_MACHINE): Config {
  const appEnv = oneOf(env, 'APP_ENV', APP_ENVS, 'development');
  const port = integer(env, 'PORT', 0, 65_535, 8080);
  const databaseUrl = postgresUrl(env, 'DATABASE_URL');
  if (databaseUrl !== null && read(env, 'DATABASE_PATH') !== undefined) {
    // Either engine alone is a clear choice; both at once would leave one silently ignored.
    throw new ConfigError('DATABASE_URL', 'DATABASE_URL and DATABASE_PATH are both set; set DATABASE_URL for PostgreSQL or DATABASE_PATH for SQLite, not both');
  }
  const databasePath = read(env, 'DATABASE_PATH') ?? `data/${appEnv}.db`;
  const workerCount = workers(env, machine, { databaseUrl, databasePath });
  return {
    port,
    host: host(env, 'HOST', '127.0.0.1'),
    appEnv,
    databasePath,
    databasePathIsDefault: read(env, 'DATABASE_PATH') === undefined,
    databaseUrl,
    databasePoolSize: integer(env, 'DATABASE_POOL_SIZE', 1, MAX_POOL_SIZE, DEFAULT_POOL_SIZE),
    databasePooler: oneOf(env, 'DATABASE_POOLER', DATABASE_POOLERS, 'none'),
    publicBaseUrl: baseUrl(env, 'PUBLIC_BASE_URL'),
    stagingBaseUrl: baseUrl(env, 'STAGING_BASE_URL'),
    trustProxy: trustProxy(env, 'TRUST_PROXY'),
    rateLimitBanThreshold: integer(env, 'RATE_LIMIT_BAN_THRESHOLD', 1, MAX_BAN_THRESHOLD, 30),
    rateLimitBanSeconds: integer(env, 'RATE_LIMIT_BAN_SECONDS', 1, MAX_BAN_SECONDS, 900),
    maxConnectionsPerAddress: integer(env, 'MAX_CONNECTIONS_PER_ADDRESS', 1, MAX_CONNECTIONS, 64),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS, 'info'),
    metricsPort: metricsPort(env, port),
    allowedHosts: hostNames(env, 'ALLOWED_HOSTS'),
    corsAllowedOrigins: allowedOrigins(env, 'CORS_ALLOWED_ORIGINS'),
    workers: workerCount,
    writer: writerMode(env, machine, workerCount),
    webhookAllowedNetworks: webhookAllowedNetworks(env, 'WEBHOOK_ALLOWED_NETWORKS'),
    webhookRetrySchedule: retrySchedule(env, 'WEBHOOK_RETRY_SCHEDULE'),
    orderHoldSeconds: integer(env, 'ORDER_HOLD_SECONDS', 1, MAX_HOLD_SECONDS, DEFAULT_HOLD_SECONDS),
    maxOpenOrdersPerAccount: integer(env, 'MAX_OPEN_ORDERS_PER_ACCOUNT', 1, MAX_OPEN_ORDERS, DEFAULT_MAX_OPEN_ORDERS),
    eventsRetentionDays: integer(env, 'EVENTS_RETENTION_DAYS', 1, MAX_EVENTS_RETENTION_DAYS, DEFAULT_EVENTS_RETENTION_DAYS),
  };
}

/**
 * `WORKERS`: unset or 1, one process as always; N or `auto` (the cores this process may use),
 * N threads over one SQLite file. Each thread opens the file itself, so an in-memory database
 * (one per connection) cannot be shared, and PostgreSQL scales out with processes instead.
 */
function workers(env: Env, machine: Machine, engine: { databaseUrl: string | null; databasePath: string }): number {
  const raw = read(env, 'WORKERS');
  let value = 1;
  if (raw === 'auto') value = Math.min(MAX_WORKERS, Math.max(1, machine.availableParallelism()));
  else if (raw !== undefined) {
    value = /^[0-9]{1,4}$/.test(raw) ? Number(raw) : Number.NaN;
    if (!(value >= 1 && value <= MAX_WORKERS)) throw new ConfigError('WORKERS', `WORKERS must be auto or an integer from 1 to ${MAX_WORKERS}, got ${got(raw)}`);
  }
  if (value === 1) return 1;
  if (engine.databaseUrl !== null) {
    throw new ConfigError('WORKERS', 'WORKERS above 1 needs the SQLite engine; with DATABASE_URL run one server process per core instead (see Scaling out)');
  }
  if (engine.databasePath === ':memory:') {
    throw new ConfigError('WORKERS', 'WORKERS above 1 needs a database file: every worker opens DATABASE_PATH, and :memory: is a separate database per connection');
  }
  return value;
}

/**
 * `WRITER`: `auto` (the default) is `inline` where the process gets less than two cores (the cores
 * it may run on, or its cgroup's CPU quota, whichever is smaller) and `thread` otherwise. WORKERS
 * above 1 share one writer thread, so they need `thread`.
 */
function writerMode(env: Env, machine: Machine, workerCount: number): WriterMode {
  const chosen = oneOf(env, 'WRITER', WRITER_MODES, 'auto');
  if (workerCount > 1) {
    if (chosen === 'inline') throw new ConfigError('WRITER', 'WRITER must be thread or auto with WORKERS above 1 (its workers share one writer thread), got "inline"');
    return 'thread';
  }
  if (chosen !== 'auto') return chosen;
  const quota = machine.cpuQuota();
  const cores = Math.min(machine.availableParallelism(), quota === null ? Infinity : quota);
  return cores < 2 ? 'inline' : 'thread';
}

/** Unset: no metrics listener. 0, like PORT=0, takes any free port, so 0 for both is no clash. */
function metricsPort(env: Env, port: number): number | null {
  if (read(env, 'METRICS_PORT') === undefined) return null;
  const value = integer(env, 'METRICS_PORT', 0, 65_535, 0);
  if (value !== 0 && value === port) {
    throw new ConfigError('METRICS_PORT', `METRICS_PORT must differ from PORT (the API's port), got ${got(String(value))}`);
  }
  return value;
}

function read(env: Env, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value === '' ? undefined : value;
}

/** JSON quoting keeps the message on one line whatever the value contains. */
function got(value: string): string {
  return JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}...` : value);
}

function integer(env: Env, name: string, min: number, max: number, fallback: number): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  // Digits only: Number() would also take "1e3", " 80", "0x50" and "".
  const value = /^[0-9]{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(value >= min && value <= max)) {
    const range = max === Number.MAX_SAFE_INTEGER ? `a positive integer` : `an integer from ${min} to ${max}`;
    throw new ConfigError(name, `${name} must be ${range}, got ${got(raw)}`);
  }
  return value;
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(name, `${name} must be one of ${allowed.join(', ')}, got ${got(raw)}`);
  }
  return raw as T;
}

/** Most entries in TRUST_PROXY or WEBHOOK_ALLOWED_NETWORKS: a deployment has a few networks, not a network's worth of lines. */
const MAX_RANGES = 100;

/**
 * `true`, `false`, or comma-separated IP addresses and CIDR ranges (`10.0.0.5, 10.1.0.0/16,
 * fd00::/8`). A range's address must be its network's first (`10.1.0.0/16`, not `10.1.2.3/16`):
 * a near miss is refused rather than widened or narrowed silently.
 */
function trustProxy(env: Env, name: string): boolean | readonly string[] {
  const raw = read(env, name);
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true') return true;
  return rangeList(name, raw, 'true, false, or comma-separated IP addresses and CIDR ranges such as 10.0.0.5,10.1.0.0/16');
}

/**
 * Comma-separated IP addresses and CIDR ranges, IPv4 or IPv6, that webhook URLs may point into
 * although they are private, loopback or link-local. Unset: none, only public addresses.
 */
function webhookAllowedNetworks(env: Env, name: string): readonly string[] {
  const raw = read(env, name);
  if (raw === undefined) return [];
  return rangeList(name, raw, 'comma-separated IP addresses and CIDR ranges such as 10.0.0.5,10.1.0.0/16,fd00::/8');
}

/** The entries of a comma-separated list of addresses and ranges, without repeats; `expected` says what the variable takes. */
function rangeList(name: string, raw: string, expected: string): readonly string[] {
  const entries = raw.split(',').map((entry) => entry.trim());
  if (entries.length > MAX_RANGES) throw new ConfigError(name, `${name} may list at most ${MAX_RANGES} addresses or ranges, got ${entries.length}`);
  for (const entry of entries) {
    const range = parseRange(entry);
    if (typeof range === 'string') throw new ConfigError(name, `${name} must be ${expected}; ${RANGE_PROBLEMS[range]}, got ${got(entry)}`);
  }
  return [...new Set(entries)];
}

/** The contract's retry schedule: seven waits, from 5 s to 10 h, about 27 hours in all. */
export const DEFAULT_RETRY_SCHEDULE: readonly number[] = [5, 300, 1800, 7200, 18000, 36000, 36000];
/** Most waits in WEBHOOK_RETRY_SCHEDULE, so at most this many retries of one delivery. */
export const MAX_RETRIES = 20;

/**
 * Comma-separated positive whole seconds, 1 to 20 of them. Ten digits at most (over 300 years)
 * keeps every due time, in milliseconds, an exact integer.
 */
function retrySchedule(env: Env, name: string): readonly number[] {
  const raw = read(env, name);
  if (raw === undefined) return DEFAULT_RETRY_SCHEDULE;
  const waits = raw.split(',').map((entry) => entry.trim());
  const valid = waits.length <= MAX_RETRIES && waits.every((wait) => /^[0-9]{1,10}$/.test(wait) && Number(wait) > 0);
  if (!valid) throw new ConfigError(name, `${name} must be 1 to ${MAX_RETRIES} comma-separated positive whole numbers of seconds such as 5,300,1800, got ${got(raw)}`);
  return waits.map(Number);
}

/** What each problem of parseRange says in TRUST_PROXY's message. */
const RANGE_PROBLEMS: Readonly<Record<RangeProblem, string>> = {
  not_an_address: 'an entry is not an IP address',
  bad_prefix: 'a prefix length must be 0 to 32 (IPv4) or 128 (IPv6)',
  not_first_address: 'a range must be written with its first address',
};

/** A warning the server logs at start: a setting that works but is probably not what was meant. */
export interface ConfigWarning {
  event: string;
  message: string;
}

/** Host names and addresses that only this machine can reach. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/** What `config` allows that is probably a mistake, and variables of `env` it ignored; main.ts logs each at start. */
export function configWarnings(config: Pick<Config, 'trustProxy' | 'host'>, env: Env = {}): ConfigWarning[] {
  const warnings: ConfigWarning[] = unknownVariables(env).map((name) => {
    const meant = closest(name, [...KNOWN_VARIABLES]);
    return { event: 'unknown_variable', message: `${name} is set, but the service reads no such variable and ignores it: did you mean ${meant}? (see docs/configuration.md)` };
  });
  if (config.trustProxy === true && !isLoopback(config.host)) {
    warnings.push({
      event: 'trust_proxy_any_peer',
      message: `TRUST_PROXY=true reads X-Forwarded-For from any peer, and HOST=${config.host} lets peers other than this machine connect: anyone who reaches the port directly chooses their own address. Set TRUST_PROXY to your proxies' addresses instead (see docs/reverse-proxy.md).`,
    });
  }
  return warnings;
}

/**
 * The variables loadConfig reads, learnt by letting it read an empty environment (where it reads
 * every one of them, each default being valid), so that this cannot fall behind the code.
 */
const KNOWN_VARIABLES: ReadonlySet<string> = (() => {
  const names = new Set<string>();
  const recording = new Proxy<Env>({}, {
    get(_target, name) {
      if (typeof name === 'string') names.add(name);
      return undefined;
    },
  });
  loadConfig(recording, { availableParallelism: () => 1, cpuQuota: () => null });
  return names;
})();

/**
 * The set variables of `env` that look like the service's but are none it reads (DATABASE_PATHS,
 * WORKER), which would otherwise be ignored without a word: those that start with the first word of
 * one of its multi-word variables (DATABASE_, RATE_ ...), and its one-word ones with an S added or
 * taken away.
 */
export function unknownVariables(env: Env): string[] {
  const known = [...KNOWN_VARIABLES];
  const prefixes = known.filter((name) => name.includes('_')).map((name) => `${name.split('_')[0]}_`);
  const nearWords = known.filter((name) => !name.includes('_')).flatMap((name) => [`${name}S`, name.replace(/S$/, '')]);
  return Object.keys(env)
    .filter((name) => read(env, name) !== undefined && !KNOWN_VARIABLES.has(name))
    .filter((name) => prefixes.some((prefix) => name.startsWith(prefix)) || nearWords.includes(name))
    .sort();
}

/** The name of `names` that `name` is fewest single-character edits away from. */
function closest(name: string, names: readonly string[]): string {
  const distance = (a: string, b: string) => {
    let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
    for (let i = 1; i <= a.length; i++) {
      const current = [i];
      for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = current;
    }
    return previous[b.length]!;
  };
  return names.reduce((best, candidate) => (distance(name, candidate) < distance(name, best) ? candidate : best));
}

function host(env: Env, name: string, fallback: string): string {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  // Catches the usual mistakes ("0.0.0.0:8080", "http://localhost") before listen() fails obscurely.
  if (parseIp(raw) === null && !HOST_NAME.test(raw)) {
    throw new ConfigError(name, `${name} must be an IP address or a host name, got ${got(raw)}`);
  }
  return raw;
}

/** Comma-separated host names, written without scheme, port or path (`pets.example,api.pets.example`). */
function hostNames(env: Env, name: string): readonly string[] | null {
  const raw = read(env, name);
  if (raw === undefined) return null;
  const names = raw.split(',').map((entry) => entry.trim().toLowerCase().replace(/\.$/, ''));
  for (const entry of names) {
    if (!HOST_NAME.test(entry)) throw new ConfigError(name, `${name} must be comma-separated host names such as pets.example (no scheme, port or path), got ${got(entry)}`);
  }
  return [...new Set(names)];
}

function postgresUrl(env: Env, name: string): string | null {
  const raw = read(env, name);
  if (raw === undefined) return null;
  const parsed = parsePostgresUrl(raw);
  // The value may hold a password: name the variable, never echo it.
  if ('invalid' in parsed) throw new ConfigError(name, `${name} ${parsed.invalid}`);
  return raw;
}

function baseUrl(env: Env, name: string): string | null {
  const raw = read(env, name);
  if (raw === undefined) return null;
  const url = URL.parse(raw);
  const valid =
    url !== null &&
    (url.protocol === 'https:' || url.protocol === 'http:') &&
    url.username === '' &&
    url.password === '' &&
    url.search === '' &&
    url.hash === '' &&
    url.pathname.endsWith('/v1') &&
    raw.endsWith('/v1');
  if (!valid) {
    throw new ConfigError(name, `${name} must be an absolute http(s) URL ending in /v1, got ${got(raw)}`);
  }
  // The parsed form: host lower-cased, default port dropped, so the OpenAPI document is canonical.
  return url.href;
}

/**
 * `*`, or comma-separated origins written exactly as a browser sends them in `Origin` (scheme,
 * lower-case host, port only when not the default; no path, not even `/`), because they are
 * compared as strings. A near miss (`https://Shop.example/`) is refused with the exact form rather
 * than fixed silently: what is configured is what is compared. `null` (the origin of sandboxed and
 * `file:` pages, which any page can forge) and schemes other than http(s) are refused.
 */
function allowedOrigins(env: Env, name: string): AllowedOrigins | null {
  const raw = read(env, name);
  if (raw === undefined) return null;
  if (raw.trim() === '*') return '*';
  const origins = raw.split(',').map((entry) => entry.trim());
  for (const origin of origins) {
    if (origin === '*') throw new ConfigError(name, `${name} must be * alone or a list of origins, not both, got ${got(raw)}`);
    if (origin.length > MAX_ORIGIN_LENGTH) throw new ConfigError(name, `${name} must list origins of at most ${MAX_ORIGIN_LENGTH} characters, got ${got(origin)}`);
    const url = URL.parse(origin);
    const serialised = url !== null && (url.protocol === 'https:' || url.protocol === 'http:') ? url.origin : null;
    if (serialised === origin) continue;
    const hint = serialised !== null && url!.username === '' && url!.password === '' ? ` (write it as ${got(serialised)})` : '';
    throw new ConfigError(name, `${name} must be * or comma-separated origins such as https://shop.example, got ${got(origin)}${hint}`);
  }
  return [...new Set(origins)];
}
