/**
 * The probe of a list of hosts (src/storage/postgres/database.ts, primaryProbe) against servers that
 * are not PostgreSQL: it gives up within its bound, and leaves nothing connecting after it. The
 * probe against real primaries and standbys is in test/e2e/failover.test.ts.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { once } from 'node:events';
import { postgresPools } from '../../../src/storage/postgres/database.ts';

/** A TCP server on 127.0.0.1 that closes each connection at once, counting them. */
async function closingServer(): Promise<{ server: Server; port: number; connections: () => number }> {
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    socket.destroy();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { server, port: (server.address() as { port: number }).port, connections: () => connections };
}

test('a probe of hosts that close every connection fails within its bound, and stops connecting', { timeout: 5_000 }, async (t) => {
  const [first, second] = [await closingServer(), await closingServer()];
  t.after(() => {
    first.server.close();
    second.server.close();
  });
  const open = await postgresPools(`postgres://tests@127.0.0.1:${first.port},127.0.0.1:${second.port}/pets?target_session_attrs=read-write`, { poolSize: 1 });
  const started = performance.now();
  await assert.rejects(open.probe!(200), AggregateError);
  const took = performance.now() - started;
  assert.ok(took >= 190 && took < 1_000, `gave up after ${Math.round(took)} ms`);
  // The driver connects again at once to a server that closes the connection before answering:
  // many connections within the bound, then none once the probe's pools are ended (an attempt
  // already scheduled when they end still opens its socket).
  assert.ok(first.connections() > 1 && second.connections() > 1);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const counted = [first.connections(), second.connections()];
  await new Promise((resolve) => setTimeout(resolve, 400));
  assert.deepEqual([first.connections(), second.connections()], counted, 'no connection after the probe failed');
});

test('a probe of one host that refuses and one that closes fails within its bound; a single host has no probe', async (t) => {
  const closing = await closingServer();
  t.after(() => closing.server.close());
  const refusing = createServer();
  refusing.listen(0, '127.0.0.1');
  await once(refusing, 'listening');
  const refusedPort = (refusing.address() as { port: number }).port;
  refusing.close();
  const open = await postgresPools(`postgres://tests@127.0.0.1:${refusedPort},127.0.0.1:${closing.port}/pets?target_session_attrs=read-write`, { poolSize: 1 });
  await assert.rejects(open.probe!(200), (error: unknown) => error instanceof AggregateError && (error.errors[0] as { code?: string }).code === 'ECONNREFUSED');
  assert.equal((await postgresPools(`postgres://tests@127.0.0.1:${closing.port}/pets`, { poolSize: 1 })).probe, null);
});
