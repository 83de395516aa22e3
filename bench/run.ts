/**
 * `npm run bench` (issues #6 and #12): the service against a bare node:http baseline, in one run,
 * on 127.0.0.1 only, with a load generator that is never the limit.
 *
 * 0. Pins this process to the generator's core (taskset), and will start the servers on another.
 * 1. Seeds a file database (N pets, one enterprise key with limits that never bind).
 * 2. Starts the real service as `npm start` does (its node options and `src/start.js`, read from
 *    package.json; APP_ENV=production, access log on, stdout piped to and drained by this process
 *    as a log collector would) and times spawn -> first 200, five times: the first on an empty
 *    compile cache of this run's own.
 * 3. Starts the baseline (bench/baseline.ts) with the service's own answer to
 *    `GET /v1/pets?limit=20` (same header names and values, same body), timed the same way.
 * 4. Checks keyset pagination: last page vs first page.
 * 5. For each workload: warms both, then measures them alternately (service first in odd rounds,
 *    baseline first in even ones) with wrk on the generator's core, noting how busy each core was.
 * 6. Prints the table, writes results/latest.json and results/latest.md.
 *
 * Every step has a time limit, and the whole run a deadline derived from its options.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, release, tmpdir, totalmem } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { allowedCpus, choosePinning, findExecutable, pinProcess } from './cpu.ts';
import { checkKeyset, type KeysetResult } from './keyset.ts';
import { runLoad, type LoadResult, type LoadSetup } from './measure.ts';
import { parseBenchOptions, USAGE, type BenchOptions } from './options.ts';
import { fetchOnce, firstOk, otherLoad, readMemory, startServer, type HttpAnswer, type ServerProcess } from './processes.ts';
import { startCommand } from './start-command.ts';
import { formatProfileSummary, summariseProfile, type CpuProfile } from './profile-summary.ts';
import {
  buildChecks, formatMarkdown, formatText, generatorLoad, isUnusable, median, summariseWorkload,
  type BenchReport, type DiscardedRound, type LoadFacts, type ServerFacts, type WorkloadReport, NOISE_CORES,
} from './report.ts';
import { idBeforeLast, seedDatabase } from './seed.ts';
import { buildWorkloads, WORKLOAD_NAMES, type Workload } from './workloads.ts';

const ROOT = resolve(import.meta.dirname, '..');
/** The request whose first 200 ends "start to first 200", and whose answer the baseline copies. */
const FIRST_PATH = '/v1/pets?limit=20';
/** Headers that Node writes itself on every response, so the baseline must not copy them. */
const NODE_OWN_HEADERS = new Set(['date', 'connection', 'keep-alive', 'content-length', 'transfer-encoding']);

const progress = (text: string) => process.stderr.write(`${text}\n`);

let options: BenchOptions;
try {
  options = parseBenchOptions(process.argv.slice(2), join(ROOT, 'bench', 'results'));
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
  process.exit(2);
}
if (options.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

const wrk = findExecutable('wrk') ?? noWrk();
const load: LoadFacts = chooseLoad(options, wrk);

/** A slower generator would measure itself rather than the service: no fallback, a way to install wrk. */
function noWrk(): never {
  process.stderr.write('npm run bench needs wrk, the load generator: sudo apt-get install wrk\n');
  process.exit(1);
}

const workDir = mkdtempSync(join(tmpdir(), 'pets-bench-'));
const children: ServerProcess[] = [];

/** Ends the run at once: children killed, temporary files removed. */
function abort(message: string, code = 1): never {
  progress(message);
  for (const child of children) {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  rmSync(workDir, { recursive: true, force: true });
  process.exit(code);
}
process.on('SIGINT', () => abort('interrupted', 130));
process.on('SIGTERM', () => abort('terminated', 143));

const selected = options.only ?? [...WORKLOAD_NAMES];
/** Re-measured rounds per workload, at most: the run stays bounded on a busy machine. */
const retriesPerWorkload = options.rounds;
/** Before a round, wait at most this long for the machine to be quiet, and this long in all. */
const QUIET_WAIT_MS = 30_000;
const QUIET_WAIT_TOTAL_MS = options.quietWaitSeconds * 1000;
/** Starts of each server timed for "start to first 200"; the last one is kept for the loads. */
const STARTS = 5;
let quietWaitedMs = 0;

const loadSeconds = selected.length * 2 * (options.warmup + options.rounds * options.seconds);
const worstSeconds = loadSeconds + selected.length * retriesPerWorkload * options.seconds + QUIET_WAIT_TOTAL_MS / 1000;
// Seeding is ~2 s per million pets; start, keyset and stop take well under a minute.
const budgetMs = (worstSeconds + 90 + options.pets / 100_000) * 1000 * 1.25;
const deadline = setTimeout(() => abort(`the bench exceeded its time limit of ${Math.round(budgetMs / 1000)} s`), budgetMs);
deadline.unref();

try {
  await main();
} catch (error) {
  abort(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
}

async function main(): Promise<void> {
  const startedAt = new Date();
  progress(`bench: ${selected.join(', ')}; ${options.rounds} x ${options.seconds} s per server after ${options.warmup} s warm-up, ` +
    `${options.connections} connections; about ${Math.ceil(loadSeconds / 60)} min of load`);
  progress(`load generator: ${load.version}; ${load.pinningNote}`);
  if (load.pinning === null && options.pin) progress('WARNING: the generator is not pinned: its load is judged by its own CPU time only');
  const pinning = load.pinning;
  // This process reads the service's log and samples /proc during the loads: on the generator's core.
  if (pinning !== null) pinProcess(process.pid, pinning.generator);

  const databasePath = join(workDir, 'pets.db');
  progress(`seeding ${options.pets.toLocaleString('en-US')} pets ...`);
  const seeded = seedDatabase(databasePath, options.pets);
  const readDb = new DatabaseSync(databasePath, { readOnly: true });
  // A status=sold page with 20 more sold pets after it: deep in the table, full, with a next link.
  const deepSoldAfterId = idBeforeLast(readDb, 40, 'sold');
  readDb.close();
  progress(`  done in ${seeded.seedMs.toFixed(0)} ms`);

  const auth = { authorization: `Bearer ${seeded.key}` };
  mkdirSync(options.out, { recursive: true });
  const profileName = `service-${startedAt.toISOString().replace(/[:.]/g, '-')}.cpuprofile`;
  // Both servers start on Node's compile cache, as `npm start` does (src/start.js), in a folder of
  // this run's own: the first of the five starts is a cold one, the others find the cache filled.
  const compileCache = { NODE_COMPILE_CACHE: join(workDir, 'compile-cache') };
  const serviceEnv = {
    PATH: process.env.PATH ?? '',
    ...compileCache,
    APP_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: '0',
    DATABASE_PATH: databasePath,
    LOG_LEVEL: 'info',
    // Every load connection comes from 127.0.0.1, which the per-address cap (64 by default,
    // issue #15) would refuse past 64: raise it just enough for --connections plus the bench's
    // own checks, so the default run (50) measures the production setting.
    MAX_CONNECTIONS_PER_ADDRESS: String(Math.min(1024, Math.max(64, options.connections + 8))),
    // Any free port: the service logs it before its API's listening line.
    ...(options.metrics ? { METRICS_PORT: '0' } : {}),
  };
  // Exactly what `npm start` runs: its node options and src/start.js.
  const npmStart = startCommand(ROOT);
  progress(`service: node ${[...npmStart.nodeOptions, relative(ROOT, npmStart.entry)].join(' ')} (as npm start)`);
  const profileArgs = ['--cpu-prof', `--cpu-prof-dir=${options.out}`, `--cpu-prof-name=${profileName}`];
  const serviceArgs = (kept: boolean) => [...npmStart.nodeOptions, ...(kept && options.profile ? profileArgs : []), npmStart.entry];
  const serviceStart = await startRepeatedly('service', serviceArgs, serviceEnv, auth, pinning?.server ?? null);
  const service = serviceStart.server;

  // The baseline answers with exactly what the service answered, headers and body.
  const canned = { headers: {} as Record<string, string>, body: serviceStart.answer.body };
  const raw = serviceStart.answer.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (!NODE_OWN_HEADERS.has(raw[i]!.toLowerCase())) canned.headers[raw[i]!] = raw[i + 1]!;
  }
  const cannedPath = join(workDir, 'baseline-response.json');
  writeFileSync(cannedPath, JSON.stringify(canned));
  const baselineEnv = { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', ...compileCache };
  const baselineStart = await startRepeatedly('baseline', () => [join(ROOT, 'bench', 'baseline.ts'), cannedPath], baselineEnv, auth, pinning?.server ?? null);
  const baseline = baselineStart.server;

  const workloads = buildWorkloads({ pets: options.pets, deepSoldAfterId }, selected);
  await checkWorkloads(service, workloads, auth.authorization);

  progress('keyset check ...');
  const keyset: KeysetResult = await checkKeyset({ url: service.url, key: seeded.key, databasePath, pets: options.pets });
  for (const keysetCase of keyset.cases) {
    progress(`  ${keysetCase.label}: last/first ${keysetCase.http.ratio.toFixed(2)} over HTTP, ${keysetCase.store.ratio.toFixed(2)} in the store`);
  }

  let serviceResponses = 0;
  const setup = (seconds: number): LoadSetup => ({
    wrk,
    pinning,
    seconds,
    connections: options.connections,
    authorization: auth.authorization,
  });
  const measure = async (server: ServerProcess, workload: Workload, seconds: number): Promise<LoadResult> => {
    const result = await runLoad({ urls: [server.url], pids: [server.pid] }, workload, setup(seconds));
    if (server === service) serviceResponses += result.requests + result.non2xx;
    const exited = server.exited();
    if (exited !== null) throw new Error(`${server.name} exited during ${workload.name} (code ${exited.code}, signal ${exited.signal})\n${server.stderrTail()}`);
    return result;
  };

  const reports: WorkloadReport[] = [];
  for (const workload of workloads) {
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
      const order = round % 2 === 1 ? [service, baseline] : [baseline, service];
      for (const server of order) {
        let result: LoadResult;
        for (;;) {
          await quiet([service.pid, baseline.pid]);
          result = await measure(server, workload, options.seconds);
          if (result.cpu.other <= NOISE_CORES || discarded.length >= retriesPerWorkload) break;
          discarded.push({ server: server.name, round, result });
          progress(`${workload.name} round ${round} ${server.name}: other processes took ${result.cpu.other.toFixed(2)} cores; measuring again`);
        }
        rounds[server === service ? 'service' : 'baseline'].push(result);
        progress(`${workload.name} round ${round} ${server.name.padEnd(8)}: ${describeRound(result)}`);
      }
    }
    const report = summariseWorkload(workload, rounds.service, rounds.baseline, discarded);
    report.problems.push(...warmupProblems);
    reports.push(report);
  }

  if (options.metrics) await reportMetrics(service, serviceResponses);

  // VmHWM must be read while the processes still exist.
  const peak = (server: ServerProcess) => readMemory(server.pid)?.peak ?? Number.NaN;
  const servicePeak = peak(service);
  const baselinePeak = peak(baseline);
  progress('stopping the servers ...');
  const [serviceExit, baselineExit] = await Promise.all([service.stop(), baseline.stop()]);
  children.length = 0;
  const log = service.stdout();

  const facts = (start: RepeatedStart, peakRss: number, exitCode: number | null): ServerFacts => ({
    listeningMs: median(start.listeningMs),
    startToFirstOkMs: median(start.startToFirstOkMs),
    starts: start.startToFirstOkMs,
    peakRssBytes: peakRss,
    exitCode,
  });
  const cpu = cpus();
  const withoutChecks: Omit<BenchReport, 'checks'> = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    command: ['npm run bench', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' '),
    machine: { cpus: cpu.length, cpuModel: cpu[0]?.model ?? 'unknown', memoryBytes: totalmem(), kernel: release(), node: process.version },
    options: {
      pets: options.pets,
      seconds: options.seconds,
      warmup: options.warmup,
      rounds: options.rounds,
      connections: options.connections,
      only: options.only,
      profile: options.profile,
      metrics: options.metrics,
    },
    load,
    database: { pets: options.pets, seedMs: seeded.seedMs },
    servers: {
      service: facts(serviceStart, servicePeak, serviceExit),
      baseline: facts(baselineStart, baselinePeak, baselineExit),
    },
    accessLog: { lines: log.lines, bytes: log.bytes, requestsSent: serviceResponses },
    keyset,
    workloads: reports,
    profile: null,
  };
  const report: BenchReport = { ...withoutChecks, checks: buildChecks(withoutChecks) };

  let profileText = '';
  if (options.profile) {
    const file = join(options.out, profileName);
    try {
      statSync(file);
      report.profile = relative(ROOT, file);
      profileText = formatProfileSummary(summariseProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, ROOT), 25);
    } catch {
      const found = readdirSync(options.out).filter((name) => name.endsWith('.cpuprofile'));
      progress(`no profile at ${file} (found: ${found.join(', ') || 'none'})`);
    }
  }

  process.stdout.write(`\n${formatText(report)}`);
  if (options.profile) {
    process.stdout.write(`\nThe service ran under --cpu-prof: its figures above are lower than without it.\n`);
    if (profileText !== '') process.stdout.write(`\nCPU profile of the service (${report.profile}):\n${profileText}`);
  }
  writeFileSync(join(options.out, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(
    join(options.out, 'latest.md'),
    `# Benchmark, ${report.startedAt}\n\n\`${report.command}\`\n\n${formatMarkdown(report)}` +
      (profileText === '' ? '' : `\n## CPU profile of the service (${report.profile})\n\n\`\`\`\n${profileText}\`\`\`\n`),
  );
  progress(`\nwrote ${relative(process.cwd(), join(options.out, 'latest.json'))} and latest.md`);

  rmSync(workDir, { recursive: true, force: true });
  const invalid = reports.some((workload) => workload.problems.length > 0) || serviceExit !== 0 || baselineExit !== 0;
  if (invalid) progress('some measurements are invalid (errors, non-2xx answers or an unclean exit): see above');
  const unusable = reports.filter((workload) => workload.unusableRounds > 0).map((workload) => workload.name);
  if (unusable.length > 0) progress(`UNUSABLE: the generator was near its limit in some rounds of ${unusable.join(', ')}: those figures measure the generator, not the server`);
  process.exitCode = invalid || unusable.length > 0 ? 1 : 0;
}

/** One round's figures on one line, for the progress output. */
function describeRound(result: LoadResult): string {
  const { cpu } = result;
  const core = (share: number | null) => (share === null ? '' : ` (core ${(share * 100).toFixed(0)} %)`);
  return (
    `${Math.round(result.rps).toLocaleString('en-US').padStart(7)} req/s, ` +
    `p50 ${result.latencyMs.p50.toFixed(2)} ms, p99 ${result.latencyMs.p99.toFixed(2)} ms, ` +
    `server CPU ${cpu.server.toFixed(2)}${core(cpu.serverCore)}, generator ${cpu.generator.toFixed(2)}${core(cpu.generatorCore)}, ` +
    `kernel ${cpu.kernel.toFixed(2)}, other ${cpu.other.toFixed(2)}` +
    (result.non2xx + result.errors > 0 ? `, ${result.non2xx} non-2xx, ${result.errors} errors` : '') +
    (isUnusable(result) ? ` UNUSABLE: generator ${(generatorLoad(result) * 100).toFixed(0)} % busy` : '')
  );
}

/** wrk's version, and where it and the servers run: one core each. */
function chooseLoad(options: BenchOptions, wrk: string): LoadFacts {
  const { pinning, note } = choosePinning(allowedCpus(), 1, { pin: options.pin, tasksetFound: findExecutable('taskset') !== null });
  return { version: wrkVersion(wrk), pinning, pinningNote: note };
}

/** `wrk debian/4.1.0-3+b2` from `wrk --version` (which prints its usage too and exits 1). */
function wrkVersion(wrk: string): string {
  const output = spawnSync(wrk, ['--version'], { encoding: 'utf8' }).stdout ?? '';
  return /^wrk \S+/.exec(output)?.[0] ?? 'wrk (version unknown)';
}

/** Scrapes the service's metrics once, to show that they were on and counted the load. */
async function reportMetrics(service: ServerProcess, responses: number): Promise<void> {
  if (service.metricsUrl === null) throw new Error('--metrics: the service logged no metrics_listening line');
  const answer = await fetchOnce(`${service.metricsUrl}/metrics`, { timeoutMs: 10_000 });
  if (answer.status !== 200) throw new Error(`--metrics: GET /metrics answered ${answer.status}`);
  let counted = 0;
  for (const line of answer.body.split('\n')) {
    if (line.startsWith('http_requests_total{')) counted += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  progress(`metrics: http_requests_total counted ${counted.toLocaleString('en-US')} requests (the loads sent ${responses.toLocaleString('en-US')}, plus start and keyset checks)`);
}

interface RepeatedStart {
  /** The server of the last start, left running for the loads. */
  server: ServerProcess;
  /** Its answer to the first 200. */
  answer: HttpAnswer;
  startToFirstOkMs: number[];
  listeningMs: number[];
}

/**
 * Starts a server STARTS times, timing spawn -> first 200 of FIRST_PATH each time (one start
 * is too noisy to show that start-up does not grow with the table), and keeps the last one.
 * `args(kept)` may differ for the kept one (--cpu-prof). The server runs on `cpus` only, when given.
 */
async function startRepeatedly(
  name: string,
  args: (kept: boolean) => string[],
  env: Record<string, string>,
  headers: Record<string, string>,
  cpus: number[] | null,
): Promise<RepeatedStart> {
  const startToFirstOkMs: number[] = [];
  const listeningMs: number[] = [];
  for (let start = 1; ; start++) {
    const kept = start === STARTS;
    const server = await startServer({ name, args: args(kept), env, timeoutMs: 10_000, cpus });
    children.push(server);
    const first = await firstOk(server, FIRST_PATH, headers, 10_000);
    startToFirstOkMs.push(first.startToFirstOkMs);
    listeningMs.push(server.listeningMs);
    if (kept) {
      progress(`${name} at ${server.url}: first 200 after ${startToFirstOkMs.map((ms) => ms.toFixed(0)).join(', ')} ms`);
      return { server, answer: first.answer, startToFirstOkMs, listeningMs };
    }
    const code = await server.stop();
    children.splice(children.indexOf(server), 1);
    if (code !== 0) throw new Error(`${name} exited with code ${code} when stopped\n${server.stderrTail()}`);
  }
}

/**
 * Waits until other processes use less than NOISE_CORES (sampled over 0.5 s), for at most
 * QUIET_WAIT_MS, and not at all once QUIET_WAIT_TOTAL_MS have been spent waiting in this run.
 */
async function quiet(ownPids: number[]): Promise<void> {
  const started = performance.now();
  while (quietWaitedMs < QUIET_WAIT_TOTAL_MS && performance.now() - started < QUIET_WAIT_MS) {
    const before = performance.now();
    const other = await otherLoad(ownPids, 500);
    quietWaitedMs += performance.now() - before;
    if (other <= NOISE_CORES) return;
  }
}

/** One request of each kind a workload sends, to the service: all must answer 2xx before any load. */
async function checkWorkloads(service: ServerProcess, workloads: Workload[], authorization: string): Promise<void> {
  for (const workload of workloads) {
    for (const request of [workload.sequence[0]!, workload.sequence.at(-1)!]) {
      const answer = await fetchOnce(service.url + request.path, {
        method: request.method,
        headers: { ...request.headers, authorization },
        ...(request.body === undefined ? {} : { body: request.body }),
      });
      if (answer.status < 200 || answer.status > 299) {
        throw new Error(`${workload.name}: ${request.method} ${request.path} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
      }
      if (workload.name === 'deep' && !(JSON.parse(answer.body) as unknown[]).length) {
        throw new Error(`deep: ${request.path} answered an empty page`);
      }
    }
  }
}
