/**
 * A raw TCP client for tests that must misbehave in ways fetch will not: partial headers, a
 * byte at a time, malformed request lines, bodies larger than announced, half-open sockets.
 */
import { connect, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  /** Header names in lower case; a repeated header keeps its last value. */
  headers: Record<string, string>;
  body: string;
}

export interface RawConnection {
  socket: Socket;
  /** Milliseconds since the connection was opened. */
  elapsed(): number;
  /** Everything received so far, as latin1 text. */
  received(): string;
  /** The first complete response (by its Content-Length); rejects if the connection closes first. */
  response: Promise<RawResponse>;
  /** Resolves with `elapsed()` once the connection is fully closed (by either side). */
  closed: Promise<number>;
  /** Writes unless the connection is gone; never throws. */
  write(data: string | Uint8Array): boolean;
  /** Writes `data` one byte every `everyMs` until it is all sent or the connection closes. */
  trickle(data: string, everyMs: number): void;
}

/**
 * Opens a connection to `url` (http://host:port). With `allowHalfOpen`, the client keeps its
 * side open after the server closes its own, as a hostile client would. With `localAddress`
 * (such as `127.0.0.2`: Linux routes all of 127.0.0.0/8 to loopback), the server sees the
 * connection come from that address.
 */
export function openRaw(url: string, { allowHalfOpen = false, localAddress }: { allowHalfOpen?: boolean; localAddress?: string } = {}): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  const started = performance.now();
  const socket = connect({ host: hostname, port: Number(port), allowHalfOpen, ...(localAddress !== undefined ? { localAddress } : {}) });
  let text = '';
  let settleResponse: { resolve: (response: RawResponse) => void; reject: (error: Error) => void };
  const response = new Promise<RawResponse>((resolve, reject) => {
    settleResponse = { resolve, reject };
  });
  response.catch(() => {}); // a test that does not wait for a response must not fail on it
  let done = false;
  socket.on('data', (chunk: Buffer) => {
    text += chunk.toString('latin1');
    if (done) return;
    const parsed = parseResponse(text);
    if (parsed) {
      done = true;
      settleResponse.resolve(parsed);
    }
  });
  socket.on('error', () => {}); // EPIPE/ECONNRESET after a refusal are expected; `closed` tells
  const closed = new Promise<number>((resolve) => {
    socket.on('close', () => {
      if (!done) settleResponse.reject(new Error(`closed before a full response; received ${JSON.stringify(text.slice(0, 200))}`));
      resolve(performance.now() - started);
    });
  });
  const connection: RawConnection = {
    socket,
    elapsed: () => performance.now() - started,
    received: () => text,
    response,
    closed,
    write(data) {
      if (socket.destroyed || socket.writableEnded) return false;
      return socket.write(data);
    },
    trickle(data, everyMs) {
      let index = 0;
      const timer = setInterval(() => {
        if (index >= data.length || socket.destroyed || socket.writableEnded) {
          clearInterval(timer);
          return;
        }
        connection.write(data[index++]!);
      }, everyMs);
      socket.once('close', () => clearInterval(timer));
    },
  };
  return new Promise((resolve, reject) => {
    socket.once('connect', () => resolve(connection));
    socket.once('error', reject);
  });
}

/** Parses one complete HTTP/1.1 response with a Content-Length, or returns null if incomplete. */
export function parseResponse(text: string): RawResponse | null {
  const end = text.indexOf('\r\n\r\n');
  if (end === -1) return null;
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3}) /.exec(statusLine ?? '')?.[1]);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  const bodyBytes = Buffer.from(text.slice(end + 4), 'latin1');
  if (bodyBytes.length < length) return null;
  return { status, headers, body: bodyBytes.subarray(0, length).toString('utf8') };
}

/** Sends one request on a fresh connection (from `localAddress` if given) and returns the response. */
export async function rawRequest(url: string, request: string | Uint8Array, { localAddress }: { localAddress?: string } = {}): Promise<RawResponse> {
  const connection = await openRaw(url, localAddress !== undefined ? { localAddress } : {});
  connection.write(request);
  try {
    return await connection.response;
  } finally {
    connection.socket.destroy();
  }
}

/** Asserts-free check that a body is exactly the contract's Error shape; returns its code. */
export function errorCode(response: RawResponse): string {
  const body = JSON.parse(response.body) as Record<string, unknown>;
  if (Object.keys(body).join() !== 'code,message,status' || body.status !== response.status) {
    throw new Error(`not an Error body for ${response.status}: ${response.body}`);
  }
  return body.code as string;
}
