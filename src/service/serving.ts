/**
 * Listening and draining, the same for the single process and for each worker thread: a server
 * listens on HOST:PORT, and on shutdown stops accepting, lets the requests in flight finish (at
 * most SHUTDOWN_GRACE_MS), and asks every keep-alive client to close.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { App } from '../http/server.ts';

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
 * Stops accepting, answers what arrives on open connections with `503` and `Connection: close`
 * (the app's drain), closes idle connections now and the rest after the grace period; resolves
 * once the server has closed.
 */
export function drainServer(app: App, server: Server, graceMs = SHUTDOWN_GRACE_MS): Promise<void> {
  app.drain();
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
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
