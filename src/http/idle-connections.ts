/**
 * Which open connections of a server are idle (no request being read or answered) and since
 * when, so that a draining server closes a keep-alive connection only once its client has had
 * time to see that nothing more is coming, rather than under a request already on its way.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';

const tracked = new WeakMap<Server, Map<Socket, number | null>>();

/** Starts tracking `server`'s connections (call once the connection listeners are in place). */
export function trackIdleConnections(server: Server, now: () => number = () => performance.now()): void {
  const sockets = new Map<Socket, number | null>();
  tracked.set(server, sockets);
  server.on('connection', (socket: Socket) => {
    sockets.set(socket, now());
    socket.once('close', () => sockets.delete(socket));
  });
  const busy = (req: { socket: Socket }, res: { once(event: 'finish', listener: () => void): unknown }) => {
    sockets.set(req.socket, null);
    res.once('finish', () => {
      if (sockets.has(req.socket)) sockets.set(req.socket, now());
    });
  };
  server.on('request', busy);
  server.on('checkExpectation', busy);
}

/**
 * Closes every connection of `server` that has been idle for `idleMs`, counting from now at the
 * earliest, and keeps doing so every `everyMs` until the server has closed. A connection that
 * gets a request meanwhile is answered (with `Connection: close`, the app's drain) and closed
 * after its answer, so no request that reached the server is cut.
 */
export function closeIdleConnectionsAfter(server: Server, idleMs: number, everyMs = Math.max(10, idleMs / 10), now: () => number = () => performance.now()): void {
  const sockets = tracked.get(server);
  if (sockets === undefined) {
    server.closeIdleConnections();
    return;
  }
  const start = now();
  for (const [socket, idleSince] of sockets) if (idleSince !== null && idleSince < start) sockets.set(socket, start);
  const sweep = () => {
    const time = now();
    for (const [socket, idleSince] of sockets) {
      if (idleSince !== null && time - idleSince >= idleMs) socket.destroy();
    }
  };
  const timer = setInterval(sweep, everyMs);
  timer.unref();
  server.once('close', () => clearInterval(timer));
  if (idleMs === 0) sweep();
}
