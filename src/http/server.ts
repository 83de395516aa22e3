/**
 * The node:http server: the contract's timeouts and size limits, a cap on open connections, and
 * errors that Node raises before our handler runs (malformed requests, oversized headers,
 * timeouts) answered in the contract's Error shape instead of Node's bare responses.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import { ERROR_STATUS } from './api-error.ts';
import type { Logger } from './access-log.ts';
import { COMMON_HEADERS, errorJson } from './reply.ts';
import { peerAddress } from './identify.ts';

// Not `import ... from 'node:http'`: Node's ES-module view of node:http reads every export once,
// and the WebSocket getters among them load undici, the fetch client; that cost about 35 ms of
// every start (issue #12). The CommonJS module that getBuiltinModule returns loads it only when used.
const { createServer, STATUS_CODES } = process.getBuiltinModule('node:http');

/** The request handler the server drives (the pipeline in `app.ts`). */
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
   * `/healthz` included (issue #15). 64 is more than a browser (6 per host) or a pooled client
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
}

/** Log fields of a refused connection: the count that was full. */
export type ConnectionRefusal = { openConnections: number } | { openConnectionsFromAddress: number };

/** Counts open connections, in total and per client address, against the caps. */
export interface ConnectionGate {
  /**
   * null: the connection is admitted and counted until `release`; otherwise the refusal. A
   * promise when the counts live elsewhere: the socket waits, unread, for the answer.
   */
  admit(address: string): ConnectionRefusal | null | Promise<ConnectionRefusal | null>;
  /** An admitted connection from `address` closed. */
  release(address: string): void;
}

/** The gate of one process: two counts in memory, answered at once. */
export function createConnectionGate(caps: { maxConnections: number; maxConnectionsPerAddress: number }) {
  let served = 0;
  // Connections served per address; an address leaves the map with its last connection, so the
  // map holds at most `maxConnections` entries.
  const servedByAddress = new Map<string, number>();
  return {
    admit(address: string): ConnectionRefusal | null {
      if (served >= caps.maxConnections) return { openConnections: served };
      const fromAddress = servedByAddress.get(address) ?? 0;
      // The address itself is not logged: the access log holds no client addresses either.
      if (fromAddress >= caps.maxConnectionsPerAddress) return { openConnectionsFromAddress: fromAddress };
      served++;
      servedByAddress.set(address, fromAddress + 1);
      return null;
    },
    release(address: string): void {
      served--;
      const left = (servedByAddress.get(address) ?? 1) - 1;
      if (left <= 0) servedByAddress.delete(address);
      else servedByAddress.set(address, left);
    },
  } satisfies ConnectionGate;
}

/** Creates (does not start) the HTTP server around the app. */
export function createHttpServer(app: App, logger: Logger, options: ServerOptions = {}): Server {
  const { rawHeaders = {}, connectionGate, ...limitOptions } = options;
  const limits = { ...SERVER_LIMITS, ...definedOnly(limitOptions) };
  const gate: ConnectionGate = connectionGate ?? createConnectionGate(limits);
  const rawExtra = rawHeaderLines(rawHeaders);
  const rawErrorResponse = (code: RawCode, message: string, extraHeaders = '') => rawResponse(code, message, extraHeaders + rawExtra);
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
    app.handle,
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

  // The connection caps. Node's own `server.maxConnections` closes the connection without a
  // word, so the http connection listener is wrapped instead: over a cap, a connection gets a
  // raw `503 unavailable` and is closed, and never reaches the HTTP parser. Node's cap stays as
  // a backstop (twice ours) against a flood of connections that linger after their refusal.
  const [httpConnectionListener] = server.listeners('connection') as ((socket: Duplex) => void)[];
  if (httpConnectionListener === undefined) throw new Error('node:http registered no connection listener');
  server.removeAllListeners('connection');
  server.maxConnections = limits.maxConnections * 2;
  const refuse = (socket: Duplex, fields: ConnectionRefusal) => {
    logger.event({ level: 'warn', event: 'connection_refused', code: 'unavailable', ...fields });
    socket.on('error', ignore);
    socket.resume(); // whatever the client sends is read and dropped, never held
    answerAndClose(socket, rawErrorResponse('unavailable', 'Too many open connections; retry shortly.', 'Retry-After: 1\r\n'), limits.lingerMs);
  };
  const serve = (socket: Socket, address: string) => {
    socket.once('close', () => gate.release(address));
    httpConnectionListener.call(server, socket);
  };
  server.on('connection', (socket: Socket) => {
    const address = peerAddress(socket);
    const verdict = gate.admit(address);
    if (!(verdict instanceof Promise)) {
      if (verdict === null) serve(socket, address);
      else refuse(socket, verdict);
      return;
    }
    // Counted in another thread: nothing is read until it answers (a new connection pays one
    // round trip; the requests on it pay nothing).
    socket.pause();
    socket.on('error', ignore);
    verdict.then((refusal) => {
      if (refusal !== null) return refuse(socket, refusal);
      socket.off('error', ignore);
      if (socket.destroyed) return gate.release(address);
      serve(socket, address);
      socket.resume();
    }, () => socket.destroy());
  });

  // Sockets whose error is already being answered: Node reports the error again for every
  // later chunk the client sends, and those must not answer twice.
  const answering = new WeakSet<Duplex>();
  server.on('clientError', (error: Error & { code?: string }, socket: Duplex) => {
    const code = rawCodeFor(error.code);
    // Only a parse error or a timeout can still be answered: a reset or a broken pipe just closes.
    if (code === null || !socket.writable) {
      socket.destroy();
      return;
    }
    if (answering.has(socket)) return;
    answering.add(socket);
    const answer = () => {
      if (!socket.writable) {
        socket.destroy();
        return;
      }
      logger.event({ level: 'warn', event: 'client_error', code, nodeCode: error.code ?? null });
      answerAndClose(socket, rawErrorResponse(code, RAW_MESSAGE[code]), limits.lingerMs);
    };
    const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (inFlight && !inFlight.req.complete) {
      // The error is in this request's own body, or its time ran out: answer it now, unless its
      // answer has begun (then nothing well-formed can follow).
      if (inFlight.headersSent) socket.destroy();
      else answer();
      return;
    }
    // RFC 9112 section 9.6: bytes after a request that said `Connection: close` are not a
    // request. Node closes the connection once that request is answered; nothing to add.
    if (error.code === 'HPE_CLOSED_CONNECTION') return;
    // Earlier requests on this connection keep their answers, in order; the error comes last.
    afterResponses(socket, answer);
  });
  return server;
}

function definedOnly(options: ServerOptions): ServerOptions {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
}

function ignore(): void {}

/** Which of our codes answers an error Node raised while reading a request, or null for none. */
function rawCodeFor(nodeCode: string | undefined): RawCode | null {
  if (nodeCode === 'ERR_HTTP_REQUEST_TIMEOUT') return 'request_timeout';
  if (nodeCode === 'HPE_HEADER_OVERFLOW') return 'headers_too_large';
  if (nodeCode === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return 'payload_too_large';
  if (nodeCode?.startsWith('HPE_')) return 'bad_request';
  return null;
}

/** Runs `action` once no response is being written on `socket` (pipelined ones included). */
function afterResponses(socket: Duplex, action: () => void): void {
  const current = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (!current) {
    action();
    return;
  }
  // Node's own 'finish' listener runs first and hands the socket to the next queued response.
  current.once('finish', () => setImmediate(() => afterResponses(socket, action)));
  current.once('close', () => {
    if (!current.writableFinished) socket.destroy();
  });
}

/**
 * Sends a final answer and closes our side; the connection is destroyed once the client closes
 * too, or after `lingerMs` whatever the client does (a client that keeps the connection
 * half-open must not keep a file descriptor forever).
 */
function answerAndClose(socket: Duplex, response: string, lingerMs: number): void {
  socket.end(response);
  const timer = setTimeout(() => socket.destroy(), lingerMs);
  timer.unref();
  socket.once('close', () => clearTimeout(timer));
}

const RAW_MESSAGE = {
  bad_request: 'The request is not valid HTTP.',
  request_timeout: 'The request took too long to arrive.',
  payload_too_large: 'The request has chunk extensions larger than Node accepts.',
  headers_too_large: 'The request headers are larger than 16 KiB.',
  unavailable: 'The server cannot take this connection.',
} as const;
type RawCode = keyof typeof RAW_MESSAGE;

/** Headers as raw `Name: value` lines. */
const rawHeaderLines = (headers: Readonly<Record<string, string>>) => Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');

/** The headers every answer carries, as the app sends them, in raw form. */
const RAW_COMMON_HEADERS = rawHeaderLines(COMMON_HEADERS);

/** A complete HTTP/1.1 response for errors raised while Node was still parsing the request. */
function rawResponse(code: RawCode, message: string, extraHeaders: string): string {
  const status = ERROR_STATUS[code];
  const body = errorJson(code, message, status);
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
    RAW_COMMON_HEADERS +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    `X-Request-Id: ${randomUUID()}\r\n` +
    extraHeaders +
    'Connection: close\r\n\r\n' +
    body
  );
}
