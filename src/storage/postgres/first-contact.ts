/**
 * The start's first contact with PostgreSQL: one query, bounded, and when it fails, one line on why
 * (a wrong password, an unknown database, a refused connection, a server that is not PostgreSQL).
 *
 * The bound is ours because the driver has none in two cases: a server that answers in another
 * protocol or closes the connection (an HTTP server, a plain TCP listener) makes it connect again
 * at once, forever, and so does a list of hosts none of which takes a read-write session. When the
 * bound passes, each host is asked directly whether it speaks PostgreSQL, to say which case it is.
 */
import { connect } from 'node:net';
import { parsePostgresUrl, withoutPassword } from '../../lib/postgres-url.ts';
import type { PostgresSql } from './driver.ts';
import type { PoolFactory, Server } from './database.ts';
import { describeFailure } from './sqlstate.ts';

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
  const code = (failure as { code?: unknown } | undefined)?.code;
  if (failure !== undefined && !(typeof code === 'string' && PERHAPS_NOT_POSTGRES.has(code))) throw new DatabaseStartError(describeFailure(failure));
  const parsed = parsePostgresUrl(url);
  const hosts = 'invalid' in parsed ? [] : parsed.hosts;
  const spoken = await Promise.all(hosts.map(({ host, port }) => protocolOf(host, port)));
  const strange = spoken.findIndex((answer) => answer === 'other' || answer === 'closed');
  if (strange !== -1) {
    const where = `${hosts[strange]!.host}:${hosts[strange]!.port}`;
    throw new DatabaseStartError(spoken[strange] === 'closed'
      ? `${where} closes every connection before answering as PostgreSQL would: it is not PostgreSQL`
      : `${where} answers, but not in PostgreSQL's protocol: it is not PostgreSQL`);
  }
  if (failure !== undefined) throw new DatabaseStartError(describeFailure(failure));
  // A list of hosts that all refuse: the driver tried them in turn, without an error to show.
  if (spoken.length > 1 && spoken.every((answer) => answer === 'refused')) throw new DatabaseStartError('every host refused the connection: nothing listens there (ECONNREFUSED)');
  throw new DatabaseStartError(!('invalid' in parsed) && parsed.targetSessionAttrs !== null && spoken.includes('postgres')
    ? `no host took a ${parsed.targetSessionAttrs} session within ${waitMs / 1000} s (target_session_attrs): the primary is down, or every host that answers is a standby`
    : `no answer within ${waitMs / 1000} s`);
}

/**
 * The start's first pool, once it has answered (firstContact). For a list of hosts it is opened on
 * the host the probe finds to be the primary, so that the driver never tries the hosts itself
 * (database.ts says why). If no host answers the probe as the primary, the pool takes the list, for
 * firstContact to say why the start cannot go on, or to find a primary that came up meanwhile; the
 * probe is then asked again, and the pool moved to the host it names. (Should that second probe
 * fail too, the pool keeps the list until the instance is next down.) A failed first contact
 * ends the pool and throws DatabaseStartError.
 */
export async function contactedPool(open: PoolFactory, url: string, { waitMs = FIRST_CONTACT_MS, contact = firstContact }: { waitMs?: number; contact?: typeof firstContact } = {}): Promise<{ pool: PostgresSql; server: Server | undefined }> {
  const ask = async () => (open.probe === null ? undefined : open.probe(waitMs).catch(() => undefined));
  const server = await ask();
  const pool = open(server);
  try {
    await contact(pool, url, waitMs);
  } catch (error) {
    // A query may still wait in it (for a primary, say): a command that goes on must not keep it.
    pool.end({ timeout: 0 }).catch(() => {});
    throw error;
  }
  if (open.probe === null || server !== undefined) return { pool, server };
  const found = await ask();
  if (found === undefined) return { pool, server };
  await pool.end({ timeout: 1 });
  return { pool: open(found), server: found };
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
