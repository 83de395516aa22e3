/**
 * Soak test: `npm run soak -- [--seconds 120] [--rate 400] [--concurrency 32]`.
 *
 * Runs the real service in this process over a SQLite file in a temporary directory, with its
 * writer thread (src/writer.ts) as in production, drives it
 * with wrk (bench/wrk/soak.lua: every kind of request, good and bad, at about --rate requests a
 * second over --concurrency connections) on 127.0.0.1 for a set time, and samples this
 * process's RSS and event-loop delay every second. The service runs in this process, not as a
 * child, so that the soak can force full collections and read the live heap (below); wrk is
 * another process, so its memory and CPU do not count as the server's.
 *
 * RSS moves in steps that are not leaks: V8 doubles its young generation under sustained load
 * (8, 16, then 32 MiB here, after about one and three minutes: the `new` column of --verbose)
 * and lets the old generation grow until a major collection, and neither returns the pages at
 * once. Nor is `heapUsed` a leak signal: it counts young garbage not yet collected, and so rises
 * with the young generation. So every 10 s the soak forces a full collection and samples the
 * live heap, which only a leak makes grow, and its verdict follows that.
 *
 * Prints whether memory stayed flat (mean RSS of the last minute within 10 % of the first
 * minute's; for runs shorter than two minutes, the first and last half), the same for the heap
 * in use and the live heap, and the p99 event-loop delay. Exits 1 if the live heap grew by more
 * than 10 % or any request got a 500.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { AddressInfo } from 'node:net';
import { createLogger } from '../src/http/access-log.ts';
import { createService } from '../src/service/service.ts';
import { createKeysStore } from '../src/storage/sqlite/keys-store.ts';
import { openSqliteEngine } from '../src/storage/sqlite/engine.ts';
import { systemClock } from '../src/clock.ts';
import { LIMITER_SAVE_INTERVAL_MS } from '../src/service/chores.ts';
import { integer } from './options.ts';
import { BENCH_KEY_LIMITS } from './seed.ts';
import { requireWrk, runWrk } from './wrk.ts';

const { values } = parseArgs({ options: { seconds: { type: 'string' }, rate: { type: 'string' }, concurrency: { type: 'string' }, verbose: { type: 'boolean', default: false } } });
let seconds: number, rate: number, concurrency: number;
try {
  seconds = integer(values.seconds, '--seconds', 120, 1, 86_400);
  rate = integer(values.rate, '--rate', 400, 1, 1_000_000);
  concurrency = integer(values.concurrency, '--concurrency', 32, 1, 1000);
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n`);
  process.exit(2);
}
requireWrk('npm run soak');

const directory = mkdtempSync(join(tmpdir(), 'pets-soak-'));
const databasePath = join(directory, 'soak.db');
// Opened as main.ts opens it, with the writer thread; the keys first, before any writer starts.
const { engine, seeded: { roomy, free } } = await openSqliteEngine({
  path: databasePath, writer: 'thread', threadEntry: new URL('../src/writer.ts', import.meta.url), log: () => {},
  stores: { appEnv: 'development', clock: systemClock, banThreshold: 30, banSeconds: 900 },
}, (db) => {
  const keys = createKeysStore(db, { appEnv: 'development' });
  return {
    roomy: keys.create({ plan: 'enterprise', ...BENCH_KEY_LIMITS, label: 'soak', now: systemClock() }),
    free: keys.create({ plan: 'free', label: 'soak-free', now: systemClock() }),
  };
});
let loggedBytes = 0;
let requestsSoFar = 0;
// Access lines are built exactly as in production, then counted instead of printed: one a request.
const logger = createLogger({
  level: 'info',
  clock: systemClock,
  write: (text) => {
    loggedBytes += text.length;
    for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) requestsSoFar++;
  },
});
const service = createService({
  // TRUST_PROXY lets the load speak for 512 client addresses from one loopback socket.
  config: { appEnv: 'development', trustProxy: true, rateLimitBanThreshold: 30, rateLimitBanSeconds: 900, publicBaseUrl: null, stagingBaseUrl: null },
  stores: engine.stores,
  clock: systemClock, logger,
});
const flushTimer = setInterval(() => service.stores.upkeep.saveLimiterState!(), LIMITER_SAVE_INTERVAL_MS);

const { server } = service;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

interface Sample {
  second: number;
  rssMiB: number;
  heapMiB: number;
  /** What V8 has reserved for its heap: grows in steps (the young generation doubles under load). */
  heapTotalMiB: number;
  /** V8's young generation, the part of heapTotal that V8 resizes most under load. */
  newSpaceMiB: number;
  p99DelayMs: number;
  requests: number;
  /** The heap after a forced full collection: what is really still referenced (every 10 s). */
  liveMiB?: number;
}

// A full collection on demand, without asking the user for --expose-gc (the flag is read when a
// context is created, so a fresh one hands out `gc`).
setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
const samples: Sample[] = [];
// The histogram records the time between two timer ticks, the sampling interval included; the
// delay is what exceeds it.
const RESOLUTION_MS = 10;
const delayMs = (nanoseconds: number) => Math.max(0, nanoseconds / 1e6 - RESOLUTION_MS);
const wholeRun = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
const perSecond = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
wholeRun.enable();
perSecond.enable();
const started = performance.now();
const sampler = setInterval(() => {
  const memory = process.memoryUsage();
  const sample: Sample = {
    second: Math.round((performance.now() - started) / 1000),
    rssMiB: memory.rss / 2 ** 20,
    heapMiB: memory.heapUsed / 2 ** 20,
    heapTotalMiB: memory.heapTotal / 2 ** 20,
    newSpaceMiB: (getHeapSpaceStatistics().find((space) => space.space_name === 'new_space')?.space_size ?? 0) / 2 ** 20,
    p99DelayMs: delayMs(perSecond.percentile(99)),
    requests: requestsSoFar,
  };
  if (samples.length % 10 === 9) {
    collect();
    sample.liveMiB = process.memoryUsage().heapUsed / 2 ** 20;
  }
  perSecond.reset();
  samples.push(sample);
  if (values.verbose) {
    process.stdout.write(`${String(sample.second).padStart(4)} s  rss ${sample.rssMiB.toFixed(1)} MiB  heap ${sample.heapMiB.toFixed(1)}/${sample.heapTotalMiB.toFixed(1)} MiB (new ${sample.newSpaceMiB.toFixed(1)})  loop p99 ${sample.p99DelayMs.toFixed(2)} ms  requests ${sample.requests}\n`);
  }
}, 1_000);

process.stdout.write(`soak: ${seconds} s, about ${rate} requests/s over ${concurrency} connections, server ${url}, database ${databasePath}\n`);
const report = await runWrk(
  { url, script: 'soak.lua', args: [String(rate), String(concurrency)], threads: 1, seconds, connections: concurrency },
  null,
  `Bearer ${roomy.key}`,
  { SOAK_FREE_AUTHORIZATION: `Bearer ${free.key}` },
);

clearInterval(sampler);
clearInterval(flushTimer);
wholeRun.disable();
perSecond.disable();
server.closeAllConnections();
await new Promise((resolve) => server.close(resolve));
await service.stores.upkeep.saveLimiterState!();
logger.flush();
const databaseBytes = statSync(databasePath).size + (statSync(`${databasePath}-wal`, { throwIfNoEntry: false })?.size ?? 0);
await engine.close();
rmSync(directory, { recursive: true, force: true });

// The first and last minute (or half, for a short run), leaving out the first sample: their
// means, and the change from one to the other.
const window = Math.max(1, Math.min(60, Math.floor(samples.length / 2)));
function trend(pick: (sample: Sample) => number | undefined): { first: number; last: number; change: string; flat: boolean } {
  const mean = (list: Sample[]) => {
    const values = list.map(pick).filter((value) => value !== undefined);
    return values.reduce((sum, value) => sum + value, 0) / values.length;
  };
  const [first, last] = [mean(samples.slice(1, window + 1)), mean(samples.slice(-window))];
  const change = (last - first) / first;
  return { first, last, change: `${change >= 0 ? '+' : ''}${(change * 100).toFixed(1)} %`, flat: change <= 0.1 };
}
const rss = trend((sample) => sample.rssMiB);
const heap = trend((sample) => sample.heapMiB);
const live = trend((sample) => sample.liveMiB);
const rssFlat = Math.abs(rss.last - rss.first) <= 0.1 * rss.first;
const servedErrors = report.statuses['500'] ?? 0;
const answered = Object.values(report.statuses).reduce((sum, n) => sum + n, 0);
const ms = (nanoseconds: number, digits: number) => delayMs(nanoseconds).toFixed(digits);

const lines = [
  '',
  `requests        ${answered} in ${report.durationS.toFixed(1)} s (${(answered / report.durationS).toFixed(0)}/s); client latency p50 ${report.latencyMs.p50.toFixed(1)} ms, p99 ${report.latencyMs.p99.toFixed(1)} ms`,
  `statuses        ${Object.entries(report.statuses).sort().map(([status, count]) => `${status}: ${count}`).join(', ')}`,
  `codes           ${Object.entries(report.codes).sort().map(([code, count]) => `${code}: ${count}`).join(', ')}`,
  `transport       ${report.errors} connection errors (expected only for refused bodies and malformed requests), ${report.timeouts} timeouts`,
  `rss             first ${window} s mean ${rss.first.toFixed(1)} MiB, last ${window} s mean ${rss.last.toFixed(1)} MiB (${rss.change}), max ${Math.max(...samples.map((sample) => sample.rssMiB)).toFixed(1)} MiB`,
  `heap used       first ${window} s mean ${heap.first.toFixed(1)} MiB, last ${window} s mean ${heap.last.toFixed(1)} MiB (${heap.change}); reserved at the end ${samples.at(-1)!.heapTotalMiB.toFixed(1)} MiB, young generation ${samples.at(-1)!.newSpaceMiB.toFixed(0)} MiB`,
  `live heap       after a full collection every 10 s: first ${window} s mean ${live.first.toFixed(1)} MiB, last ${window} s mean ${live.last.toFixed(1)} MiB (${live.change})`,
  `event loop      delay p50 ${ms(wholeRun.percentile(50), 2)} ms, p99 ${ms(wholeRun.percentile(99), 2)} ms, max ${ms(wholeRun.max, 1)} ms (sampled every ${RESOLUTION_MS} ms)`,
  `database        ${(databaseBytes / 2 ** 20).toFixed(1)} MiB on disk; ${(loggedBytes / 2 ** 20).toFixed(1)} MiB of access log produced`,
  `memory flat     RSS ${rssFlat ? 'yes' : 'NO'}, heap in use ${heap.flat ? 'yes' : 'NO'}, live heap ${live.flat ? 'yes' : 'NO'} (last within 10 % of first)`,
  `500s            ${servedErrors}`,
];
process.stdout.write(lines.join('\n') + '\n');
process.exitCode = live.flat && servedErrors === 0 ? 0 : 1;
