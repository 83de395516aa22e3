/**
 * The default run: the service against a bare node:http baseline, in one run, so that every
 * figure is a ratio to what Node itself does on the same machine at the same moment.
 *
 * 1. Starts the real service as `npm start` does and times spawn to first 200, STARTS times: the
 *    first on an empty compile cache of this run's own, which also sends each workload's requests
 *    once before it stops, so that the cache holds every module the loads use (timedStarts says why).
 * 2. Starts the baseline (bench/baseline.ts) with the service's own answer to FIRST_PATH (same
 *    header names and values, same body), timed the same way.
 * 3. For each workload: warms both, then measures them alternately (service first in odd rounds,
 *    baseline first in even ones), each round measured quietly (measure.ts).
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { serviceEnv, startChild, startService, stopServer, type BenchContext } from './context.ts';
import { choosePinning, installed, pinProcess } from './cpu.ts';
import { checkWorkloads, measureQuietly, runLoad, type LoadResult } from './measure.ts';
import { firstOk, readMemory, type HttpAnswer, type ServerProcess } from './processes.ts';
import { buildChecks, describeLoad, median, summariseWorkload, type CompareReport, type DiscardedRound, type LoadFacts, type ServerFacts, type WorkloadReport } from './report.ts';
import type { Workload } from './workloads.ts';

/** The request whose first 200 ends "start to first 200", and whose answer the baseline copies. */
const FIRST_PATH = '/v1/pets?limit=20';
/** Headers that Node writes itself on every response, so the baseline must not copy them. */
const NODE_OWN_HEADERS = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
/** Starts of each server timed for "start to first 200" (one is too noisy); the last is kept for the loads. */
const STARTS = 5;

/** One load of a workload on one server, for `seconds`. */
type Measure = (server: ServerProcess, workload: Workload, seconds: number) => Promise<LoadResult>;

/** Runs the comparison. */
export async function runCompare(context: BenchContext, workloads: Workload[]): Promise<CompareReport> {
  const { options, progress } = context;
  const startedAt = new Date().toISOString();
  const load = placeLoad(context);
  const authorization = `Bearer ${context.database.key}`;
  const check = (server: ServerProcess) => checkWorkloads(server.url, workloads, authorization);
  const { service, baseline } = await startServers(context, load.pinning?.server ?? null, check);
  await check(service.server);

  let serviceResponses = 0;
  const measure: Measure = async (server, workload, seconds) => {
    const result = await runLoad({ urls: [server.url], pids: [server.pid] }, workload, { pinning: load.pinning, seconds, connections: options.connections, authorization });
    if (server === service.server) {
      serviceResponses += result.requests + result.non2xx;
      await workload.settle?.(server.url, authorization);
    }
    const exited = server.exited();
    if (exited !== null) throw new Error(`${server.name} exited during ${workload.name} (code ${exited.code}, signal ${exited.signal})\n${server.stderrTail()}`);
    return result;
  };
  const servers = [service.server, baseline.server];
  const reports: WorkloadReport[] = [];
  for (const workload of workloads) reports.push(await compareWorkload(context, workload, servers, measure));

  // VmHWM must be read while the processes still exist.
  const [servicePeak, baselinePeak] = servers.map((server) => readMemory(server.pid)?.peak ?? Number.NaN);
  progress('stopping the servers ...');
  const [serviceExit, baselineExit] = await Promise.all(servers.map((server) => stopServer(context, server)));
  const facts = (starts: number[], peakRssBytes: number, exitCode: number | null): ServerFacts => ({ startToFirstOkMs: median(starts), starts, peakRssBytes, exitCode });
  const log = service.server.stdout();
  const report: Omit<CompareReport, 'checks'> = {
    startedAt, finishedAt: new Date().toISOString(),
    options: { seconds: options.seconds, warmup: options.warmup, rounds: options.rounds, connections: options.connections },
    load,
    servers: { service: facts(service.starts, servicePeak!, serviceExit!), baseline: facts(baseline.starts, baselinePeak!, baselineExit!) },
    accessLog: { lines: log.lines, bytes: log.bytes, requestsSent: serviceResponses },
    workloads: reports,
  };
  return { ...report, checks: buildChecks(report) };
}

/** Where the servers and wrk run (a core each, when pinned), and which wrk; this process joins wrk. */
function placeLoad(context: BenchContext): LoadFacts {
  const { pinning, note } = choosePinning(context.cpus, 1, { pin: context.options.pin, tasksetFound: installed('taskset') });
  // `wrk --version` prints its usage too, and exits 1.
  const version = /^wrk \S+/.exec(spawnSync('wrk', ['--version'], { encoding: 'utf8' }).stdout ?? '')?.[0] ?? 'wrk (version unknown)';
  context.progress(`load generator: ${version}; ${note}`);
  // This process reads the service's log and samples /proc during the loads: on the generator's core.
  if (pinning !== null) pinProcess(process.pid, pinning.generator);
  return { version, pinning, pinningNote: note };
}

/**
 * Starts the service, then the baseline with the service's answer to FIRST_PATH, on `cpus` when
 * pinned. `prime` is run on the service's first start (timedStarts).
 */
async function startServers(context: BenchContext, cpus: readonly number[] | null, prime: (server: ServerProcess) => Promise<void>) {
  const service = await timedStarts(context, () => startService(context, context.options.connections, { DATABASE_PATH: context.database.path }, cpus), prime);
  // The baseline answers with exactly what the service answered, headers and body.
  const canned = { headers: {} as Record<string, string>, body: service.answer.body };
  const raw = service.answer.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) if (!NODE_OWN_HEADERS.has(raw[i]!.toLowerCase())) canned.headers[raw[i]!] = raw[i + 1]!;
  const cannedPath = join(context.workDir, 'baseline-response.json');
  writeFileSync(cannedPath, JSON.stringify(canned));
  const args = [resolve(import.meta.dirname, 'baseline.ts'), cannedPath];
  // The service's environment: the same PATH and compile cache; of the rest, the baseline reads only HOST and PORT.
  const env = serviceEnv(context.workDir, 0, {});
  const baseline = await timedStarts(context, () => startChild(context, { name: 'baseline', args, env, timeoutMs: 10_000, cpus }));
  return { service, baseline };
}

/** Step 3 for one workload; a round disturbed by other processes is measured again, `rounds` times at most in all. */
async function compareWorkload(context: BenchContext, workload: Workload, servers: ServerProcess[], measure: Measure): Promise<WorkloadReport> {
  const { options, progress } = context;
  const problems: string[] = [];
  if (options.warmup > 0) {
    progress(`${workload.name}: warm-up`);
    for (const server of servers) {
      const result = await measure(server, workload, options.warmup);
      if (result.non2xx + result.errors > 0) problems.push(`${server.name} warm-up: ${result.non2xx} non-2xx answers, ${result.errors} connection errors`);
    }
  }
  const rounds = new Map<ServerProcess, LoadResult[]>(servers.map((server) => [server, []]));
  const discarded: DiscardedRound[] = [];
  const pids = servers.map((server) => server.pid);
  for (let round = 1; round <= options.rounds; round++) {
    for (const server of round % 2 === 1 ? servers : [...servers].reverse()) {
      const label = `${workload.name} round ${round} ${server.name}`;
      const { result, noisy } = await measureQuietly(context, pids, label, () => measure(server, workload, options.seconds), options.rounds - discarded.length);
      discarded.push(...noisy.map((each) => ({ server: server.name, round, result: each })));
      rounds.get(server)!.push(result);
      progress(`${workload.name} round ${round} ${server.name.padEnd(8)}: ${describeLoad(result)}`);
    }
  }
  const report = summariseWorkload(workload, rounds.get(servers[0]!)!, rounds.get(servers[1]!)!, discarded);
  report.problems.push(...problems);
  return report;
}

/**
 * Starts a server STARTS times, timing spawn to the first 200 of FIRST_PATH each time, and keeps
 * the last one running, with its answer. `prime` runs on the first start once it has answered, before
 * it stops.
 *
 * Why the service's first start is primed: a start loads only what a list needs,
 * and the rest of the service (the pets' write paths, the store) when first used; Node's compile
 * cache keeps what a process compiled when it exits. Unprimed, every timed start only listed, so the
 * kept server compiled the write paths during the loads: it loaded Node's TypeScript stripper, about
 * 14 MiB of resident memory it then kept (peak 118 to 122 MiB against 103 to 106 with the cache
 * complete, 2026-12-06). A server restarted after a run that wrote and exited has them compiled, so
 * the bench's peak memory described only the first such run after an install or an upgrade.
 */
export async function timedStarts(
  context: Pick<BenchContext, 'database' | 'children' | 'progress'>,
  start: () => Promise<ServerProcess>,
  prime: (server: ServerProcess) => Promise<void> = async () => {},
): Promise<{ server: ServerProcess; answer: HttpAnswer; starts: number[] }> {
  const starts: number[] = [];
  for (;;) {
    const server = await start();
    const first = await firstOk(server, FIRST_PATH, { authorization: `Bearer ${context.database.key}` }, 10_000);
    starts.push(first.startToFirstOkMs);
    if (starts.length === 1) await prime(server);
    if (starts.length === STARTS) {
      context.progress(`${server.name} at ${server.url}: first 200 after ${starts.map((ms) => ms.toFixed(0)).join(', ')} ms`);
      return { server, answer: first.answer, starts };
    }
    const code = await stopServer(context, server);
    if (code !== 0) throw new Error(`${server.name} exited with code ${code} when stopped\n${server.stderrTail()}`);
  }
}
