import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { LoadResult } from '../../bench/measure.ts';
import { buildChecks, formatText, isUnusable, median, summariseWorkload, type CompareReport } from '../../bench/report.ts';

const CPU: LoadResult['cpu'] = { server: 1, postgres: 0, generator: 0.5, harness: 0.05, kernel: 0.1, other: 0, serverCore: 1, generatorCore: 0.65 };

function round(rps: number, p50: number, p99: number, extra: Partial<LoadResult> = {}): LoadResult {
  return {
    requests: rps * 5, non2xx: 0, errors: 0, timeouts: 0, durationS: 5, wallS: 5, rps,
    latencyMs: { p50, p99, max: p99 },
    correctedP99Ms: p99 * 1.2,
    cpu: CPU,
    rssMax: 100 * 2 ** 20,
    ...extra,
  };
}

/** A round whose generator's core was `share` busy. */
function withGeneratorCore(share: number | null, generator = 0.5): Partial<LoadResult> {
  return { cpu: { ...CPU, generator, generatorCore: share } };
}

function baseReport(): Omit<CompareReport, 'checks'> {
  return {
    startedAt: '2026-01-01T00:00:00.000Z', finishedAt: '2026-01-01T00:04:00.000Z',
    options: { seconds: 5, warmup: 3, rounds: 3, connections: 50 },
    load: { version: 'wrk 4.1.0', pinning: { server: [0], generator: [1] }, pinningNote: 'servers on CPU 0, generator on CPU 1' },
    servers: {
      service: { startToFirstOkMs: 200, starts: [180, 200, 210], peakRssBytes: 120 * 2 ** 20, exitCode: 0 },
      baseline: { startToFirstOkMs: 95, starts: [95], peakRssBytes: 100 * 2 ** 20, exitCode: 0 },
    },
    accessLog: { lines: 10, bytes: 1000, requestsSent: 9 },
    workloads: [],
  };
}

test('the median of an even count is the mean of the middle two', () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.ok(Number.isNaN(median([])));
});

test('a workload is summed up by the medians of its rounds, as ratios to the baseline', () => {
  const workload = summariseWorkload(
    { name: 'list20', label: 'GET /v1/pets?limit=20', target: 0.8 },
    [round(7000, 6, 20), round(8000, 5, 9), round(9000, 4, 8)],
    [round(10_000, 4, 6), round(10_000, 4, 6), round(1, 4, 6)],
  );
  assert.equal(workload.service.rps, 8000);
  assert.equal(workload.baseline.rps, 10_000);
  assert.equal(workload.ratio, 0.8);
  assert.equal(workload.throughputPass, true);
  assert.equal(workload.p99Ratio, 1.5);
  assert.equal(workload.p99Pass, true);
  assert.equal(workload.service.serverCore, 1);
  // One core over 7,000, 8,000 and 9,000 requests a second: 142.9, 125 and 111.1 µs a request.
  assert.equal(workload.service.cpuUsPerRequest, 125);
  assert.equal(workload.baseline.cpuUsPerRequest, 100);
  assert.equal(workload.unusableRounds, 0);
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
  const noisy = summariseWorkload({ name: 'get', label: 'GET /v1/pets/{id}', target: null }, [round(1, 1, 1, { cpu: { ...CPU, other: 0.9 } })], [round(1, 1, 1)]);
  assert.equal(noisy.otherCpuMax, 0.9);
  assert.match(formatText({ ...baseReport(), workloads: [noisy], checks: [] }), /pass noisy/);
});

test('the checks cover every target that the run measured, at its limits', () => {
  // p99 exactly 1.5x the baseline's, RSS 1.2x, start to first 200 exactly 200 ms: all pass.
  const atLimit = summariseWorkload({ name: 'get', label: 'GET /v1/pets/{id}', target: 0.8 }, [round(8000, 8, 15)], [round(10_000, 4, 10)]);
  const checks = buildChecks({ ...baseReport(), workloads: [atLimit] });
  assert.deepEqual(checks.map((check) => [check.what, check.limit, check.pass, check.usable]), [
    ['GET /v1/pets/{id}: req/s ratio', '>= 0.8', true, true],
    ['GET /v1/pets/{id}: p99 ratio', '<= 1.5', true, true],
    ['peak RSS ratio under load (VmHWM)', '<= 1.5', true, true],
    ['service start to first 200 (median of 3)', '<= 200 ms', true, true],
  ]);

  const below = summariseWorkload({ name: 'get', label: 'GET /v1/pets/{id}', target: 0.8 }, [round(5000, 8, 16)], [round(10_000, 4, 10)]);
  const report = { ...baseReport(), workloads: [below] };
  const full: CompareReport = { ...report, checks: buildChecks(report) };
  assert.deepEqual(full.checks.slice(0, 2).map((check) => check.pass), [false, false]);
  assert.match(formatText(full), /GET \/v1\/pets\/\{id\}\s+5,000\s+10,000\s+0\.50\s+>= 0\.80 .* FAIL \(req\/s, p99\)/);
  // The server's cores and its CPU a request, service / baseline (one core at 5,000 and 10,000 a second).
  assert.match(formatText(full), /GET \/v1\/pets\/\{id\}.*\s1\.00 \/ 1\.00\s+200\.0 \/ 100\.0\s/);
});

test('a round whose generator core was over 90 % busy is unusable; at 90 % it is not', () => {
  assert.equal(isUnusable(round(1, 1, 1, withGeneratorCore(0.9))), false);
  assert.equal(isUnusable(round(1, 1, 1, withGeneratorCore(0.91))), true);
  // Not pinned: the generator process's own CPU decides.
  assert.equal(isUnusable(round(1, 1, 1, withGeneratorCore(null, 0.95))), true);
  assert.equal(isUnusable(round(1, 1, 1, withGeneratorCore(null, 0.6))), false);
});

test('an unusable round makes its workload, its checks and the peak RSS check unusable, neither pass nor fail', () => {
  const hot = summariseWorkload(
    { name: 'list20', label: 'GET /v1/pets?limit=20', target: 0.8 },
    [round(9000, 1, 1), round(9000, 1, 1)],
    [round(10_000, 1, 1, withGeneratorCore(0.97)), round(10_000, 1, 1)],
  );
  const cool = summariseWorkload({ name: 'get', label: 'GET /v1/pets/{id}', target: 0.8 }, [round(9000, 1, 1)], [round(10_000, 1, 1)]);
  assert.equal(hot.unusableRounds, 1);
  assert.equal(hot.baseline.generatorLoadMax, 0.97);
  assert.equal(cool.unusableRounds, 0);

  const report = { ...baseReport(), workloads: [hot, cool] };
  const full: CompareReport = { ...report, checks: buildChecks(report) };
  assert.deepEqual(full.checks.map((check) => [check.what, check.usable]), [
    ['GET /v1/pets?limit=20: req/s ratio', false],
    ['GET /v1/pets?limit=20: p99 ratio', false],
    ['GET /v1/pets/{id}: req/s ratio', true],
    ['GET /v1/pets/{id}: p99 ratio', true],
    ['peak RSS ratio under load (VmHWM)', false],
    ['service start to first 200 (median of 3)', true],
  ]);
  const text = formatText(full);
  assert.match(text, /^GET \/v1\/pets\?limit=20 .* 100 \/ 100 +65 \/ 97 .* UNUSABLE \(generator over 90 % in 1 round\)$/m);
  assert.match(text, /^ {2}UNUSABLE {2}GET \/v1\/pets\?limit=20: req\/s ratio: 0\.90 \(>= 0\.8\)$/m);
  assert.match(text, /^ {2}pass {6}GET \/v1\/pets\/\{id\}: req\/s ratio/m);
  assert.match(text, /max 97 %; 1 of 6 kept rounds over 90 % \(unusable\)/);

});

test('the facts say how the load was made: tool, threads and cores, or why nothing was pinned', () => {
  const workload = summariseWorkload({ name: 'get', label: 'GET /v1/pets/{id}', target: null }, [round(1, 1, 1)], [round(1, 1, 1)]);
  const pinned = { ...baseReport(), workloads: [workload], checks: [] };
  assert.match(formatText(pinned), /^Load: wrk 4\.1\.0, 1 thread, 50 connections, .*; servers on CPU 0, generator on CPU 1$/m);
  assert.match(formatText(pinned), /^Generator load \(busy share of CPU 1, which also runs the bench process that reads the service's log\): median 65 %/m);

  const wide = { ...pinned, load: { ...pinned.load, pinning: { server: [0, 1], generator: [2, 3] }, pinningNote: 'servers on CPU 0,1, generator on CPU 2,3' } };
  assert.match(formatText(wide), /^Load: wrk 4\.1\.0, 2 threads, /m);
  assert.match(formatText(wide), /^Generator load \(busy share of CPU 2,3, the busiest, /m);

  const unpinned = summariseWorkload({ name: 'get', label: 'GET /v1/pets/{id}', target: null }, [round(1, 1, 1, withGeneratorCore(null))], [round(1, 1, 1, withGeneratorCore(null))]);
  const oneCore = {
    ...pinned,
    workloads: [unpinned],
    load: { version: 'wrk 4.1.0', pinning: null, pinningNote: 'not pinned: only 1 core, which the servers and the generator share' },
  };
  assert.match(formatText(oneCore), /^Load: wrk 4\.1\.0, 1 thread, .*; not pinned: only 1 core/m);
  assert.match(formatText(oneCore), /^Generator load \(CPU of the generator process\): median 50 %/m);
});
