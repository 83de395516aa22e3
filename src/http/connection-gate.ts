/**
 * The caps on open connections: in total, and per client address (the socket's peer, IPv6 by
 * /64; `MAX_CONNECTIONS_PER_ADDRESS`). Over a cap, a new connection gets a raw
 * `503 unavailable` and is closed, and never reaches the HTTP parser, while other addresses keep
 * being served.
 */
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import type { Logger } from './access-log.ts';
import { peerAddress } from './client-address.ts';
import { answerAndClose, type RawErrorResponse } from './client-errors.ts';
import type { ProxyTrust } from './trusted-proxies.ts';

/**
 * The address under which the connections of every listed proxy (`TRUST_PROXY` with a list) are
 * counted: not an IP address, so no client's can be spelled like it, and exempt from the
 * per-address cap, since every client of the proxy arrives through it (the proxy's clients are
 * limited per forwarded address, per request). The server's total cap still counts them.
 */
export const TRUSTED_PROXY = 'trusted-proxy';

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
      if (fromAddress >= caps.maxConnectionsPerAddress && address !== TRUSTED_PROXY) return { openConnectionsFromAddress: fromAddress };
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

export interface AdmissionOptions {
  gate: ConnectionGate;
  logger: Logger;
  rawErrorResponse: RawErrorResponse;
  /** The server's own cap; Node's is set to twice it, as a backstop. */
  maxConnections: number;
  lingerMs: number;
  /** The listed proxies (`TRUST_PROXY` with a list), counted as TRUSTED_PROXY; absent: none. */
  proxies?: ProxyTrust | null;
}

/** Puts `gate` in front of `server`'s HTTP parser: every new connection is admitted or refused first. */
export function admitConnections(server: Server, { gate, logger, rawErrorResponse, maxConnections, lingerMs, proxies = null }: AdmissionOptions): void {
  // The connection caps. Node's own `server.maxConnections` closes the connection without a
  // word, so the http connection listener is wrapped instead: over a cap, a connection gets a
  // raw `503 unavailable` and is closed, and never reaches the HTTP parser. Node's cap stays as
  // a backstop (twice ours) against a flood of connections that linger after their refusal.
  const [httpConnectionListener] = server.listeners('connection') as ((socket: Duplex) => void)[];
  if (httpConnectionListener === undefined) throw new Error('node:http registered no connection listener');
  server.removeAllListeners('connection');
  server.maxConnections = maxConnections * 2;
  const refuse = (socket: Duplex, fields: ConnectionRefusal) => {
    logger.event({ level: 'warn', event: 'connection_refused', code: 'unavailable', ...fields });
    socket.on('error', ignore);
    socket.resume(); // whatever the client sends is read and dropped, never held
    answerAndClose(socket, rawErrorResponse('unavailable', 'Too many open connections; retry shortly.', 'Retry-After: 1\r\n'), lingerMs);
  };
  const serve = (socket: Socket, address: string) => {
    socket.once('close', () => gate.release(address));
    httpConnectionListener.call(server, socket);
  };
  server.on('connection', (socket: Socket) => {
    const address = proxies?.trustsPeer(socket) ? TRUSTED_PROXY : peerAddress(socket);
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
}

function ignore(): void {}
