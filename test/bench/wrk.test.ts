import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { correctionInterval, parseWrkOutput, percentile, rawHistogram, runWrk, wrkArgs, WRK_SCRIPTS, type Histogram } from '../../bench/wrk.ts';
import { installed } from '../../bench/cpu.ts';
import { buildWorkloads, WORKLOADS } from '../../bench/workloads.ts';

/** wrk 4.x's stats_correct (src/stats.c), applied to a histogram: what done() is given. */
function wrkCorrect(raw: Histogram, interval: number): Array<[number, number]> {
  const original = new Map(raw);
  const data = new Map(raw);
  const max = Math.max(...raw.map(([us]) => us));
  if (interval > 0) {
    for (let n = interval * 2; n <= max; n++) {
      const count = original.get(n) ?? 0;
      for (let m = n - interval; count > 0 && m > interval; m -= interval) data.set(m, (data.get(m) ?? 0) + count);
    }
  }
  return [...data].sort((a, b) => a[0] - b[0]);
}

/** The line bench/wrk/bench.lua's done() prints for a run that measured `raw`. */
function doneLine(raw: Histogram, run: { durationUs: number; connections: number; status?: number; timeout?: number; read?: number }): string {
  const requests = raw.reduce((sum, [, count]) => sum + count, 0) + (run.timeout ?? 0);
  const corrected = wrkCorrect(raw, correctionInterval(run.durationUs, requests, run.connections));
  return JSON.stringify({
    bench: 'wrk-done',
    durationUs: run.durationUs,
    requests,
    errors: { connect: 0, read: run.read ?? 0, write: 0, status: run.status ?? 0, timeout: run.timeout ?? 0 },
    wrkLatencyUs: { p50: percentile(corrected, 50), p99: percentile(corrected, 99), max: corrected.at(-1)![0] },
    cpuTicks: 321,
    statuses: {},
    codes: {},
    histogramUs: corrected,
  });
}

const WRK_TEXT = 'Running 5s test @ http://127.0.0.1:1234\n  1 threads and 4 connections\nRequests/sec:  1000.00\n';

test('a run\'s figures are read from the done() line: counts, and the latencies as measured, before wrk\'s correction', () => {
  // 4 connections, 1 s, 1000 responses: wrk corrects by 1,000,000 / 250 = 4000 us. Most answers
  // take 1-2 ms; 20 took 30 ms, which wrk "corrects" with 6 samples each at 26, 22, ..., 6 ms.
  const raw: Array<[number, number]> = [[1000, 500], [1500, 300], [2000, 180], [30_000, 20]];
  const output = `${WRK_TEXT}${doneLine(raw, { durationUs: 1_000_000, connections: 4, status: 7, read: 2 })}\n`;
  assert.deepEqual(
    parseWrkOutput(output, 4),
    {
      durationS: 1,
      responses: 1000,
      non2xx: 7,
      errors: 2,
      timeouts: 0,
      latencyMs: { p50: 1.5, p99: 30, max: 30 },
      histogramUs: raw,
      statuses: {},
      codes: {},
      correctedP99Ms: 30,
      cpuTicks: 321,
    },
  );
  const corrected = wrkCorrect(raw, 4000);
  assert.equal(percentile(corrected, 90), 10_000, 'wrk alone would report a 10 ms p90, where 98 % of the answers took 2 ms or less');
  assert.deepEqual(rawHistogram(corrected, 4000), raw);
});

test('wrk\'s correction is undone exactly, whatever the shape of the histogram', () => {
  // A deterministic spread of latencies from 50 us to 90 ms, and intervals small and large.
  let seed = 12345;
  const next = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const counts = new Map<number, number>();
  for (let i = 0; i < 3000; i++) {
    const us = 50 + Math.floor(next() ** 4 * 90_000);
    counts.set(us, (counts.get(us) ?? 0) + 1);
  }
  const raw = [...counts].sort((a, b) => a[0] - b[0]);
  for (const interval of [0, 7, 1000, 25_000]) {
    assert.deepEqual(rawHistogram(wrkCorrect(raw, interval), interval), raw, `interval ${interval}`);
  }
  // Every sample above 2 intervals brings one an interval below it: 2 at 25 us cannot come with 1 at 15 us.
  assert.throws(() => rawHistogram([[15, 1], [25, 2]], 10), /not one wrk corrected with interval 10 us \(at 15 us\)/);
});

test('wrk\'s interval and percentiles follow its own integer arithmetic', () => {
  assert.equal(correctionInterval(5_000_123, 100_000, 50), 2500);
  assert.equal(correctionInterval(5_000_000, 49, 50), 0, 'fewer responses than connections: no correction');
  const histogram: Histogram = [[10, 1], [20, 1], [30, 1], [40, 1]];
  // wrk's rank is round(p% of the count + 0.5): its median of 4 values is the third.
  assert.deepEqual([25, 50, 99, 100].map((p) => percentile(histogram, p)), [20, 30, 40, 40]);
  assert.deepEqual([percentile(histogram, 50, -1), percentile(histogram, 99, 1)], [20, 40]);
  assert.equal(percentile([], 99), 0);
});

test('a result that is missing or does not add up is refused, not reported', () => {
  assert.throws(() => parseWrkOutput(WRK_TEXT, 4), /wrk printed no result line/);
  const good = JSON.parse(doneLine([[1000, 90], [9000, 10]], { durationUs: 1_000_000, connections: 4 })) as Record<string, unknown>;
  const misread = { ...good, wrkLatencyUs: { p50: 1000, p99: 5000, max: 9000 } };
  assert.throws(() => parseWrkOutput(JSON.stringify(misread), 4), /wrk's latency histogram was misread: its p99 is 9000-9000 us, wrk says 5000 us/);
  const wrongMax = { ...good, wrkLatencyUs: { ...(good.wrkLatencyUs as object), max: 9001 } };
  assert.throws(() => parseWrkOutput(JSON.stringify(wrongMax), 4), /its maximum is 9000 us, wrk says 9001 us/);
  assert.throws(() => parseWrkOutput(JSON.stringify({ ...good, requests: 101 }), 4), /holds 100 responses once uncorrected, but wrk counted 101 and 0 timeouts/);
  // Responses slower than the timeout are counted by wrk but not in its histogram.
  const slow = parseWrkOutput(doneLine([[1000, 100]], { durationUs: 1_000_000, connections: 4, timeout: 3 }), 4);
  assert.deepEqual([slow.responses, slow.timeouts, slow.latencyMs.p99], [103, 3, 1]);
});

test('wrk runs the workload\'s script with its arguments after --, one thread per generator core', () => {
  assert.deepEqual(wrkArgs({ url: 'http://127.0.0.1:8080', script: 'sequence.lua', args: ['GET /a', 'GET /b'], threads: 1, seconds: 5, connections: 50 }), [
    '--threads', '1', '--connections', '50', '--duration', '5s', '--timeout', '10s',
    '--script', `${WRK_SCRIPTS}/sequence.lua`, 'http://127.0.0.1:8080', '--', 'GET /a', 'GET /b',
  ]);
});

const wrk = installed('wrk');

interface Seen {
  method: string;
  path: string;
  authorization: string | undefined;
  contentType: string | undefined;
  ifMatch: string | undefined;
  body: string;
}

/** A server that records what it is sent and answers 200, or `status(request)`. */
async function recordingServer(t: import('node:test').TestContext, status: (request: IncomingMessage) => number = () => 200) {
  const seen: Seen[] = [];
  // Orders as the service answers them (adopt.lua reads the id, the pet and the status); `[]` else.
  const petOfOrder = new Map<string, string>();
  const answer = (method: string, url: string, body: string): string => {
    if (method === 'POST' && url === '/v1/store/orders') {
      const id = String(petOfOrder.size + 1);
      petOfOrder.set(id, /"petId":(\d+)/.exec(body)![1]!);
      return `{"id":${id},"petId":${petOfOrder.get(id)},"account":"acct_0","status":"placed"}`;
    }
    const order = /^\/v1\/store\/orders\/(\d+)$/.exec(url)?.[1];
    if (method === 'PATCH' && order !== undefined) return `{"id":${order},"petId":${petOfOrder.get(order)},"account":"acct_0","status":"cancelled"}`;
    return '[]';
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({
        method: request.method!,
        path: request.url!,
        authorization: request.headers.authorization,
        contentType: request.headers['content-type'],
        ifMatch: request.headers['if-match'],
        body: body.toString('utf8'),
      });
      response.writeHead(status(request), { 'content-type': 'application/json' }).end(answer(request.method!, request.url!, body.toString('utf8')));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

/** Skips a test that needs wrk on a machine without it, but fails it in CI (common.md). */
function needsWrk(t: import('node:test').TestContext): boolean {
  if (wrk) return true;
  if (process.env.CI === 'true') assert.fail('wrk is not installed (apt-get install wrk), and CI needs it');
  t.skip('wrk is not installed: apt-get install wrk to run this test');
  return false;
}

test('every workload\'s wrk script sends exactly the requests of its sequence, in the same proportions', async (t) => {
  if (!needsWrk(t)) return;
  const fixture = { pets: 1000, deepSoldAfterId: 600 };
  const authorization = 'Bearer pk_test_wrkscripts';
  const workloads = buildWorkloads(fixture);
  assert.deepEqual(workloads.map((workload) => workload.name), WORKLOADS.map((row) => row.name));
  // All at once: each wrk runs its one second alongside the others.
  await Promise.all(workloads.map(async (workload) => {
    const server = await recordingServer(t);
    const result = await runWrk({ url: server.url, script: workload.wrk.script, args: workload.wrk.args, threads: 1, seconds: 1, connections: 2 }, null, authorization);
    assert.ok(result.responses > 0, workload.name);
    assert.deepEqual([result.non2xx, result.errors, result.timeouts], [0, 0, 0], workload.name);

    const expected = workload.sequence.map((request): Seen => ({
      method: request.method,
      path: request.path,
      authorization,
      contentType: request.headers['content-type'],
      ifMatch: request.headers['if-match'],
      body: request.body ?? '',
    }));
    // Ids that adopt.lua learns from the answers are compared as its sequence writes them.
    const key = (request: Seen) => JSON.stringify({
      ...request,
      path: request.path.replace(/^\/v1\/store\/orders\/\d+$/, '/v1/store/orders/{id}'),
      body: request.body.replace(/^\{"petId":\d+\}$/, '{"petId":{petId}}'),
    });
    const sent = new Map<string, number>();
    for (const request of server.seen) sent.set(key(request), (sent.get(key(request)) ?? 0) + 1);
    const wanted = new Map<string, number>();
    for (const request of expected) wanted.set(key(request), (wanted.get(key(request)) ?? 0) + 1);
    assert.deepEqual([...sent.keys()].sort(), [...wanted.keys()].sort(), `${workload.name}: the requests sent`);
    // Each kind in its share of the sequence (to within one pass of it: wrk stops mid-sequence).
    const passes = server.seen.length / expected.length;
    for (const [request, count] of wanted) {
      assert.ok(Math.abs(sent.get(request)! - passes * count) <= count + 1, `${workload.name}: ${sent.get(request)} of ${request} in ${server.seen.length}`);
    }
  }));
});

test('wrk counts the answers of 400 and more as non-2xx, and its figures add up on a real run', async (t) => {
  if (!needsWrk(t)) return;
  const server = await recordingServer(t, (request) => (request.method === 'POST' ? 503 : 200));
  const mix = buildWorkloads({ pets: 10, deepSoldAfterId: 0 }, ['mix'])[0]!;
  const result = await runWrk({ url: server.url, script: mix.wrk.script, args: mix.wrk.args, threads: 1, seconds: 1, connections: 3 }, null, '');
  const posts = server.seen.filter((request) => request.method === 'POST').length;
  // wrk stops with up to one request per connection unanswered.
  assert.ok(result.non2xx <= posts && result.non2xx >= posts - 3, `${result.non2xx} non-2xx, ${posts} POSTs seen`);
  assert.ok(result.responses <= server.seen.length && result.responses >= server.seen.length - 3);
  assert.equal(server.seen[0]!.authorization, undefined, 'no Authorization header when the bench has none');
  assert.ok(result.latencyMs.p50 > 0 && result.latencyMs.p50 <= result.latencyMs.p99 && result.latencyMs.p99 <= result.latencyMs.max);
  assert.ok(result.cpuTicks >= 0);
});
