/**
 * Errors that Node raises while it is still reading a request (a malformed request line or
 * header, headers over 16 KiB, a request that took too long), answered in the contract's Error
 * shape instead of Node's bare responses, as raw HTTP on the socket: the app never ran.
 */
import type { Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { HTTP_ERROR_STATUS } from './api-error.ts';
import type { Logger } from './access-log.ts';
import { COMMON_HEADERS, errorJson } from './reply.ts';

const { randomUUID } = process.getBuiltinModule('node:crypto');

// Not `import ... from 'node:http'`: see server.ts.
const { STATUS_CODES } = process.getBuiltinModule('node:http');

/** A raw error answer: the code and message, plus header lines that end in CRLF. */
export type RawErrorResponse = (code: RawCode, message: string, extraHeaders?: string) => string;

/** Raw error answers that also carry `headers` (CORS of `*`, which needs no Origin). */
export function rawErrorResponses(headers: Readonly<Record<string, string>>): RawErrorResponse {
  const extra = rawHeaderLines(headers);
  return (code, message, extraHeaders = '') => rawResponse(code, message, extraHeaders + extra);
}

export interface ClientErrorOptions {
  logger: Logger;
  rawErrorResponse: RawErrorResponse;
  lingerMs: number;
}

/** Answers Node's `clientError`s on `server` in the Error shape, then closes the connection. */
export function answerClientErrors(server: Server, { logger, rawErrorResponse, lingerMs }: ClientErrorOptions): void {
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
      answerAndClose(socket, rawErrorResponse(code, RAW_MESSAGE[code]), lingerMs);
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
}

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
export function answerAndClose(socket: Duplex, response: string, lingerMs: number): void {
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
export type RawCode = keyof typeof RAW_MESSAGE;

/** Headers as raw `Name: value` lines. */
const rawHeaderLines = (headers: Readonly<Record<string, string>>) => Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');

/** The headers every answer carries, as the app sends them, in raw form. */
const RAW_COMMON_HEADERS = rawHeaderLines(COMMON_HEADERS);

/** A complete HTTP/1.1 response for errors raised while Node was still parsing the request. */
function rawResponse(code: RawCode, message: string, extraHeaders: string): string {
  const status = HTTP_ERROR_STATUS[code];
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
