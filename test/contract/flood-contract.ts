/**
 * The flood tests (docs/security.md, "Limits that hold under floods"), written once for
 * every storage engine: each engine's test file calls `floodContract` with a function that starts
 * the real server on it. The attack runs against that server on loopback, with distinct
 * 127.x.y.z source addresses, and the limiter's capacity for addresses is injected small so that
 * a flood of a few hundred addresses does what 100,100 did against the default.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { inParallel, loopbackAddress, needsLoopbackRange, requestFrom } from '../support/loopback.ts';

export interface FloodServer {
  /** http://127.0.0.1:port */
  url: string;
  /** Creates an enterprise key with its own numbers; returns the plain key. */
  createKey(perMinute: number, perDay: number): string | Promise<string>;
  /**
   * Stops this server as SIGTERM does (limiter state saved) and starts another on the same
   * storage, with the same clock and options.
   */
  restart(): Promise<FloodServer>;
}

export interface FloodOptions {
  /** Most client addresses the limiter holds; the flood sends three times as many. */
  maxAnonymousCallers: number;
  trustProxy: boolean;
}

/** Starts the real server on the engine under test; it is stopped when the test ends. */
export type StartFloodServer = (t: TestContext, options: FloodOptions) => Promise<FloodServer>;

const CAPACITY = 100;

interface Answer {
  status: number;
  headers: Headers;
  /** The error code, for an Error body. */
  code: string | undefined;
}

async function get(server: FloodServer, headers: Record<string, string>): Promise<Answer> {
  const response = await fetch(`${server.url}/v1/pets`, { headers });
  const body = (await response.json()) as { code?: string };
  return { status: response.status, headers: response.headers, code: body.code };
}

/** Bans the caller that `headers` identify: requests until the answer is temporarily_banned. */
async function ban(server: FloodServer, headers: Record<string, string>): Promise<void> {
  for (let i = 0; i < 1_000; i++) {
    const response = await get(server, headers);
    if (response.code === 'temporarily_banned') return;
  }
  assert.fail('the caller was never banned');
}

export function floodContract(engine: string, start: StartFloodServer): void {
  test(`${engine}: a flood of new addresses leaves a key's spent quota and its ban as they were, across a restart too`, async (t) => {
    // Reproduced on 1.0: an enterprise key with 300 a day spent 298, then one keyless request
    // from each of 100,100 addresses, and the key answered "day";r=299.
    if (!(await needsLoopbackRange(t))) return;
    let server = await start(t, { maxAnonymousCallers: CAPACITY, trustProxy: false });
    const spent = { authorization: `Bearer ${await server.createKey(1_000, 10)}` };
    const banned = { authorization: `Bearer ${await server.createKey(2, 1_000)}` };
    for (let i = 0; i < 8; i++) assert.equal((await get(server, spent)).status, 200);
    await ban(server, banned);

    const statuses = new Map<number, number>();
    await inParallel(3 * CAPACITY, 16, async (index) => {
      const { status } = await requestFrom(server.url, loopbackAddress(index));
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    });
    assert.ok(![...statuses.keys()].some((status) => status === 200 || status >= 500), `flood answers ${JSON.stringify([...statuses])}`);

    const after = await get(server, spent);
    assert.equal(after.status, 200);
    assert.match(after.headers.get('ratelimit')!, /"day";r=1;/, 'one token of the day left, not a fresh quota');
    assert.equal((await get(server, banned)).code, 'temporarily_banned');

    server = await server.restart();
    const last = await get(server, spent);
    assert.equal(last.status, 200);
    assert.match(last.headers.get('ratelimit')!, /"day";r=0;/);
    const refused = await get(server, spent);
    assert.equal(refused.status, 429);
    assert.equal(refused.code, 'rate_limited');
    assert.equal((await get(server, banned)).code, 'temporarily_banned');
  });

  test(`${engine}: with TRUST_PROXY, every spelling of a banned address shares its ban, a /64 is one caller, and junk counts as the proxy`, async (t) => {
    const server = await start(t, { maxAnonymousCallers: CAPACITY, trustProxy: true });
    const from = (hop: string) => ({ 'x-forwarded-for': `203.0.113.7, ${hop}` });
    await ban(server, from('9.9.9.9'));
    for (const spelling of ['::ffff:9.9.9.9', '9.9.9.9:1234', '09.9.9.9', '[::ffff:9.9.9.9]:443', '::FFFF:909:909', ' 9.9.9.9 ']) {
      const response = await get(server, from(spelling));
      assert.equal(response.status, 429, spelling);
      assert.equal(response.code, 'temporarily_banned', spelling);
    }
    const remaining = async (hop: string) => (await get(server, from(hop))).headers.get('x-ratelimit-remaining');
    assert.equal(await remaining('2001:db8:0:7::1'), '59');
    assert.equal(await remaining('2001:db8:0:7:ffff:ffff:ffff:ffff'), '58', 'the same /64');
    assert.equal(await remaining('[2001:db8:0:7::2]:8443'), '57', 'the same /64, with a port');
    assert.equal(await remaining('2001:db8:0:8::1'), '59', 'the next /64 is another caller');
    // Not an IP address: the peer (the proxy) is the caller, so junk never opens a fresh bucket.
    const junk = ['unknown', '9.9.9.9.9', '9.9.9.256', 'fe80::1::2', '[9.9.9.9]', 'x'.repeat(200)];
    for (const [index, hop] of junk.entries()) assert.equal(await remaining(hop), String(59 - index), JSON.stringify(hop));
  });
}
