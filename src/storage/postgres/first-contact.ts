/**
 * The start's first contact with PostgreSQL: one query, bounded, and when it fails, one line on why
 * (a wrong password, an unknown database, a refused connection, a server that is not PostgreSQL).
 *
 * The bound is ours because the driver has none: a server that answers in another protocol or
 * closes the connection (an HTTP server, a plain TCP listener) makes it connect again at once,
 * forever. When the bound passes, each host is asked directly whether it speaks PostgreSQL, to
 * say which case it is. A list of hosts is never a pool's: the start looks for its primary with
 * the probe (contactedPool), and says in the same words why it found none.
 */
import { connect } from 'node:net';
import { parsePostgresUrl, withoutPassword } from '../../lib/postgres-url.ts';
import type { PostgresSql } from './driver.ts';
import type { PoolFactory, Server } from './database.ts';
import { describeFailure } from './sqlstate.ts';
import { PROBE_INTERVAL_MS } from './availability.ts';

/** How long the start waits for its first answer. More than CONNECT_TIMEOUT_SECONDS, which tells silence. */
export const FIRST_CONTACT_MS = 5_000;
/** How long a host has to answer the protocol's first message. */
const PROTOCOL_ANSWER_MS = 1_000;

/** The database of DATABASE_URL cannot be used; `reason` is one line of our own words and codes. */
export class DatabaseStartError extends Error {
  readonly reason: string;

  constructor(reason: string) {
    super(reason);
    this.name = 'DatabaseStartError';
    this.reason = reason;
  }
}

/** The one line that says why the database of `url` cannot be used: the server's, and the keys command's. */
export function unusableDatabaseLine(url: string, error: DatabaseStartError): string {
  return `cannot use the PostgreSQL database of DATABASE_URL (${withoutPassword(url)}): ${error.reason}`;
}

/**
 * The DatabaseStartError of a failure after the first contact (the schema's migration): a failure
 * with a code (PostgreSQL's SQLSTATE, a lost connection), described; anything else as it is.
 */
export function startFailure(error: unknown): unknown {
  const { code, reason } = (error ?? {}) as { code?: unknown; reason?: unknown };
  return typeof code === 'string' || typeof reason === 'string' ? new DatabaseStartError(describeFailure(error)) : error;
}

/** Failures that a server which is not PostgreSQL causes too: then each host is asked what it is. */
const PERHAPS_NOT_POSTGRES = new Set(['CONNECTION_CLOSED', 'ECONNRESET', 'EPIPE', 'CONNECT_TIMEOUT']);

/** Resolves once `sql` answered a query; throws DatabaseStartError (see the file comment). */
export async function firstContact(sql: PostgresSql, url: string, waitMs = FIRST_CONTACT_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), waitMs);
  });
  let failure: unknown;
  try {
    const answer = await Promise.race([sql`SELECT 1`.then(() => 'answered' as const), late]);
    if (answer === 'answered') return;
  } catch (error) {
    failure = error;
  } finally {
    clearTimeout(timer);
  }
  throw await explained(failure, url, waitMs);
}

/**
 * Why the database of `url` could not be used: `failure`, the error of the last attempt, or
 * undefined when nothing answered within `waitMs`. A failure that says what is wrong (a password,
 * a database name) is described; otherwise each host is asked what it is.
 */
async function explained(failure: unknown, url: string, waitMs: number): Promise<DatabaseStartError> {
  const code = (failure as { code?: unknown } | undefined)?.code;
  if (failure !== undefined && !(typeof code === 'string' && PERHAPS_NOT_POSTGRES.has(code))) return new DatabaseStartError(describeFailure(failure));
  const parsed = parsePostgresUrl(url);
  const hosts = 'invalid' in parsed ? [] : parsed.hosts;
  const spoken = await Promise.all(hosts.map(({ host, port }) => protocolOf(host, port)));
  const strange = spoken.findIndex((answer) => answer === 'other' || answer === 'closed');
  if (strange !== -1) {
    const where = `${hosts[strange]!.host}:${hosts[strange]!.port}`;
    return new DatabaseStartError(spoken[strange] === 'closed'
      ? `${where} closes every connection before answering as PostgreSQL would: it is not PostgreSQL`
      : `${where} answers, but not in PostgreSQL's protocol: it is not PostgreSQL`);
  }
  if (failure !== undefined) return new DatabaseStartError(describeFailure(failure));
  // A list of hosts that all refuse: the probe counts a refusal as no answer, so it is told here.
  if (spoken.length > 1 && spoken.every((answer) => answer === 'refused')) return new DatabaseStartError('every host refused the connection: nothing listens there (ECONNREFUSED)');
  return new DatabaseStartError(!('invalid' in parsed) && parsed.targetSessionAttrs !== null && spoken.includes('postgres')
    ? `no host took a ${parsed.targetSessionAttrs} session within ${waitMs / 1000} s (target_session_attrs): the primary is down, or every host that answers is a standby`
    : `no answer within ${waitMs / 1000} s`);
}

/** How the start waits between two probes that found no primary; tests pass their own. */
export interface ProbeWaits {
  pauseMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

const realSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The start's first pool, once it has answered (firstContact). For a list of hosts it is opened on
 * the host the probe finds to be the primary, asked again every PROBE_INTERVAL_MS while none is,
 * until the start's wait is over: no pool ever takes the list, which the driver would try host
 * after host without a pause (database.ts), about a hundred sessions a second on a standby for as
 * long as a start waits for a primary that is down. If none is found, the probe's last answers
 * say why, in firstContact's words. A failed first contact ends the pool. Throws DatabaseStartError.
 */
export async function contactedPool(open: PoolFactory, url: string, options: { waitMs?: number; contact?: typeof firstContact } & ProbeWaits = {}): Promise<{ pool: PostgresSql; server: Server | undefined }> {
  const { waitMs = FIRST_CONTACT_MS, contact = firstContact } = options;
  const server = open.probe === null ? undefined : await primaryWithin(open.probe, url, waitMs, options);
  const pool = open(server);
  try {
    await contact(pool, url, waitMs);
  } catch (error) {
    // A query may still wait in it: a command that goes on must not keep it.
    pool.end({ timeout: 0 }).catch(() => {});
    throw error;
  }
  return { pool, server };
}

/** The primary the probe finds within `waitMs`; throws DatabaseStartError if it finds none. */
async function primaryWithin(probe: NonNullable<PoolFactory['probe']>, url: string, waitMs: number, { pauseMs = PROBE_INTERVAL_MS, now = () => performance.now(), sleep = realSleep }: ProbeWaits): Promise<Server> {
  const deadline = now() + waitMs;
  for (;;) {
    let failures: readonly unknown[];
    try {
      return await probe(Math.max(1, deadline - now()));
    } catch (error) {
      failures = error instanceof AggregateError ? error.errors : [error];
    }
    if (now() + pauseMs >= deadline) throw await explained(failures.find(tellsWhy), url, waitMs);
    await sleep(pauseMs);
  }
}

/**
 * Whether a probe's failure says something of its own: not a standby's answer (no code), a refused
 * connection or the probe's own bound (CONNECTION_DESTROYED), which `explained` tells from the hosts.
 */
function tellsWhy(failure: unknown): boolean {
  const code = (failure as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && code !== 'ECONNREFUSED' && code !== 'CONNECTION_DESTROYED';
}

/**
 * What `host`:`port` does with the message that opens a PostgreSQL session (an SSLRequest): a
 * PostgreSQL server, or a pooler speaking its protocol, answers one byte, S or N, and waits.
 */
function protocolOf(host: string, port: number): Promise<'postgres' | 'other' | 'closed' | 'refused' | 'silent'> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    let connected = false;
    let received = Buffer.alloc(0);
    const done = (answer: 'postgres' | 'other' | 'closed' | 'refused' | 'silent') => {
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => {
      if (received.length === 0) done('silent');
      else done(received.length === 1 && (received[0] === 0x53 || received[0] === 0x4e) ? 'postgres' : 'other');
    }, PROTOCOL_ANSWER_MS);
    socket.on('connect', () => {
      connected = true;
      socket.write(Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]));
    });
    socket.on('data', (data: Buffer) => {
      received = Buffer.concat([received, data]);
      if (received.length > 1) done('other');
    });
    socket.on('error', () => done(!connected ? 'refused' : received.length === 0 ? 'closed' : 'other'));
    socket.on('close', () => done(received.length === 0 ? 'closed' : 'other'));
  });
}
