/**
 * Listening and draining, the same for the single process and for each worker thread: a server
 * listens on HOST:PORT, and on shutdown stops accepting, lets the requests in flight finish (at
 * most SHUTDOWN_GRACE_MS), and asks every keep-alive client to close.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { App } from '../http/server.ts';
import { closeIdleConnectionsAfter } from '../http/idle-connections.ts';

/** How long requests in flight may take to finish after SIGTERM/SIGINT. */
export const SHUTDOWN_GRACE_MS = 10_000;

/** Listens; resolves with the bound address, or rejects with the listener's error (a busy port). */
export function listen(server: Server, options: { port: number; host: string; reusePort?: boolean }): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/**
 * How long a keep-alive connection may stay idle once shutdown began: a client that sends its
 * next request within it gets an answer (with `Connection: close`) rather than a closed socket.
 */
export const DRAIN_IDLE_MS = 1_000;

// Node's http `close()` also closes every idle keep-alive connection at once, under any request
// already on its way; only the listening socket is closed here, and idle ones after DRAIN_IDLE_MS.
const { Server: NetServer } = process.getBuiltinModule('node:net');

/**
 * Stops accepting new connections and lets the open ones finish: requests that arrive on them are
 * served as usual, with `Connection: close` (the app's drain; /healthz says 503 so that a load
 * balancer stops sending traffic here), and a connection idle for DRAIN_IDLE_MS is closed. What
 * is still open after `graceMs` is cut. Resolves once the last connection has closed.
 *
 * Closing idle connections at once, as before, cut requests already on their way: under keep-alive
 * load without a proxy, a SIGTERM gave 14 read errors in wrk.
 */
export function drainServer(app: App, server: Server, graceMs = SHUTDOWN_GRACE_MS, idleMs = DRAIN_IDLE_MS): Promise<void> {
  app.drain();
  const closed = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
  closeIdleConnectionsAfter(server, Math.min(idleMs, graceMs));
  // Requests still running after the grace period are cut so that the process can exit.
  setTimeout(() => server.closeAllConnections(), graceMs).unref();
  return closed;
}

/** The URL of a bound address, as the `listening` log line gives it. */
export function urlOf({ address, port }: { address: string; port: number }): string {
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
}

/** The one line of a failed listen; names SO_REUSEPORT where the platform lacks it (WORKERS). */
export function listenFailure(host: string, port: number, code: string): string {
  if (code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'ERR_INVALID_ARG_VALUE') {
    return `cannot listen on ${host}:${port}: WORKERS above 1 needs SO_REUSEPORT (reusePort), which this platform does not offer (${code}); set WORKERS=1`;
  }
  return `cannot listen on ${host}:${port}: ${code}`;
}
