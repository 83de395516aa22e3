/**
 * The default run: the service against a bare node:http baseline, in one run, so that every
 * figure is a ratio to what Node itself does on the same machine at the same moment.
 *
 * 1. Starts the real service as `npm start` does (its node options and `src/start.js`, read from
 *    package.json; stdout drained by the bench as a log collector would) and times spawn to
 *    first 200, five times: the first on an empty compile cache of this run's own.
 * 2. Starts the baseline (bench/baseline.ts) with the service's own answer to
 *    `GET /v1/pets?limit=20` (same header names and values, same body), timed the same way.
 * 3. For each workload: warms both, then measures them alternately (service first in odd rounds,
 *    baseline first in even ones), each round after waiting for the machine to be quiet and
 *    measured again when other processes disturbed it anyway.
 */
import { writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { serviceEnv, startCommand, type BenchContext } from './context.ts';
import { checkWorkloads, runLoad, type LoadResult } from './measure.ts';
import { firstOk, readMemory, startServer, type HttpAnswer, type ServerProcess } from './processes.ts';
import {
  buildChecks, describeLoad, median, NOISE_CORES, summariseWorkload, type CompareReport, type DiscardedRound, type LoadFacts, type ServerFacts, type WorkloadReport,
} from './report.ts';
import type { Workload } from './workloads.ts';

const ROOT = resolve(import.meta.dirname, '..');
/** The request whose first 200 ends "start to first 200", and whose answer the baseline copies. */
const FIRST_PATH = '/v1/pets?limit=20';
/** Headers that Node writes itself on every response, so the baseline must not copy them. */
const NODE_OWN_HEADERS = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);
/** Starts of each server timed for "start to first 200"; the last one is kept for the loads. */
const STARTS = 5;

/** Runs the comparison. */
export async function runCompare(context: BenchContext, workloads: Workload[], load: LoadFacts): Promise<CompareReport> {
  const { options, database } = context;
  const startedAt = new Date();
  const authorization = `Bearer ${database.key}`;
  const starts = await startBoth(context, load, { authorization });
  const [service, baseline] = [starts.service.server, starts.baseline.server];
  await checkWorkloads(service.url, workloads, authorization);

  let serviceResponses = 0;
  const measure = async (server: ServerProcess, workload: Workload, seconds: number): Promise<LoadResult> => {
    const setup = { pinning: load.pinning, seconds, connections: options.connections, authorization };
    const result = await runLoad({ urls: [server.url], pids: [server.pid] }, workload, setup);
    if (server === service) serviceResponses += result.requests + result.non2xx;
    if (server === service && workload.settle) await workload.settle(server.url, authorization);
    const exited = server.exited();
    if (exited !== null) throw new Error(`${server.name} exited during ${workload.name} (code ${exited.code}, signal ${exited.signal})\n${server.stderrTail()}`);
    return result;
  };
  const reports: WorkloadReport[] = [];
  for (const workload of workloads) reports.push(await measureWorkload(context, workload, { service, baseline }, measure));

  // VmHWM must be read while the processes still exist.
  const peak = (server: ServerProcess) => readMemory(server.pid)?.peak ?? Number.NaN;
  const [servicePeak, baselinePeak] = [peak(service), peak(baseline)];
  context.progress('stopping the servers ...');
  const [serviceExit, baselineExit] = await Promise.all([service.stop(), baseline.stop()]);
  context.children.length = 0;
  const log = service.stdout();
  const facts = (start: RepeatedStart, peakRssBytes: number, exitCode: number | null): ServerFacts => ({
    startToFirstOkMs: median(start.startToFirstOkMs),
    starts: start.startToFirstOkMs,
    peakRssBytes,
    exitCode,
  });
  const withoutChecks: Omit<CompareReport, 'checks'> = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    options: { seconds: options.seconds, warmup: options.warmup, rounds: options.rounds, connections: options.connections },
    load,
    servers: { service: facts(starts.service, servicePeak, serviceExit), baseline: facts(starts.baseline, baselinePeak, baselineExit) },
    accessLog: { lines: log.lines, bytes: log.bytes, requestsSent: serviceResponses },
    workloads: reports,
  };
  return { ...withoutChecks, checks: buildChecks(withoutChecks) };
}

/** Starts the service as `npm start` does, then the baseline with the service's own answer to FIRST_PATH, each STARTS times. */
async function startBoth(context: BenchContext, load: LoadFacts, auth: Record<string, string>): Promise<{ service: RepeatedStart; baseline: RepeatedStart }> {
  const { options, database } = context;
  const npmStart = startCommand(ROOT);
  context.progress(`service: node ${[...npmStart.nodeOptions, relative(ROOT, npmStart.entry)].join(' ')} (as npm start)`);
  const serviceArgs = () => [...npmStart.nodeOptions, npmStart.entry];
  const env = serviceEnv(context, options.connections, { DATABASE_PATH: database.path });
  const service = await startRepeatedly(context, 'service', serviceArgs, env, auth, load);

  // The baseline answers with exactly what the service answered, headers and body.
  const canned = { headers: {} as Record<string, string>, body: service.answer.body };
  const raw = service.answer.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (!NODE_OWN_HEADERS.has(raw[i]!.toLowerCase())) canned.headers[raw[i]!] = raw[i + 1]!;
  }
  const cannedPath = join(context.workDir, 'baseline-response.json');
  writeFileSync(cannedPath, JSON.stringify(canned));
  const baselineEnv = { PATH: env.PATH!, HOST: '127.0.0.1', PORT: '0', NODE_COMPILE_CACHE: env.NODE_COMPILE_CACHE! };
  const baseline = await startRepeatedly(context, 'baseline', () => [join(ROOT, 'bench', 'baseline.ts'), cannedPath], baselineEnv, auth, load);
  return { service, baseline };
}

/**
 * One workload: a warm-up of both servers, then rounds that alternate which goes first. A round
 * that other processes disturbed is measured again, at most `rounds` times per workload, so that
 * the run stays bounded on a busy machine.
 */
async function measureWorkload(
  context: BenchContext,
  workload: Workload,
  servers: { service: ServerProcess; baseline: ServerProcess },
  measure: (server: ServerProcess, workload: Workload, seconds: number) => Promise<LoadResult>,
): Promise<WorkloadReport> {
  const { options, progress } = context;
  const { service, baseline } = servers;
  const warmupProblems: string[] = [];
  if (options.warmup > 0) {
    progress(`${workload.name}: warm-up`);
    for (const server of [service, baseline]) {
      const result = await measure(server, workload, options.warmup);
      if (result.non2xx + result.errors > 0) warmupProblems.push(`${server.name} warm-up: ${result.non2xx} non-2xx answers, ${result.errors} connection errors`);
    }
  }
  const rounds = { service: [] as LoadResult[], baseline: [] as LoadResult[] };
  const discarded: DiscardedRound[] = [];
  for (let round = 1; round <= options.rounds; round++) {
    for (const server of round % 2 === 1 ? [service, baseline] : [baseline, service]) {
      let result: LoadResult;
      for (;;) {
        await context.quiet([service.pid, baseline.pid]);
        result = await measure(server, workload, options.seconds);
        if (result.cpu.other <= NOISE_CORES || discarded.length >= options.rounds) break;
        discarded.push({ server: server.name, round, result });
        progress(`${workload.name} round ${round} ${server.name}: other processes took ${result.cpu.other.toFixed(2)} cores; measuring again`);
      }
      rounds[server === service ? 'service' : 'baseline'].push(result);
      progress(`${workload.name} round ${round} ${server.name.padEnd(8)}: ${describeLoad(result)}`);
    }
  }
  const report = summariseWorkload(workload, rounds.service, rounds.baseline, discarded);
  report.problems.push(...warmupProblems);
  return report;
}

interface RepeatedStart {
  /** The server of the last start, left running for the loads. */
  server: ServerProcess;
  /** Its answer to the first 200. */
  answer: HttpAnswer;
  startToFirstOkMs: number[];
}

/**
 * Starts a server STARTS times, timing spawn -> first 200 of FIRST_PATH each time (one start is
 * too noisy to show that start-up does not grow with the table), and keeps the last one. The
 * server runs on the servers' cores.
 */
async function startRepeatedly(
  context: BenchContext,
  name: string,
  args: () => string[],
  env: Record<string, string>,
  headers: Record<string, string>,
  load: LoadFacts,
): Promise<RepeatedStart> {
  const startToFirstOkMs: number[] = [];
  for (let start = 1; ; start++) {
    const kept = start === STARTS;
    const server = await startServer({ name, args: args(), env, timeoutMs: 10_000, cpus: load.pinning?.server ?? null, cpuGroup: context.cpuGroup });
    context.children.push(server);
    const first = await firstOk(server, FIRST_PATH, headers, 10_000);
    startToFirstOkMs.push(first.startToFirstOkMs);
    if (kept) {
      context.progress(`${name} at ${server.url}: first 200 after ${startToFirstOkMs.map((ms) => ms.toFixed(0)).join(', ')} ms`);
      return { server, answer: first.answer, startToFirstOkMs };
    }
    const code = await server.stop();
    context.children.splice(context.children.indexOf(server), 1);
    if (code !== 0) throw new Error(`${name} exited with code ${code} when stopped\n${server.stderrTail()}`);
  }
}
