import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LoadResult } from '../../bench/measure.ts';
import { buildChecks, formatMarkdown, formatText, median, summariseWorkload, type BenchReport } from '../../bench/report.ts';

function round(rps: number, p50: number, p99: number, extra: Partial<LoadResult> = {}): LoadResult {
  return {
    requests: rps * 5, non2xx: 0, errors: 0, timeouts: 0, durationS: 5, rps,
    latencyMs: { p50, p90: p50, p99, mean: p50, max: p99 },
    cpu: { server: 1, generator: 0.5, kernel: 0.1, other: 0 },
    rssMax: 100 * 2 ** 20,
    ...extra,
  };
}

function baseReport(): Omit<BenchReport, 'checks'> {
  return {
    startedAt: '2026-01-01T00:00:00.000Z', finishedAt: '2026-01-01T00:04:00.000Z', command: 'npm run bench',
    machine: { cpus: 2, cpuModel: 'test', memoryBytes: 24 * 2 ** 30, kernel: '6', node: 'v24' },
    options: { pets: 10_000, seconds: 5, warmup: 3, rounds: 3, connections: 50, only: null, profile: false, metrics: false },
    database: { pets: 10_000, seedMs: 30 },
    servers: {
      service: { listeningMs: 150, startToFirstOkMs: 180, starts: [180], peakRssBytes: 120 * 2 ** 20, exitCode: 0 },
      baseline: { listeningMs: 90, startToFirstOkMs: 95, starts: [95], peakRssBytes: 100 * 2 ** 20, exitCode: 0 },
    },
    accessLog: { lines: 10, bytes: 1000, requestsSent: 9 },
    keyset: { pets: 10_000, limit: 20, samples: 10, cases: [{ label: 'all pets', firstPath: '/a', lastPath: '/b', http: { firstUs: 100, lastUs: 130, ratio: 1.3 }, store: { firstUs: 10, lastUs: 10, ratio: 1 } }] },
    workloads: [],
    profile: null,
  };
}

test('the median of an even count is the mean of the middle two', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.ok(Number.isNaN(median([])));
});

test('a workload is summed up by the medians of its rounds, as ratios to the baseline', () => {
  const workload = summariseWorkload(
    { name: 'list20', label: 'GET /v1/pets?limit=20', target: 0.75 },
    [round(7000, 6, 20), round(8000, 5, 12), round(9000, 4, 10)],
    [round(10_000, 4, 6), round(10_000, 4, 6), round(1, 4, 6)],
  );
  assert.equal(workload.service.rps, 8000);
  assert.equal(workload.baseline.rps, 10_000);
  assert.equal(workload.ratio, 0.8);
  assert.equal(workload.throughputPass, true);
  assert.equal(workload.p99Ratio, 2);
  assert.equal(workload.p99Pass, true);
  assert.deepEqual(workload.problems, []);
  assert.deepEqual(workload.discarded, []);
});

test('non-2xx answers and connection errors make a workload invalid, whatever its ratio', () => {
  const workload = summariseWorkload(
    { name: 'create', label: 'POST /v1/pets', target: null },
    [round(100, 1, 1, { non2xx: 3 })],
    [round(100, 1, 1, { errors: 2 })],
  );
  assert.equal(workload.throughputPass, null);
  assert.deepEqual(workload.problems, ['service: 3 non-2xx answers', 'baseline: 2 connection errors']);
});

test('a workload whose kept rounds were still disturbed by other processes is marked noisy', () => {
  const noisy = summariseWorkload({ name: 'get', label: 'GET /v1/pets/{id}', target: null }, [round(1, 1, 1, { cpu: { server: 1, generator: 0.5, kernel: 0, other: 0.9 } })], [round(1, 1, 1)]);
  assert.equal(noisy.otherCpuMax, 0.9);
  assert.match(formatText({ ...baseReport(), workloads: [noisy], checks: [] }), /pass noisy/);
});

test('the checks cover every target of issue #6 that the run measured', () => {
  const workload = summariseWorkload({ name: 'get', label: 'GET /v1/pets/{id}', target: 0.8 }, [round(5000, 8, 30)], [round(10_000, 4, 10)]);
  const report = { ...baseReport(), workloads: [workload] };
  const checks = buildChecks(report);
  assert.deepEqual(checks.map((check) => [check.what, check.pass]), [
    ['GET /v1/pets/{id}: req/s ratio', false],
    ['GET /v1/pets/{id}: p99 ratio', false],
    ['peak RSS ratio (VmHWM)', true],
    ['service start to first 200', true],
    ['keyset all pets: last page / first page (HTTP)', false],
  ]);
  const full: BenchReport = { ...report, checks };
  assert.match(formatText(full), /GET \/v1\/pets\/\{id\}\s+5,000\s+10,000\s+0\.50\s+>= 0\.80 .* FAIL \(req\/s, p99\)/);
  assert.match(formatMarkdown(full), /^\| GET \/v1\/pets\/\{id\} \| 5,000 \| 10,000 \| 0\.50 \| >= 0\.80 \|/m);
});
