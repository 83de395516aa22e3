/**
 * Real webhook receivers for tests: node:http or node:https servers on a loopback address, each
 * answering as the test says and recording what arrived (method, path, headers, body, the TLS
 * name the client asked for) and how many connections it saw open and close. The HTTPS ones
 * carry a certificate made by openssl for the test (a throwaway authority and a leaf for a test
 * host name), which the client trusts through its `ca` option, never by turning checks off.
 * Outside CI a machine without openssl skips the HTTPS tests with one line; with CI=true a
 * missing openssl is a failure (.ci/run installs it).
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';

export interface Received {
  readonly method: string;
  /** The request target: path and query. */
  readonly target: string;
  readonly headers: IncomingMessage['headers'];
  readonly body: string;
  /** The name the client sent in TLS's server name indication, or null (plain HTTP, or none). */
  readonly servername: string | null;
  /** The local address the request arrived on. */
  readonly address: string;
}

export interface Receiver {
  readonly port: number;
  readonly requests: Received[];
  /** Connections opened and closed so far. */
  readonly connections: { opened: number; closed: number };
  /** Resolves with the next request once it has fully arrived (or the one already there). */
  nextRequest(): Promise<Received>;
}

/** How a receiver answers a request that has arrived: it writes `response` itself (or never does). */
export type Answer = (request: Received, response: ServerResponse) => void;

export interface ReceiverOptions {
  host?: string;
  port?: number;
  tls?: { key: string; cert: string };
}

/** A receiver listening until the test ends (its open connections destroyed then). */
export async function startReceiver(t: { after(fn: () => Promise<void> | void): void }, answer: Answer, options: ReceiverOptions = {}): Promise<Receiver> {
  const requests: Received[] = [];
  const waiters: ((request: Received) => void)[] = [];
  const connections = { opened: 0, closed: 0 };
  const handle = (request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const socket = request.socket as TLSSocket;
      const received: Received = {
        method: request.method ?? '',
        target: request.url ?? '',
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        servername: typeof socket.servername === 'string' ? socket.servername : null,
        address: socket.localAddress ?? '',
      };
      requests.push(received);
      waiters.splice(0).forEach((wake) => wake(received));
      answer(received, response);
    });
  };
  const server: Server = options.tls === undefined ? createHttpServer(handle) : createHttpsServer(options.tls, handle);
  const sockets = new Set<Socket>();
  server.on(options.tls === undefined ? 'connection' : 'secureConnection', (socket) => {
    connections.opened++;
    sockets.add(socket);
    socket.on('close', () => {
      connections.closed++;
      sockets.delete(socket);
    });
  });
  server.listen(options.port ?? 0, options.host ?? '127.0.0.1');
  await once(server, 'listening');
  t.after(async () => {
    for (const socket of sockets) socket.destroy();
    server.close();
    await once(server, 'close');
  });
  return {
    port: (server.address() as AddressInfo).port,
    requests,
    connections,
    nextRequest: () => (requests.length > 0 ? Promise.resolve(requests.at(-1)!) : new Promise((resolve) => waiters.push(resolve))),
  };
}

/** Why the HTTPS receivers cannot run here, or undefined when they can. Throws under CI=true. */
export const opensslSkip: string | undefined = (() => {
  if (spawnSync('openssl', ['version'], { stdio: 'ignore' }).status === 0) return undefined;
  const why = 'openssl is not installed: apt-get install openssl to run this test';
  if (process.env.CI === 'true') throw new Error(`${why} (CI=true: a missing component is a failure; .ci/run installs it)`);
  return why;
})();

export interface Certificates {
  /** The throwaway authority's certificate, PEM: what the client trusts. */
  readonly ca: string;
  /** A leaf for each name asked for, signed by the authority. */
  readonly leaves: Record<string, { key: string; cert: string }>;
}

/** A throwaway certificate authority and a leaf certificate for each of `names` (DNS names), made by openssl. */
export function makeCertificates(t: { after(fn: () => void): void }, names: readonly string[]): Certificates {
  const dir = mkdtempSync(join(tmpdir(), 'pets-webhook-tls-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const openssl = (...args: string[]) => {
    const made = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`openssl ${args[0]}: ${made.stderr}`);
  };
  openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=Webhook test authority', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign');
  const leaves: Certificates['leaves'] = {};
  for (const [i, name] of names.entries()) {
    openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${i}.key`, '-out', `${i}.csr`, '-subj', `/CN=${name}`);
    writeFileSync(join(dir, `${i}.ext`), `subjectAltName=DNS:${name}\nextendedKeyUsage=serverAuth\n`);
    openssl('x509', '-req', '-in', `${i}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${i}.pem`, '-days', '1', '-extfile', `${i}.ext`);
    leaves[name] = { key: readFileSync(join(dir, `${i}.key`), 'utf8'), cert: readFileSync(join(dir, `${i}.pem`), 'utf8') };
  }
  return { ca: readFileSync(join(dir, 'ca.pem'), 'utf8'), leaves };
}
