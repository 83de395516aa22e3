/**
 * One timed load: wrk against the servers under test, and what the machine did meanwhile
 * (LoadResult); also the check of the workloads before any load, and the waits for quiet.
 */
import { busiestShare, otherLoad, readCpuTicks, readMachineTicks, TICKS_PER_SECOND, type Pinning } from './cpu.ts';
import { fetchOnce, readMemory } from './processes.ts';
import { latencyOf, mergeHistograms, runWrk, type Latency } from './wrk.ts';
import type { Workload } from './workloads.ts';

export interface LoadResult {
  /** 2xx responses (wrk counts 400 and above as non-2xx; neither server sends 1xx or 3xx). */
  requests: number;
  non2xx: number;
  /** Connection errors (connect, read, write), and responses slower than wrk's timeout (10 s). */
  errors: number;
  timeouts: number;
  /** Seconds wrk ran (the longest, when several ran), and the wall time the CPU figures cover. */
  durationS: number;
  wallS: number;
  /** 2xx responses per second. */
  rps: number;
  /** Latencies as measured over every response, in milliseconds (see bench/wrk.ts). */
  latencyMs: Latency;
  /** wrk's own p99, corrected for coordinated omission (the highest, when several ran). */
  correctedP99Ms: number;
  /**
   * CPU used during the load, in cores (1 = one core busy the whole time): the servers (all
   * threads), PostgreSQL (0 without), wrk, this process (it reads the service's access log), the
   * kernel (interrupts, softirqs of loopback networking, kernel threads doing I/O), and `other`:
   * other processes and the hypervisor, noise when not near 0. The busy shares (0 to 1) of the
   * servers' and of the generator's busiest core, whatever ran on it: null when not pinned.
   */
  cpu: { server: number; postgres: number; generator: number; harness: number; kernel: number; other: number; serverCore: number | null; generatorCore: number | null };
  /** Highest resident memory of the servers together, sampled every 100 ms, bytes. */
  rssMax: number;
}

/**
 * Runs `workload` for `seconds` against every URL of `target` at once (one wrk each, with
 * `connections`): `pids` are the servers' processes, `extraTicks` the CPU ticks so far of
 * PostgreSQL's, when there is one.
 */
export async function runLoad(
  target: { urls: string[]; pids: number[]; extraTicks?: () => number },
  workload: Workload,
  setup: { pinning: Pinning | null; seconds: number; connections: number; authorization: string },
): Promise<LoadResult> {
  let rssMax = 0;
  const sampleRss = () => (rssMax = Math.max(rssMax, target.pids.reduce((sum, pid) => sum + (readMemory(pid)?.rss ?? 0), 0)));
  const sample = () => ({
    at: performance.now(), harness: readCpuTicks(process.pid), machine: readMachineTicks(),
    server: target.pids.reduce((sum, pid) => sum + readCpuTicks(pid), 0), extra: target.extraTicks?.() ?? 0,
  });
  const sampler = setInterval(sampleRss, 100);
  const start = sample();
  const generator = setup.pinning?.generator ?? null;
  const runs = await Promise.all(target.urls.map((url) => runWrk(
    // One wrk thread per core of its own.
    { url, script: workload.wrk.script, args: workload.wrk.args, threads: generator?.length ?? 1, seconds: setup.seconds, connections: setup.connections },
    generator,
    setup.authorization,
  ))).finally(() => clearInterval(sampler));
  const end = sample();
  sampleRss();

  const wallS = (end.at - start.at) / 1000;
  const cores = (ticks: number) => ticks / TICKS_PER_SECOND / wallS;
  const sum = (pick: (run: (typeof runs)[number]) => number) => runs.reduce((total, run) => total + pick(run), 0);
  const ticks = {
    server: end.server - start.server,
    postgres: end.extra - start.extra,
    generator: sum((run) => run.cpuTicks),
    harness: end.harness - start.harness,
    kernel: end.machine.kernel - start.machine.kernel,
  };
  const accounted = Object.values(ticks).reduce((total, each) => total + each, 0);
  const share = (cpus: number[] | undefined) => (cpus === undefined ? null : busiestShare(start.machine.stat, end.machine.stat, cpus));
  const durationS = Math.max(...runs.map((run) => run.durationS));
  const requests = sum((run) => run.responses - run.non2xx);
  return {
    requests, non2xx: sum((run) => run.non2xx), errors: sum((run) => run.errors), timeouts: sum((run) => run.timeouts),
    durationS, wallS, rps: requests / durationS,
    latencyMs: latencyOf(mergeHistograms(runs.map((run) => run.histogramUs))),
    correctedP99Ms: Math.max(...runs.map((run) => run.correctedP99Ms)),
    cpu: {
      server: cores(ticks.server), postgres: cores(ticks.postgres), generator: cores(ticks.generator),
      harness: cores(ticks.harness), kernel: cores(ticks.kernel),
      // Whatever else ran on the machine meanwhile (an idle server uses nothing): a noisy neighbour shows here.
      other: Math.max(0, cores(end.machine.busy - start.machine.busy - accounted)),
      serverCore: share(setup.pinning?.server), generatorCore: share(setup.pinning?.generator),
    },
    rssMax,
  };
}

/**
 * The first and last request of each workload's sequence, sent once: each must answer 2xx (the
 * deep page, with pets) before any load. A workload with its own `settle` is checked by it instead.
 */
export async function checkWorkloads(url: string, workloads: readonly Workload[], authorization: string): Promise<void> {
  for (const workload of workloads) {
    if (workload.settle) {
      await workload.settle(url, authorization);
      continue;
    }
    for (const { method, path, headers, body } of [workload.sequence[0]!, workload.sequence.at(-1)!]) {
      const answer = await fetchOnce(url + path, { method, headers: { ...headers, authorization }, ...(body === undefined ? {} : { body }) });
      const empty = workload.name === 'deep' && answer.body === '[]';
      if (answer.status < 200 || answer.status > 299 || empty) throw new Error(`${workload.name}: ${method} ${path} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
    }
  }
}

/**
 * A measurement during which other processes (or the hypervisor) took more than this many cores
 * is measured again (measureQuietly), and marked noisy if it still is: on 2 cores, a neighbour's
 * test run can halve the baseline (which needs both cores, with the generator) while hardly
 * touching a service that is bound by its own core.
 */
export const NOISE_CORES = 0.15;

/**
 * `measure` once other processes are quiet, and again while they disturbed it anyway (over
 * NOISE_CORES), `again` times at most, each time saying so in a progress line that starts with
 * `label`; resolves with the last measurement and the ones it replaced.
 */
export async function measureQuietly(
  run: { quiet(pids: readonly number[]): Promise<void>; progress(text: string): void },
  pids: readonly number[],
  label: string,
  measure: () => Promise<LoadResult>,
  again: number,
): Promise<{ result: LoadResult; noisy: LoadResult[] }> {
  const noisy: LoadResult[] = [];
  for (;;) {
    await run.quiet(pids);
    const result = await measure();
    if (result.cpu.other <= NOISE_CORES || noisy.length >= again) return { result, noisy };
    noisy.push(result);
    run.progress(`${label}: other processes took ${result.cpu.other.toFixed(2)} cores; measuring again`);
  }
}

/**
 * A wait before each measurement until other processes use at most NOISE_CORES (sampled over
 * 0.5 s), for at most 30 s each time and `totalSeconds` in all over the run: on a shared machine
 * the run stays bounded, and what noise remains shows in each result's `cpu.other`.
 */
export function quietWaiter(totalSeconds: number): (ownPids: readonly number[]) => Promise<void> {
  let waitedMs = 0;
  return async (ownPids) => {
    const started = performance.now();
    while (waitedMs < totalSeconds * 1000 && performance.now() - started < 30_000) {
      const before = performance.now();
      const other = await otherLoad(ownPids, 500);
      waitedMs += performance.now() - before;
      if (other <= NOISE_CORES) return;
    }
  };
}
