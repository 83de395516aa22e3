/**
 * Many client addresses on one machine: Linux routes all of 127.0.0.0/8 to the loopback
 * interface, so a client socket bound to `127.x.y.z` (`localAddress`) reaches a server on
 * 127.0.0.1 and is seen coming from that address. The flood and connection-cap tests
 * need this; elsewhere (macOS has only 127.0.0.1) they are skipped, and with CI=true they fail.
 */
import type { TestContext } from 'node:test';
import { createServer, connect, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { request as httpRequest } from 'node:http';

/** A distinct loopback address for each index from 0 to about 16 million, never 127.0.0.1. */
export function loopbackAddress(index: number): string {
  return `127.${1 + ((index >> 16) & 255)}.${(index >> 8) & 255}.${index & 255}`;
}

let available: Promise<boolean> | undefined;

/** Whether a socket bound to 127.0.0.2 reaches 127.0.0.1 here. */
function probe(): Promise<boolean> {
  available ??= (async () => {
    const server = createServer((socket) => socket.destroy()).listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const socket = connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port, localAddress: '127.0.0.2' });
      socket.on('error', () => {});
      const [outcome] = await Promise.race([once(socket, 'connect').then(() => ['ok']), once(socket, 'error').then(() => ['failed'])]);
      socket.destroy();
      return outcome === 'ok';
    } finally {
      server.close();
    }
  })();
  return available;
}

/**
 * True when the test can use many loopback addresses; otherwise skips it with one line saying
 * how to run it (or throws with CI=true, where a missing component is a failure) and returns false.
 */
export async function needsLoopbackRange(t: TestContext): Promise<boolean> {
  if (await probe()) return true;
  const why = 'needs 127.0.0.0/8 on the loopback interface, as Linux has it: run this test on Linux';
  if (process.env.CI === 'true') throw new Error(why);
  t.skip(why);
  return false;
}

export interface AnswerFrom {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One request on a new connection from `localAddress`, as a client at that address would send it. */
export function requestFrom(url: string, localAddress: string, init: { path?: string; method?: string; headers?: Record<string, string> } = {}): Promise<AnswerFrom> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}${init.path ?? '/v1/pets'}`, { method: init.method ?? 'GET', localAddress, agent: false, headers: { connection: 'close', ...init.headers } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk)).on('end', () => {
        resolve({ status: res.statusCode!, headers: res.headers as Record<string, string>, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** Runs `work` on 0..count-1 with at most `parallel` at a time. */
export async function inParallel(count: number, parallel: number, work: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await work(next++);
  };
  await Promise.all(Array.from({ length: Math.min(parallel, count) }, worker));
}
