/**
 * The node:http server: the contract's timeouts and size limits, with the caps on open
 * connections in front of its parser (connection-gate.ts) and the errors Node raises before our
 * handler runs answered in the contract's Error shape (client-errors.ts).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from './access-log.ts';
import { answerAndClose, answerClientErrors, rawErrorResponses } from './client-errors.ts';
import { admitConnections, createConnectionGate, type ConnectionGate } from './connection-gate.ts';
import type { ProxyTrust } from './trusted-proxies.ts';
import { trackIdleConnections } from './idle-connections.ts';
import { checkingHost, type HostCheck } from './allowed-hosts.ts';

// Not `import ... from 'node:http'`: Node's ES-module view of node:http reads every export once,
// and the WebSocket getters among them load undici, the fetch client; that cost about 35 ms of
// every start. The CommonJS module that getBuiltinModule returns loads it only when used.
const { createServer } = process.getBuiltinModule('node:http');

/** The request handler the server drives (the pipeline, src/pipeline/pipeline.ts). */
export interface App {
  handle(req: IncomingMessage, res: ServerResponse): void;
  /** From now on every response asks the client to close its connection (shutdown). */
  drain(): void;
}

export const SERVER_LIMITS = {
  /** Request headers must arrive within 10 s ... */
  headersTimeoutMs: 10_000,
  /** ... and the whole request within 30 s. */
  requestTimeoutMs: 30_000,
  /** An idle keep-alive connection closes after 5 s (Node adds its 1 s keepAliveTimeoutBuffer). */
  keepAliveTimeoutMs: 5_000,
  /** Node only enforces the two timeouts above on this interval: a cut may come this late. */
  connectionsCheckingIntervalMs: 2_000,
  maxHeaderBytes: 16 * 1024,
  /**
   * Open connections served at once; one more is answered `503 unavailable` and closed. Each
   * connection may hold up to 16 KiB of headers and 16 KiB of body, so the cap bounds what
   * clients can make the server hold to about 32 MiB, far below the file descriptors Node gets
   * (it raises its soft limit to the hard one), while one process on SQLite serves a few
   * thousand requests a second: a thousand honest clients are not refused.
   */
  maxConnections: 1024,
  /**
   * Open connections served at once for one client address (the socket's peer, IPv6 by /64;
   * `MAX_CONNECTIONS_PER_ADDRESS`): one more is answered `503 unavailable` and closed, so that
   * one address that opens connections and never finishes them cannot take every slot above,
   * `/healthz` included. 64 is more than a browser (6 per host) or a pooled client
   * opens; sixteen such addresses are needed to fill the server.
   */
  maxConnectionsPerAddress: 64,
  /**
   * How long a connection we answered with an error and closed may stay open for that answer to
   * reach the client: closing at once could reset the connection while the client is still
   * sending, and a reset makes its TCP stack discard the answer unread.
   */
  lingerMs: 1_000,
} as const;

/** Every limit can be made smaller for tests; the defaults are the contract's. */
export interface ServerOptions {
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  keepAliveTimeoutMs?: number;
  connectionsCheckingIntervalMs?: number;
  maxConnections?: number;
  maxConnectionsPerAddress?: number;
  lingerMs?: number;
  /** Headers for every answer written here, before the app runs (CORS of `*`, which needs no Origin). */
  rawHeaders?: Readonly<Record<string, string>>;
  /**
   * Who counts open connections; default a gate of this server's own caps. Several servers on
   * one port (WORKERS, src/cluster/) share one gate in another thread, which answers later.
   */
  connectionGate?: ConnectionGate;
  /** The proxies of `TRUST_PROXY` (a list): exempt from the per-address cap. `true` exempts nobody. */
  proxies?: boolean | ProxyTrust;
  /** Which Host values are answered (`ALLOWED_HOSTS`, allowed-hosts.ts); absent: any. */
  hostCheck?: HostCheck;
}

/** Creates (does not start) the HTTP server around the app. */
export function createHttpServer(app: App, logger: Logger, options: ServerOptions = {}): Server {
  const { rawHeaders = {}, connectionGate, proxies, hostCheck, ...limitOptions } = options;
  const limits = { ...SERVER_LIMITS, ...definedOnly(limitOptions) };
  const gate: ConnectionGate = connectionGate ?? createConnectionGate(limits);
  const rawErrorResponse = rawErrorResponses(rawHeaders);
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      connectionsCheckingInterval: limits.connectionsCheckingIntervalMs,
      maxHeaderSize: limits.maxHeaderBytes,
      // The app answers a missing Host with 400 in the Error shape; Node's answer has no body.
      requireHostHeader: false,
    },
    hostCheck === undefined
      ? app.handle
      : checkingHost(hostCheck, app.handle, () => logger.event({ level: 'warn', event: 'client_error', code: 'bad_request', nodeCode: 'HOST' })),
  );

  // RFC 9110 section 10.1.1 lets a server ignore an expectation it does not know; Node would
  // answer 417, a status outside the contract. (100-continue is still answered by Node.)
  server.on('checkExpectation', app.handle);

  // This is not a proxy: CONNECT's authority-form target names no resource of ours. Without a
  // listener Node would drop the connection without a word.
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    logger.event({ level: 'warn', event: 'client_error', code: 'bad_request', nodeCode: 'CONNECT' });
    answerAndClose(socket, rawErrorResponse('bad_request', 'This server is not a proxy; CONNECT is not supported.'), limits.lingerMs);
  });

  admitConnections(server, {
    gate, logger, rawErrorResponse, maxConnections: limits.maxConnections, lingerMs: limits.lingerMs,
    proxies: typeof proxies === 'object' ? proxies : null,
  });
  answerClientErrors(server, { logger, rawErrorResponse, lingerMs: limits.lingerMs });
  trackIdleConnections(server);
  return server;
}

function definedOnly(options: ServerOptions): ServerOptions {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
}
