/**
 * The node:http server: the contract's timeouts and size limits, and errors that Node raises
 * before our handler runs (malformed requests, oversized headers, timeouts) answered in the
 * contract's Error shape instead of Node's bare responses.
 */
import { createServer, STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import type { App } from './app.ts';
import type { Logger } from './access-log.ts';
import { errorJson } from './reply.ts';

export const SERVER_LIMITS = {
  /** Request headers must arrive within 10 s ... */
  headersTimeoutMs: 10_000,
  /** ... and the whole request within 30 s. */
  requestTimeoutMs: 30_000,
  /** An idle keep-alive connection closes after 5 s. */
  keepAliveTimeoutMs: 5_000,
  /** Node only enforces the two timeouts above on this interval: a cut may come this late. */
  connectionsCheckingIntervalMs: 2_000,
  maxHeaderBytes: 16 * 1024,
} as const;

export interface ServerOptions {
  maxConnections?: number;
}

/** Creates (does not start) the HTTP server around the app. */
export function createHttpServer(app: App, logger: Logger, options: ServerOptions = {}): Server {
  const server = createServer(
    {
      headersTimeout: SERVER_LIMITS.headersTimeoutMs,
      requestTimeout: SERVER_LIMITS.requestTimeoutMs,
      keepAliveTimeout: SERVER_LIMITS.keepAliveTimeoutMs,
      connectionsCheckingInterval: SERVER_LIMITS.connectionsCheckingIntervalMs,
      maxHeaderSize: SERVER_LIMITS.maxHeaderBytes,
    },
    app.handle,
  );
  if (options.maxConnections !== undefined) server.maxConnections = options.maxConnections;
  server.on('clientError', (error: Error & { code?: string }, socket: Socket) => {
    const code = error.code === 'HPE_HEADER_OVERFLOW'
      ? 'headers_too_large'
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'request_timeout'
        : 'bad_request';
    logger.event({ level: 'warn', event: 'client_error', code, nodeCode: error.code ?? null });
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    socket.end(rawErrorResponse(code));
  });
  return server;
}

const RAW_STATUS = { bad_request: 400, request_timeout: 408, headers_too_large: 431 } as const;
const RAW_MESSAGE = {
  bad_request: 'The request is not valid HTTP.',
  request_timeout: 'The request took too long to arrive.',
  headers_too_large: 'The request headers are larger than 16 KiB.',
} as const;

/** A complete HTTP/1.1 response for errors raised while Node was still parsing the request. */
function rawErrorResponse(code: keyof typeof RAW_STATUS): string {
  const status = RAW_STATUS[code];
  const body = errorJson(code, RAW_MESSAGE[code], status);
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Cache-Control: no-store\r\n' +
    'X-Content-Type-Options: nosniff\r\n' +
    `X-Request-Id: ${randomUUID()}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}
