// Experiment: the CPU time the per-address connection cap adds to each new connection (274-849 ns; docs/performance.md).
/**
 * What the per-address connection cap costs: the work it adds to each new connection,
 * measured in isolation, since it adds nothing per request. That work is the peer address's
 * normalisation and one update of the per-address count when the connection opens and closes.
 * A load test on a shared 2-core machine cannot see a cost this small; `npm run bench` on a
 * quiet machine is the check that nothing moved.
 *
 *   node_modules/.bin/node bench/experiments/connection-cap.ts
 */
import { peerAddress } from '../../src/http/client-address.ts';

const ITERATIONS = 2_000_000;
const ROUNDS = 5;

/** Best time per call over ROUNDS rounds, in nanoseconds, after a warm-up. */
function nanosecondsPerCall(work: () => void): number {
  for (let i = 0; i < ITERATIONS / 10; i++) work();
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < ROUNDS; round++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < ITERATIONS; i++) work();
    best = Math.min(best, Number(process.hrtime.bigint() - started) / ITERATIONS);
  }
  return best;
}

const servedByAddress = new Map<string, number>();
const peers = [
  ['IPv4', '127.0.0.1'],
  ['IPv4 on a dual-stack socket', '::ffff:203.0.113.9'],
  ['IPv6', '2001:db8:1:2:3:4:5:6'],
] as const;
for (const [kind, remoteAddress] of peers) {
  const socket = { remoteAddress };
  // What http/server.ts does for a connection under the cap, open then close.
  const perConnection = nanosecondsPerCall(() => {
    const address = peerAddress(socket);
    servedByAddress.set(address, (servedByAddress.get(address) ?? 0) + 1);
    const left = servedByAddress.get(address)! - 1;
    if (left === 0) servedByAddress.delete(address);
    else servedByAddress.set(address, left);
  });
  process.stdout.write(`${kind.padEnd(28)} ${perConnection.toFixed(0).padStart(5)} ns per connection (best of ${ROUNDS} x ${ITERATIONS})\n`);
}
