/**
 * wrk (https://github.com/wg/wrk, Debian's package `wrk`), the bench's load generator: a C
 * program driven by the workload's Lua script in bench/wrk/. Its figures come from the scripts'
 * done() hook (bench/wrk/bench.lua) as one JSON line; its own text report is only for errors.
 */
import { execFile, type ExecFileException } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { installed, onCpus } from './cpu.ts';

const execFileAsync = promisify(execFile);

/** Where the workloads' Lua scripts are. */
export const WRK_SCRIPTS = join(import.meta.dirname, 'wrk');

export interface WrkRun {
  url: string;
  /** File name of the workload's script in bench/wrk/. */
  script: string;
  /** Given to the script's init() (after `--` on wrk's command line). */
  args: readonly string[];
  /** One per core the generator has: more threads than cores would only take turns. */
  threads: number;
  seconds: number;
  connections: number;
}

/** Exits 1, saying how to install wrk, where it is missing: a slower generator would measure itself, not the service. */
export function requireWrk(command: string): void {
  if (installed('wrk')) return;
  process.stderr.write(`${command} needs wrk, the load generator: sudo apt-get install wrk\n`);
  process.exit(1);
}

/** A response slower than this is counted as a timeout. */
const TIMEOUT_SECONDS = 10;

/** wrk's command line. */
export function wrkArgs(run: WrkRun): string[] {
  return [
    '--threads', String(run.threads), '--connections', String(run.connections),
    '--duration', `${run.seconds}s`, '--timeout', `${TIMEOUT_SECONDS}s`,
    '--script', join(WRK_SCRIPTS, run.script), run.url, '--', ...run.args,
  ];
}

/** Latency figures in milliseconds. */
export interface Latency { p50: number; p99: number; max: number }

/** What one wrk run measured. */
export interface WrkResult {
  durationS: number;
  /** Complete responses, whatever their status; of which with a status of 400 or more (neither server sends 1xx or 3xx). */
  responses: number;
  non2xx: number;
  /** Connect, read and write errors; responses slower than the timeout (not in the latencies). */
  errors: number;
  timeouts: number;
  /** The latencies as measured, over every response, and as a histogram ([microseconds, count]) so that runs can be merged. */
  latencyMs: Latency;
  histogramUs: Array<[number, number]>;
  /** Answers by status and by error code, when the script counts them (the soak's). */
  statuses: Record<string, number>;
  codes: Record<string, number>;
  /** wrk's own p99, after its correction for coordinated omission (see rawHistogram). */
  correctedP99Ms: number;
  /** CPU time the wrk process used, in clock ticks. */
  cpuTicks: number;
}

/** The JSON line that bench/wrk/bench.lua's done() prints. */
interface WrkDone extends Pick<WrkResult, 'statuses' | 'codes' | 'cpuTicks' | 'histogramUs'> {
  durationUs: number;
  requests: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  wrkLatencyUs: Latency;
}

/** A latency histogram: [microseconds, count] pairs, in increasing order of microseconds. */
export type Histogram = ReadonlyArray<readonly [number, number]>;

/**
 * Reads the figures of a run from wrk's stdout. `connections` is the --connections wrk had: its
 * latency correction depends on it. Throws when the line is missing or does not add up.
 */
export function parseWrkOutput(stdout: string, connections: number): WrkResult {
  const line = stdout.split('\n').find((candidate) => candidate.startsWith('{"bench":"wrk-done"'));
  if (line === undefined) throw new Error(`wrk printed no result line (is bench/wrk/bench.lua loaded by the script?):\n${stdout.slice(-2000)}`);
  const done = JSON.parse(line) as WrkDone;
  const corrected = done.histogramUs;
  // The histogram was read from wrk's memory: it must give wrk's own maximum and percentiles
  // (to one rank: wrk computes the rank in long double).
  for (const p of corrected.length > 0 ? [50, 99] as const : []) {
    const [low, high, wrks] = [percentile(corrected, p, -1), percentile(corrected, p, 1), done.wrkLatencyUs[`p${p}`]];
    if (!(wrks >= low && wrks <= high)) throw new Error(`wrk's latency histogram was misread: its p${p} is ${low}-${high} us, wrk says ${wrks} us`);
  }
  const max = corrected.at(-1)?.[0];
  if (max !== undefined && max !== done.wrkLatencyUs.max) throw new Error(`wrk's latency histogram was misread: its maximum is ${max} us, wrk says ${done.wrkLatencyUs.max} us`);
  const raw = rawHistogram(corrected, correctionInterval(done.durationUs, done.requests, connections));
  const measured = raw.reduce((sum, [, count]) => sum + count, 0);
  if (measured !== done.requests - done.errors.timeout) {
    throw new Error(`wrk's latency histogram holds ${measured} responses once uncorrected, but wrk counted ${done.requests} and ${done.errors.timeout} timeouts`);
  }
  return {
    durationS: done.durationUs / 1e6,
    responses: done.requests,
    non2xx: done.errors.status,
    errors: done.errors.connect + done.errors.read + done.errors.write,
    timeouts: done.errors.timeout,
    latencyMs: latencyOf(raw), histogramUs: raw,
    statuses: done.statuses, codes: done.codes,
    correctedP99Ms: done.wrkLatencyUs.p99 / 1000,
    cpuTicks: done.cpuTicks,
  };
}

/** The latency figures of a histogram of measured latencies, in milliseconds; NaN when empty. */
export function latencyOf(histogram: Histogram): Latency {
  if (histogram.length === 0) return { p50: Number.NaN, p99: Number.NaN, max: Number.NaN };
  return { p50: percentile(histogram, 50) / 1000, p99: percentile(histogram, 99) / 1000, max: histogram.at(-1)![0] / 1000 };
}

/** The histograms of several runs as one (counts added per microsecond). */
export function mergeHistograms(histograms: readonly Histogram[]): Array<[number, number]> {
  const counts = new Map<number, number>();
  for (const histogram of histograms) for (const [us, n] of histogram) counts.set(us, (counts.get(us) ?? 0) + n);
  return [...counts].sort((a, b) => a[0] - b[0]);
}

/**
 * The interval wrk 4.x corrects its latencies by: the mean time between two requests of one
 * connection (wrk.c, integer arithmetic as there); 0 when it does not correct.
 */
export function correctionInterval(durationUs: number, requests: number, connections: number): number {
  const perConnection = Math.floor(requests / connections);
  return perConnection > 0 ? Math.floor(durationUs / perConnection) : 0;
}

/**
 * Undoes wrk's correction for coordinated omission. wrk (stats_correct in stats.c) adds, for
 * every response that took n >= 2e microseconds, one sample at each of n - e, n - 2e, ... above e:
 * the requests a constant-rate client would have sent meanwhile. The bench is a closed loop (each
 * connection sends its next request when the answer came) and reports what it measured. Since
 * every sample at m > e came with one at m - e, the corrected count at m + e is exactly what was
 * added at m: raw(m) = corrected(m) - corrected(m + e) above e.
 */
export function rawHistogram(corrected: Histogram, interval: number): Array<[number, number]> {
  if (interval <= 0) return corrected.map(([us, count]) => [us, count]);
  const counts = new Map(corrected);
  const raw: Array<[number, number]> = [];
  for (const [us, count] of corrected) {
    const measured = us > interval ? count - (counts.get(us + interval) ?? 0) : count;
    if (measured < 0) throw new Error(`wrk's latency histogram is not one wrk corrected with interval ${interval} us (at ${us} us)`);
    if (measured > 0) raw.push([us, measured]);
  }
  return raw;
}

/**
 * The p-th percentile of a histogram as wrk computes it (stats_percentile): the recorded value at
 * rank round(p% of the count + 0.5), or at that rank + `rankOffset`, within the recorded ranks;
 * 0 for an empty histogram.
 */
export function percentile(histogram: Histogram, p: number, rankOffset = 0): number {
  const total = histogram.reduce((sum, [, count]) => sum + count, 0);
  const rank = Math.min(total, Math.max(1, Math.floor((p / 100) * total + 0.5 + 0.5) + rankOffset));
  let seen = 0;
  for (const [us, count] of histogram) {
    seen += count;
    if (seen >= rank) return us;
  }
  return 0;
}

/**
 * Runs wrk (on `cpus`, when pinned) and resolves with its result. `authorization` (and any
 * other key, in `env`) reaches the scripts through the environment, never the command line.
 */
export async function runWrk(run: WrkRun, cpus: readonly number[] | null, authorization: string, env: Record<string, string> = {}): Promise<WrkResult> {
  const [command, args] = onCpus(cpus, 'wrk', wrkArgs(run));
  let output: { stdout: string; stderr: string };
  try {
    output = await execFileAsync(command, args, {
      env: { ...env, PATH: process.env.PATH ?? '', BENCH_AUTHORIZATION: authorization },
      // wrk stops on its own after --duration; this only ends a wrk that hangs.
      timeout: (run.seconds + 30) * 1000,
      killSignal: 'SIGKILL',
      // The histogram line holds one pair per distinct microsecond of latency.
      maxBuffer: 256 * 2 ** 20,
    });
  } catch (error) {
    const { code, signal, stdout = '', stderr = '' } = error as ExecFileException & { stdout?: string; stderr?: string };
    throw new Error(`wrk exited with ${code ?? signal}: ${stderr.slice(-4096)}${stdout.slice(-2000)}`);
  }
  try {
    return parseWrkOutput(output.stdout, run.connections);
  } catch (error) {
    throw new Error(`${(error as Error).message}${output.stderr ? `\nwrk stderr:\n${output.stderr.slice(-4096)}` : ''}`);
  }
}
