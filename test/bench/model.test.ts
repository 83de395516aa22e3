import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LoadResult } from '../../bench/measure.ts';
import { bound, buildModel, costsOf, formatModel, LINK_BITS_PER_SECOND, REMOTE_TAKE_US, resources, type Costs } from '../../bench/model.ts';
import type { Configuration, ScalingRow } from '../../bench/scaling.ts';

/** A 10 s run of `rps` requests a second whose parts used these many cores. */
function run(rps: number, cores: { server: number; main?: number; postgres?: number; generator: number; harness?: number; kernel?: number }): LoadResult {
  return {
    requests: rps * 10, non2xx: 0, errors: 0, timeouts: 0, durationS: 10, wallS: 10, rps,
    latencyMs: { p50: 1, p90: 1, p99: 2, mean: 1, max: 3 }, correctedP99Ms: 2, responseBytes: 1100, requestBytes: 150,
    cpu: {
      server: cores.server, serverMainThread: cores.main ?? cores.server, postgres: cores.postgres ?? 0, generator: cores.generator,
      harness: cores.harness ?? 0, kernel: cores.kernel ?? 0, other: 0, serverCore: null, generatorCore: null,
    },
    rssMax: 0,
  };
}

const sqlite = (workers: number): Configuration => ({ engine: 'sqlite', instances: 1, workers });
const postgres = (instances: number): Configuration => ({ engine: 'postgres', instances, workers: 1 });

test('a request\'s costs are each part\'s CPU over the responses, and the counters per response', () => {
  // 20,000 req/s for 10 s: 0.5 cores of the server is 25 us a request.
  const row: ScalingRow = {
    configuration: postgres(1), workload: 'list20', shared: false, commits: null,
    result: run(20_000, { server: 0.5, main: 0.4, postgres: 0.3, generator: 0.1, harness: 0.02, kernel: 0.04 }),
    postgres: { statements: 30_000, takeCalls: 10_000, takes: 200_000, takeMs: 2_000, walWrites: 12_000 },
  };
  const costs = costsOf(row);
  const round = (value: number) => Number(value.toFixed(6));
  assert.deepEqual(Object.fromEntries(Object.entries(costs).map(([key, value]) => [key, typeof value === 'number' ? round(value) : value])), {
    engine: 'postgres', workload: 'list20', rps: 20_000,
    serviceUs: 25, mainThreadUs: 20, writerUs: 0, postgresUs: 15, generatorUs: 5, harnessUs: 1, kernelUs: 2,
    flushes: 0.06, statements: 0.15, takeCalls: 0.05, takeCallUs: 200, requestBytes: 150, responseBytes: 1100,
  });
  assert.equal(costsOf({ ...row, configuration: sqlite(1), postgres: null, commits: 4_000 }).flushes, 0.02, 'SQLite: the file\'s commits');
  // One SQLite process: its threads other than the main one are the writer's (0.1 of a core).
  assert.equal(round(costsOf({ ...row, configuration: sqlite(1), postgres: null, commits: 4_000 }).writerUs), 5);
  assert.equal(costsOf({ ...row, configuration: sqlite(2), postgres: null, commits: 4_000 }).writerUs, 0, 'not told apart from the workers');
});

test('the bound of a deployment is its scarcest resource: capacity over demand', () => {
  assert.deepEqual(bound([{ name: 'a', demandUs: 10, capacity: 1 }, { name: 'b', demandUs: 30, capacity: 4 }, { name: 'idle', demandUs: 0, capacity: 1 }]), { rps: 100_000, bottleneck: 'a' });
  assert.deepEqual(bound([{ name: 'a', demandUs: 10, capacity: 1 }, { name: 'b', demandUs: 30, capacity: 2 }]), { rps: 2e6 / 30, bottleneck: 'b' });
});

const base: Costs = {
  engine: 'sqlite', workload: 'create', rps: 20_000, serviceUs: 40, mainThreadUs: 2, writerUs: 8, postgresUs: 0, generatorUs: 6, harnessUs: 1, kernelUs: 4,
  flushes: 0.02, statements: 0, takeCalls: 0, takeCallUs: 0, requestBytes: 150, responseBytes: 1250,
};

test('SQLite: the writer thread makes every write and waits for its fsyncs; every thread of a pinned server shares its core', () => {
  const flushUs = 500;
  // 40 us of CPU a request on the one core, 8 of them the writer's; the writer also waits 2 % of
  // a 500 us fsync a request: 18 us of its event loop.
  const pinned = resources(base, { kind: 'pinned' }, flushUs);
  assert.deepEqual(pinned.map((r) => [r.name, r.demandUs, r.capacity]), [
    ['server core', 40, 1],
    ['SQLite writer thread', 18, 1],
    ['wrk core', 7, 1],
  ]);
  assert.deepEqual(bound(pinned), { rps: 25_000, bottleneck: 'server core' });
  const shared = resources(base, { kind: 'shared', cores: 2, servers: 2 }, flushUs);
  assert.deepEqual(shared.map((r) => [r.name, r.demandUs, r.capacity]), [
    ['CPU (every process)', 40 + REMOTE_TAKE_US + 6 + 1 + 4, 2],
    ['service event loops', 40 - 8 + REMOTE_TAKE_US, 2],
    ['SQLite writer thread', 18, 1],
  ]);
  const projected = resources(base, { kind: 'projected', cores: 64, oneKey: true }, flushUs);
  assert.deepEqual(projected.map((r) => [r.name, r.demandUs, r.capacity]), [
    ['service CPU', 40 + 2, 64],
    ['service event loops', 32, 64],
    ['limiter thread', 2, 1],
    ['SQLite writer thread', 18, 1],
    ['client network', (1250 * 8 * 1e6) / LINK_BITS_PER_SECOND, 1],
  ]);
  assert.deepEqual(bound(projected), { rps: 1e6 / 18, bottleneck: 'SQLite writer thread' });
});

test('PostgreSQL: one key\'s row holds each batch of takes through its commit\'s flush; with many keys it is no limit', () => {
  const pg: Costs = { ...base, engine: 'postgres', serviceUs: 60, postgresUs: 30, flushes: 0.05, takeCalls: 0.05, takeCallUs: 300 };
  const flushUs = 200;
  assert.deepEqual(resources(pg, { kind: 'pinned' }, flushUs).map((r) => [r.name, r.demandUs]), [
    ['server core', 60],
    ['wrk core', 6 + 1 + 30],
    ['limiter row (one key)', 15],
  ]);
  const oneKey = resources(pg, { kind: 'projected', cores: 16, oneKey: true }, flushUs);
  assert.deepEqual(oneKey.map((r) => [r.name, r.demandUs, r.capacity]), [
    ['service CPU', 62, 16],
    ['PostgreSQL CPU', 30, 16],
    ['limiter row (one key)', 0.05 * (300 + 200), 1],
    ['WAL flushes', 10, 16],
    ['client network', 1, 1],
  ]);
  assert.deepEqual(bound(oneKey), { rps: 40_000, bottleneck: 'limiter row (one key)' });
  const manyKeys = bound(resources(pg, { kind: 'projected', cores: 16, oneKey: false }, flushUs));
  assert.deepEqual(manyKeys, { rps: 16e6 / 62, bottleneck: 'service CPU' });
});

test('the model predicts the one- and two-server runs from one server\'s costs, and projects SQLite from two workers\' costs', () => {
  const rows: ScalingRow[] = [
    { configuration: sqlite(1), workload: 'get', shared: false, commits: 0, postgres: null, result: run(40_000, { server: 1, generator: 0.3 }) },
    { configuration: sqlite(2), workload: 'get', shared: true, commits: 0, postgres: null, result: run(60_000, { server: 1.5, main: 0.12, generator: 0.4 }) },
  ];
  const model = buildModel(rows, 200);
  assert.deepEqual(model.predictions.map((p) => [p.cores, Math.round(p.predicted), p.measured, p.bottleneck]), [
    [1, 40_000, 40_000, 'server core'],
    // 25 us of the service, 2.3 us of remote takes, 7.5 us of wrk a request, on two cores.
    [2, Math.round(2e6 / (25 + REMOTE_TAKE_US + 7.5)), 60_000, 'CPU (every process)'],
  ]);
  // 64 workers of 25 us each, but one limiter thread of 2 us a request.
  assert.deepEqual(model.projections.map((p) => [p.cores, Math.round(p.rps), p.bottleneck]), [
    [4, 160_000, 'service CPU'],
    [16, 500_000, 'limiter thread'],
    [64, 500_000, 'limiter thread'],
  ]);
  assert.match(formatModel(model), /^SQLite +get +160,000 service CPU +500,000 limiter thread +500,000 limiter thread +-$/m);
});
