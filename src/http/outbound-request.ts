/**
 * One outbound POST to a URL a client chose, bounded so that the far end can neither hold the
 * service nor steer it: it connects only to addresses already checked (see
 * outbound-resolution.ts) while naming the URL's host for TLS (SNI and the certificate check) and
 * in `Host`; it follows no redirect; it reads at most `maxResponseBytes` of the answer's body and
 * throws them away; it stops when `signal` aborts; and each request has a connection of its own,
 * closed at the end (no pooled connection could carry one request to another's host).
 */
import type { ClientRequest, IncomingMessage, RequestOptions } from 'node:http';
import { isIP } from 'node:net';
import { codeOf, lookupFrom, type ResolvedAddress } from './outbound-resolution.ts';

// Not `import ... from 'node:http'` nor 'node:https': this module is loaded at every start, and
// Node's ES-module view of either reads every export once, loading undici (see server.ts).
const { request: httpRequest } = process.getBuiltinModule('node:http');

export interface OutboundPost {
  /** An `http:` or `https:` URL. */
  readonly url: URL;
  /** The checked addresses of the URL's host: the only ones connected to. */
  readonly addresses: readonly ResolvedAddress[];
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly maxResponseBytes: number;
  /** Aborting ends the request wherever it is: connecting, sending or reading. */
  readonly signal: AbortSignal;
  /**
   * The certificates to trust instead of Node's own roots (a test's throwaway authority). The
   * certificate is always checked: there is no way to turn that off.
   */
  readonly ca?: string;
}

/** The status of the answer, or the code of why none came (`ECONNREFUSED`, `ABORT_ERR` ...). */
export type OutboundAnswer = { readonly status: number } | { readonly failed: string };

/** Sends `post`; resolves once its answer's body is read (up to the cap) or the request failed. Never rejects. */
export function postOnce(post: OutboundPost): Promise<OutboundAnswer> {
  return new Promise((resolve) => {
    let status: number | null = null;
    let settled = false;
    const settle = (answer: OutboundAnswer) => {
      if (settled) return;
      settled = true;
      client.destroy();
      resolve(answer);
    };
    const client = send(post);
    client.on('response', (response) => {
      status = response.statusCode ?? 0;
      drain(response, post.maxResponseBytes, () => settle({ status: status! }));
    });
    client.on('error', (error) => settle(status !== null ? { status } : { failed: codeOf(error) }));
    client.end(post.body);
  });
}

/** The request of `post`, on a connection of its own to one of its checked addresses. */
function send(post: OutboundPost): ClientRequest {
  const { url } = post;
  const secure = url.protocol === 'https:';
  // URL writes an IPv6 host in brackets; the socket wants the bare address.
  const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const options: RequestOptions & { servername?: string; ca?: string } = {
    method: 'POST',
    host: hostname,
    port: url.port === '' ? (secure ? 443 : 80) : Number(url.port),
    path: `${url.pathname}${url.search}`,
    headers: { ...post.headers, host: url.host, 'content-length': String(Buffer.byteLength(post.body)) },
    // No agent: a connection of its own, `Connection: close`, nothing pooled for the next request.
    agent: false,
    lookup: lookupFrom(hostname, post.addresses),
    signal: post.signal,
  };
  if (!secure) return httpRequest(options);
  // SNI carries a name, never an address (RFC 6066 section 3), and never its trailing dot.
  if (isIP(hostname) === 0) options.servername = hostname.replace(/\.$/, '');
  if (post.ca !== undefined) options.ca = post.ca;
  // node:https (with node:tls) is loaded by the first https delivery: loaded at the start, it took
  // about 7 ms of it.
  return process.getBuiltinModule('node:https').request(options);
}

/** Reads `response` until its end or `limit` bytes, whichever comes first, keeping none of it; then `done`. */
function drain(response: IncomingMessage, limit: number, done: () => void): void {
  let read = 0;
  response.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (read >= limit) done();
  });
  response.on('end', done);
  response.on('error', done);
  response.on('aborted', done);
}
