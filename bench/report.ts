/**
 * The comparison with the baseline: from rounds of measurements to medians, ratios and their
 * targets, whether each round can be trusted, and the text report that shows them. Every round
 * is printed as it is measured and kept in results/latest.json.
 */
import type { Pinning } from './cpu.ts';
import { NOISE_CORES, type LoadResult } from './measure.ts';
import type { Workload, WorkloadName } from './workloads.ts';

/** The targets that are not per workload: tail latency, memory and start-up against the baseline. */
const LIMITS = { p99Ratio: 1.5, peakRssRatio: 1.5, startToFirstOkMs: 200 } as const;

/** A round whose generator was busier than this may have measured it rather than the server: unusable. */
const GENERATOR_BUSY_LIMIT = 0.9;

/** How busy the generator was in a round (0 to 1): its core's busy share when it had one of its own, else its CPU (one wrk thread). */
function generatorLoad(round: LoadResult): number {
  return round.cpu.generatorCore ?? round.cpu.generator;
}

/** Whether a round cannot be trusted to measure the server, because its generator was near its limit. */
export function isUnusable(round: LoadResult): boolean {
  return generatorLoad(round) > GENERATOR_BUSY_LIMIT;
}

/** One load's figures on one line, for the progress output. */
export function describeLoad(result: LoadResult): string {
  const { cpu } = result;
  const core = (share: number | null) => (share === null ? '' : ` (core ${percent(share)} %)`);
  return `${count(result.rps).padStart(7)} req/s, p50 ${fixed(result.latencyMs.p50)} ms, p99 ${fixed(result.latencyMs.p99)} ms (wrk's ${fixed(result.correctedP99Ms)}), ` +
    `server CPU ${fixed(cpu.server)}${core(cpu.serverCore)}, ${cpu.postgres > 0 ? `PostgreSQL ${fixed(cpu.postgres)}, ` : ''}generator ${fixed(cpu.generator)}${core(cpu.generatorCore)}, ` +
    `kernel ${fixed(cpu.kernel)}, other ${fixed(cpu.other)}` +
    (result.non2xx + result.errors > 0 ? `, ${result.non2xx} non-2xx, ${result.errors} errors` : '') +
    (isUnusable(result) ? ` UNUSABLE: generator ${percent(generatorLoad(result))} % busy` : '');
}

/** Median of the values (mean of the middle two for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** One server's figures for one workload: medians over the measured rounds. */
interface ServerSummary {
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Cores the server used. */
  cpu: number;
  /**
   * Microseconds of the server's CPU a request answered (its cores over its rate), median of the
   * rounds: other load moves it less than the rate, so it judges a change on a shared machine.
   */
  cpuUsPerRequest: number;
  /** Busy share of the server's core (median); null when not pinned. */
  serverCore: number | null;
  /** Generator load (see generatorLoad) in the busiest round. */
  generatorLoadMax: number;
  /** Highest resident memory seen in any round, bytes. */
  rssMax: number;
}

/** A round measured while other processes were busy, replaced by another. */
export interface DiscardedRound { server: string; round: number; result: LoadResult }

export interface WorkloadReport {
  name: WorkloadName;
  label: string;
  target: number | null;
  service: ServerSummary;
  baseline: ServerSummary;
  /** Service over baseline: requests/s, and p99. */
  ratio: number;
  p99Ratio: number;
  /** null when the workload has no throughput target. */
  throughputPass: boolean | null;
  p99Pass: boolean;
  /** Kept rounds whose generator was over GENERATOR_BUSY_LIMIT: any makes the workload's figures unusable. */
  unusableRounds: number;
  /** Most cores used by other processes of the machine in any round: noise when it is high. */
  otherCpuMax: number;
  /** Non-2xx answers or connection errors: a run with any is not a measurement of the workload. */
  problems: string[];
  rounds: { service: LoadResult[]; baseline: LoadResult[] };
  discarded: DiscardedRound[];
}

/** Sums up the rounds of one workload. */
export function summariseWorkload(workload: Pick<Workload, 'name' | 'label' | 'target'>, service: LoadResult[], baseline: LoadResult[], discarded: DiscardedRound[] = []): WorkloadReport {
  const summary = (rounds: LoadResult[]): ServerSummary => ({
    rps: median(rounds.map((round) => round.rps)),
    p50Ms: median(rounds.map((round) => round.latencyMs.p50)),
    p99Ms: median(rounds.map((round) => round.latencyMs.p99)),
    cpu: median(rounds.map((round) => round.cpu.server)),
    cpuUsPerRequest: median(rounds.map((round) => (round.cpu.server / round.rps) * 1e6)),
    serverCore: rounds.some((round) => round.cpu.serverCore === null) ? null : median(rounds.map((round) => round.cpu.serverCore!)),
    generatorLoadMax: Math.max(0, ...rounds.map(generatorLoad)),
    rssMax: Math.max(0, ...rounds.map((round) => round.rssMax)),
  });
  const [s, b] = [summary(service), summary(baseline)];
  const problems: string[] = [];
  for (const [server, rounds] of [['service', service], ['baseline', baseline]] as const) {
    const non2xx = rounds.reduce((sum, round) => sum + round.non2xx, 0);
    const errors = rounds.reduce((sum, round) => sum + round.errors, 0);
    if (non2xx > 0) problems.push(`${server}: ${non2xx} non-2xx answers`);
    if (errors > 0) problems.push(`${server}: ${errors} connection errors`);
  }
  const all = [...service, ...baseline];
  const { name, label, target } = workload;
  const [ratio, p99Ratio] = [s.rps / b.rps, s.p99Ms / b.p99Ms];
  return {
    name, label, target,
    service: s, baseline: b,
    ratio, p99Ratio,
    throughputPass: target === null ? null : ratio >= target,
    p99Pass: p99Ratio <= LIMITS.p99Ratio,
    unusableRounds: all.filter(isUnusable).length,
    otherCpuMax: Math.max(0, ...all.map((round) => round.cpu.other)),
    problems, rounds: { service, baseline }, discarded,
  };
}

export interface ServerFacts {
  /** From the spawn to the first 200 of `GET /v1/pets?limit=20` with the bench key: median of `starts`. */
  startToFirstOkMs: number;
  /** Each start's time to first 200, in order; the last start is the one that was loaded. */
  starts: number[];
  /** Peak resident memory over the process's life (VmHWM), bytes. */
  peakRssBytes: number;
  exitCode: number | null;
}

interface Check {
  what: string;
  value: string;
  limit: string;
  pass: boolean;
  /** false when the figure comes from a round whose generator was near its limit: neither pass nor fail. */
  usable: boolean;
}

/** How the load was made. */
export interface LoadFacts {
  /** `wrk --version`'s first words. */
  version: string;
  pinning: Pinning | null;
  /** Where the servers and the generator ran, or why they were not pinned. */
  pinningNote: string;
}

export interface CompareReport {
  startedAt: string;
  finishedAt: string;
  options: { seconds: number; warmup: number; rounds: number; connections: number };
  load: LoadFacts;
  servers: { service: ServerFacts; baseline: ServerFacts };
  /** What the service wrote on stdout: the access log, one line per request. */
  accessLog: { lines: number; bytes: number; requestsSent: number };
  workloads: WorkloadReport[];
  checks: Check[];
}

/** The pass/fail list of the targets, for what this run measured. */
export function buildChecks(report: Omit<CompareReport, 'checks'>): Check[] {
  const checks: Check[] = [];
  for (const workload of report.workloads) {
    const usable = workload.unusableRounds === 0;
    if (workload.target !== null) checks.push({ what: `${workload.label}: req/s ratio`, value: fixed(workload.ratio), limit: `>= ${workload.target}`, pass: workload.throughputPass!, usable });
    checks.push({ what: `${workload.label}: p99 ratio`, value: fixed(workload.p99Ratio), limit: `<= ${LIMITS.p99Ratio}`, pass: workload.p99Pass, usable });
  }
  const { service, baseline } = report.servers;
  const rssRatio = service.peakRssBytes / baseline.peakRssBytes;
  // A generator at its limit loads the servers less than asked, and memory grows with load.
  const usable = report.workloads.every((workload) => workload.unusableRounds === 0);
  checks.push({ what: 'peak RSS ratio under load (VmHWM)', value: fixed(rssRatio), limit: `<= ${LIMITS.peakRssRatio}`, pass: rssRatio <= LIMITS.peakRssRatio, usable });
  checks.push({
    what: `service start to first 200 (median of ${service.starts.length})`, value: `${service.startToFirstOkMs.toFixed(0)} ms`,
    limit: `<= ${LIMITS.startToFirstOkMs} ms`, pass: service.startToFirstOkMs <= LIMITS.startToFirstOkMs, usable: true,
  });
  return checks;
}

const HEADINGS = [
  'workload', 'service req/s', 'baseline req/s', 'ratio', 'target', 'p50 ms svc/base', 'p99 ms svc/base', 'p99 ratio',
  'CPU svc/base', 'CPU µs/req svc/base', 'server core % svc/base', 'generator % max svc/base', 'RSS MiB svc/base', 'noise', 'result',
];
const RIGHT_ALIGNED = [false, true, true, true, false, true, true, true, true, true, true, true, true, true, false];

function workloadRow(workload: WorkloadReport): string[] {
  const { service: s, baseline: b, problems } = workload;
  const both = (pick: (summary: ServerSummary) => string) => `${pick(s)} / ${pick(b)}`;
  const failed = [workload.throughputPass === false ? 'req/s' : null, workload.p99Pass ? null : 'p99', problems.length > 0 ? 'errors' : null].filter((item) => item !== null);
  const { unusableRounds: unusable } = workload;
  const result = unusable > 0
    ? `UNUSABLE (generator over ${percent(GENERATOR_BUSY_LIMIT)} % in ${unusable} round${unusable === 1 ? '' : 's'})${problems.length > 0 ? ' errors' : ''}`
    : failed.length === 0 ? 'pass' : `FAIL (${failed.join(', ')})`;
  return [
    workload.label, count(s.rps), count(b.rps), fixed(workload.ratio), workload.target === null ? '-' : `>= ${workload.target.toFixed(2)}`,
    both((x) => fixed(x.p50Ms)), both((x) => fixed(x.p99Ms)), fixed(workload.p99Ratio), both((x) => fixed(x.cpu)), both((x) => x.cpuUsPerRequest.toFixed(1)),
    s.serverCore === null ? '-' : both((x) => percent(x.serverCore!)), both((x) => percent(x.generatorLoadMax)), both((x) => (x.rssMax / 2 ** 20).toFixed(0)),
    fixed(workload.otherCpuMax), result + (workload.otherCpuMax > NOISE_CORES ? ' noisy' : ''),
  ];
}

/** The comparison as the terminal shows it. */
export function formatText(report: CompareReport): string {
  const { service, baseline } = report.servers;
  const { options, load } = report;
  const startup = (server: ServerFacts) =>
    `${server.startToFirstOkMs.toFixed(0)} ms (${Math.min(...server.starts).toFixed(0)}-${Math.max(...server.starts).toFixed(0)}, the first ${server.starts[0]!.toFixed(0)} ms)`;
  const kept = report.workloads.flatMap((workload) => [...workload.rounds.service, ...workload.rounds.baseline]);
  const loads = kept.map(generatorLoad);
  const generatorCpus = load.pinning?.generator ?? [];
  const threads = Math.max(1, generatorCpus.length);
  const lines = [
    textTable(HEADINGS, report.workloads.map(workloadRow), RIGHT_ALIGNED), '',
    `Peak RSS (VmHWM): service ${mib(service.peakRssBytes)}, baseline ${mib(baseline.peakRssBytes)}, ratio ${fixed(service.peakRssBytes / baseline.peakRssBytes)}`,
    `Start to first 200 (median of ${service.starts.length} starts, the first on an empty compile cache): service ${startup(service)}, baseline ${startup(baseline)}`,
    `Access log: ${count(report.accessLog.lines)} lines (${mib(report.accessLog.bytes)}) read from the service's stdout for ${count(report.accessLog.requestsSent)} responses`,
    `Load: ${load.version}, ${threads} thread${threads === 1 ? '' : 's'}, ` +
      `${options.connections} connections, ${options.rounds} rounds x ${options.seconds} s per server after ${options.warmup} s warm-up, alternating; ${load.pinningNote}`,
    `Generator load (${load.pinning === null ? 'CPU of the generator process' : `busy share of CPU ${generatorCpus.join(',')}${threads > 1 ? ', the busiest' : ''}, which also runs the bench process that reads the service's log`}): ` +
      `median ${percent(median(loads))} %, max ${percent(Math.max(0, ...loads))} %; ${kept.filter(isUnusable).length} of ${kept.length} kept rounds over ${percent(GENERATOR_BUSY_LIMIT)} % (unusable)`,
    `Noise: other processes used up to ${fixed(Math.max(0, ...report.workloads.map((workload) => workload.otherCpuMax)))} cores in a kept round (column "noise"); ` +
      `${report.workloads.reduce((sum, workload) => sum + workload.discarded.length, 0)} rounds were discarded for noise and measured again`,
    ...report.workloads.flatMap((workload) => workload.problems.map((problem) => `INVALID ${workload.label}: ${problem}`)),
    '', 'Checks:',
    ...report.checks.map((check) => `  ${(check.usable ? (check.pass ? 'pass' : 'FAIL') : 'UNUSABLE').padEnd(8)}  ${check.what}: ${check.value} (${check.limit})`),
  ];
  return lines.join('\n') + '\n';
}

/** Columns padded to their widest cell, right-aligned where `right` says. */
export function textTable(headings: string[], rows: string[][], right: boolean[]): string {
  const widths = headings.map((heading, i) => Math.max(heading.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => (right[i] ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ').trimEnd();
  return [line(headings), widths.map((width) => '-'.repeat(width)).join('  '), ...rows.map(line)].join('\n');
}

export const percent = (share: number): string => (Number.isFinite(share) ? (share * 100).toFixed(0) : '-');
export const fixed = (value: number): string => (Number.isFinite(value) ? value.toFixed(2) : '-');
export const count = (value: number): string => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '-');
const mib = (bytes: number): string => `${(bytes / 2 ** 20).toFixed(1)} MiB`;
