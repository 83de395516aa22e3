/**
 * The capacity model (docs/performance-model.md has its assumptions and equations): from what
 * one instance costs per request on one core, the requests per second of deployments this
 * 2-core machine cannot hold, and the resource that limits each first.
 *
 * Operational analysis: a resource busy D seconds per request, of which there are c, allows at
 * most c / D requests a second (the utilisation law, at 100 % busy); a deployment allows the
 * smallest of its resources' limits, and that resource is its bottleneck. The costs D are
 * measured (bench/scaling.ts); the model only adds them up per resource. It predicts the one-
 * and two-core runs that can be measured here, so that its error is known before its
 * projections to 4, 16 and 64 cores are read.
 */
import { perResponse } from './measure.ts';
import { count, textTable } from './report.ts';
import type { Engine, ScalingRow } from './scaling.ts';
import type { WorkloadName } from './workloads.ts';

/** CPU of the remote rate-limit take of a worker with WORKERS above 1, both threads (bench/experiments/remote-limiter.ts). */
export const REMOTE_TAKE_US = 2.3;
/** The clients' network link in the projections: 10 Gbit/s. */
export const LINK_BITS_PER_SECOND = 10e9;
export const PROJECTED_CORES = [4, 16, 64] as const;

/** What one request cost, in one run (microseconds of CPU unless said otherwise). */
export interface Costs {
  engine: Engine;
  workload: WorkloadName;
  /** The requests/s of the run the costs come from. */
  rps: number;
  /** The service's processes, all threads; the first one's main thread alone. */
  serviceUs: number;
  mainThreadUs: number;
  /**
   * SQLite: the writer thread's CPU, which makes every write (the service's threads other than
   * the main one, in a run of one process); filled in from that run for a run with WORKERS.
   */
  writerUs: number;
  postgresUs: number;
  generatorUs: number;
  /** The bench process, which reads the service's access log. */
  harnessUs: number;
  /** Interrupts, softirqs (loopback networking, both ends) and kernel threads, charged to no process. */
  kernelUs: number;
  /** Commits that wait for a flush of the log to disk: the SQLite file's commits, or PostgreSQL's WAL writes. */
  flushes: number;
  /** PostgreSQL: statements, calls of take_tokens, and the time of one call in PostgreSQL (µs), holding the key's row. */
  statements: number;
  takeCalls: number;
  takeCallUs: number;
  /** Bytes on the client's socket: of the request, and of the answer. */
  requestBytes: number;
  responseBytes: number;
}

export function costsOf(row: ScalingRow): Costs {
  const { result, postgres } = row;
  const responses = result.requests + result.non2xx;
  const us = (cores: number) => perResponse(result, cores) * 1e6;
  return {
    engine: row.configuration.engine,
    workload: row.workload,
    rps: result.rps,
    serviceUs: us(result.cpu.server),
    mainThreadUs: us(result.cpu.serverMainThread),
    writerUs: row.configuration.engine === 'sqlite' && row.configuration.workers === 1 ? Math.max(0, us(result.cpu.server - result.cpu.serverMainThread)) : 0,
    postgresUs: us(result.cpu.postgres),
    generatorUs: us(result.cpu.generator),
    harnessUs: us(result.cpu.harness),
    kernelUs: us(result.cpu.kernel),
    flushes: (row.commits ?? postgres?.walWrites ?? 0) / responses,
    statements: (postgres?.statements ?? 0) / responses,
    takeCalls: (postgres?.takeCalls ?? 0) / responses,
    takeCallUs: postgres !== null && postgres.takeCalls > 0 ? (postgres.takeMs * 1000) / postgres.takeCalls : 0,
    requestBytes: result.requestBytes,
    responseBytes: result.responseBytes,
  };
}

/** A resource that each request keeps busy `demandUs` microseconds, of which there are `capacity`. */
export interface Resource {
  name: string;
  demandUs: number;
  capacity: number;
}

/** The most requests a second the resources allow, and the one that allows fewest. */
export function bound(resources: readonly Resource[]): { rps: number; bottleneck: string } {
  let best = { rps: Number.POSITIVE_INFINITY, bottleneck: 'none' };
  for (const resource of resources) {
    const rps = resource.demandUs > 0 ? (resource.capacity * 1e6) / resource.demandUs : Number.POSITIVE_INFINITY;
    if (rps < best.rps) best = { rps, bottleneck: resource.name };
  }
  return best;
}

/**
 * Where everything runs:
 * - `pinned`: one server on a core of its own; wrk, the bench and PostgreSQL on another (measured);
 * - `shared`: `servers` servers (instances or workers), wrk, the bench and PostgreSQL all on
 *   `cores` cores (measured with two);
 * - `projected`: `cores` servers on `cores` cores, PostgreSQL on as many cores of its own, the
 *   clients on other machines, and PostgreSQL's fsync on (a flush takes `flushUs`); `oneKey`:
 *   every request takes from the same limiter row (the bench's single key), else from rows that
 *   concurrent batches do not share.
 */
export type Deployment =
  | { kind: 'pinned' }
  | { kind: 'shared'; cores: number; servers: number }
  | { kind: 'projected'; cores: number; oneKey: boolean };

/** The resources a deployment of `costs`' engine has, and each one's demand per request. */
export function resources(costs: Costs, deployment: Deployment, flushUs: number): Resource[] {
  const c = costs;
  const sqlite = c.engine === 'sqlite';
  // On SQLite one writer thread makes every write; node:sqlite is synchronous, so a commit's
  // fsync stops the writer's event loop (not a request thread's), though not its core.
  const fsyncUs = sqlite ? c.flushes * flushUs : 0;
  const writer: Resource = { name: 'SQLite writer thread', demandUs: c.writerUs + fsyncUs, capacity: 1 };
  const loops = (servers: number, extraUs = 0): Resource => ({ name: 'service event loops', demandUs: c.serviceUs - c.writerUs + extraUs, capacity: servers });
  const row = (durable: boolean): Resource => ({ name: 'limiter row (one key)', demandUs: c.takeCalls * (c.takeCallUs + (durable ? flushUs : 0)), capacity: 1 });
  if (deployment.kind === 'pinned') {
    return [
      // Every thread of the server (on SQLite, the writer too) shares its one core.
      { name: 'server core', demandUs: c.serviceUs, capacity: 1 },
      ...(sqlite ? [writer] : []),
      { name: 'wrk core', demandUs: c.generatorUs + c.harnessUs + c.postgresUs, capacity: 1 },
      ...(sqlite ? [] : [row(false)]),
    ];
  }
  if (deployment.kind === 'shared') {
    const workers = sqlite && deployment.servers > 1 ? REMOTE_TAKE_US : 0;
    return [
      { name: 'CPU (every process)', demandUs: c.serviceUs + workers + c.postgresUs + c.generatorUs + c.harnessUs + c.kernelUs, capacity: deployment.cores },
      loops(deployment.servers, workers),
      ...(sqlite ? [writer] : [row(false)]),
    ];
  }
  const cores = deployment.cores;
  // A link carries as much each way: the answers are the larger direction (TCP/IP headers left out).
  const network: Resource = { name: 'client network', demandUs: (Math.max(c.requestBytes, c.responseBytes) * 8 * 1e6) / LINK_BITS_PER_SECOND, capacity: 1 };
  // The kernel's share is both ends of loopback connections: the service's end is about half.
  const serviceCpu: Resource = { name: 'service CPU', demandUs: c.serviceUs + c.kernelUs / 2, capacity: cores };
  if (sqlite) {
    return [serviceCpu, loops(cores), { name: 'limiter thread', demandUs: c.mainThreadUs, capacity: 1 }, writer, network];
  }
  return [
    serviceCpu,
    { name: 'PostgreSQL CPU', demandUs: c.postgresUs, capacity: cores },
    ...(deployment.oneKey ? [row(true)] : []),
    // Commits of different instances wait together and share a flush: at least one per instance.
    { name: 'WAL flushes', demandUs: c.flushes * flushUs, capacity: cores },
    network,
  ];
}

export interface Prediction {
  engine: Engine;
  workload: WorkloadName;
  cores: number;
  predicted: number;
  bottleneck: string;
  measured: number;
  /** The service's CPU per request measured in that run: the projections assume it does not grow with servers. */
  measuredServiceUs: number;
}

export interface ModelReport {
  flushUs: number;
  costs: Costs[];
  predictions: Prediction[];
  projections: Array<{ engine: Engine; oneKey: boolean; workload: WorkloadName; cores: number; rps: number; bottleneck: string; postgresCores: number }>;
}

/**
 * The model of a --model run's rows: the costs of one server (one process or instance), its
 * predictions of the one- and two-core runs from those costs alone, and its projections, for
 * SQLite from the costs with two workers (the only WORKERS costs measured here).
 */
export function buildModel(rows: readonly ScalingRow[], flushUs: number): ModelReport {
  const find = (engine: Engine, servers: number, workload: WorkloadName) =>
    rows.find((row) => row.configuration.engine === engine && row.configuration.instances * row.configuration.workers === servers && row.workload === workload);
  const report: ModelReport = { flushUs, costs: [], predictions: [], projections: [] };
  for (const one of rows.filter((row) => row.configuration.instances * row.configuration.workers === 1)) {
    const costs = costsOf(one);
    const { engine, workload } = costs;
    report.costs.push(costs);
    const pinned = bound(resources(costs, { kind: 'pinned' }, flushUs));
    report.predictions.push({ engine, workload, cores: 1, predicted: pinned.rps, bottleneck: pinned.bottleneck, measured: one.result.rps, measuredServiceUs: costs.serviceUs });
    const two = find(engine, 2, workload);
    if (two === undefined) continue;
    const shared = bound(resources(costs, { kind: 'shared', cores: 2, servers: 2 }, flushUs));
    report.predictions.push({ engine, workload, cores: 2, predicted: shared.rps, bottleneck: shared.bottleneck, measured: two.result.rps, measuredServiceUs: costsOf(two).serviceUs });
    // SQLite's projections start from two workers' costs, with the writer's from one process's.
    const base = engine === 'sqlite' ? { ...costsOf(two), writerUs: costs.writerUs } : costs;
    for (const oneKey of engine === 'sqlite' ? [true] : [true, false]) {
      for (const cores of PROJECTED_CORES) {
        const projected = bound(resources(base, { kind: 'projected', cores, oneKey }, flushUs));
        report.projections.push({ engine, oneKey, workload, cores, ...projected, postgresCores: (projected.rps * base.postgresUs) / 1e6 });
      }
    }
  }
  return report;
}

/** The model's three tables: costs, predictions against measurements, projections. */
export function formatModel(model: ModelReport): string {
  const name = (engine: Engine) => (engine === 'sqlite' ? 'SQLite' : 'PostgreSQL');
  const us = (value: number) => (value >= 10 ? value.toFixed(0) : value.toFixed(1));
  const costs = textTable(
    ['workload', 'engine', 'req/s', 'service', 'main thread', 'writer', 'PostgreSQL', 'wrk', 'bench', 'kernel', 'statements', 'flushes', 'take call us', 'bytes in/out'],
    model.costs.map((c) => [
      c.workload, name(c.engine), count(c.rps), us(c.serviceUs), us(c.mainThreadUs), c.engine === 'sqlite' ? us(c.writerUs) : '-', us(c.postgresUs), us(c.generatorUs), us(c.harnessUs), us(c.kernelUs),
      c.statements.toFixed(3), c.flushes.toFixed(4), c.engine === 'sqlite' ? '-' : us(c.takeCallUs), `${count(c.requestBytes)} / ${count(c.responseBytes)}`,
    ]),
    [false, false, true, true, true, true, true, true, true, true, true, true, true, true],
  );
  const predictions = textTable(
    ['workload', 'engine', 'cores', 'predicted req/s', 'measured req/s', 'measured / predicted', 'predicted limit', 'service us/request measured'],
    model.predictions.map((p) => [p.workload, name(p.engine), String(p.cores), count(p.predicted), count(p.measured), (p.measured / p.predicted).toFixed(2), p.bottleneck, us(p.measuredServiceUs)]),
    [false, false, true, true, true, true, false, true],
  );
  const variant = (p: ModelReport['projections'][number]) => (p.engine === 'sqlite' ? 'SQLite' : `PostgreSQL, ${p.oneKey ? 'one key' : 'many keys'}`);
  // SQLite, then PostgreSQL with one key, then with many; the workloads in their order.
  const order = (p: ModelReport['projections'][number]) => (p.engine === 'sqlite' ? 0 : p.oneKey ? 1 : 2);
  const keys = [...new Set([...model.projections].sort((a, b) => order(a) - order(b)).map((p) => `${variant(p)}|${p.workload}`))];
  const projections = textTable(
    ['engine', 'workload', ...PROJECTED_CORES.map((cores) => `${cores} cores: req/s, first limit`), 'PostgreSQL cores busy at 64'],
    keys.map((key) => {
      const cells = model.projections.filter((p) => `${variant(p)}|${p.workload}` === key);
      const last = cells.at(-1)!;
      return [variant(last), last.workload, ...cells.map((p) => `${count(p.rps)} ${p.bottleneck}`), last.engine === 'sqlite' ? '-' : last.postgresCores.toFixed(1)];
    }),
    [false, false, false, false, false, true],
  );
  return [
    `Capacity model (docs/performance-model.md). This machine's disk makes a 4 KiB append durable (fdatasync) in ${us(model.flushUs)} us (median of 200).`,
    '',
    'Costs of one request, one server on one core (CPU in microseconds; statements, flushes and bytes per request):',
    costs,
    '',
    'Predicted from those costs against measured: one server pinned to a core (wrk, the bench and PostgreSQL on the other);',
    'two servers (WORKERS=2, or two instances) with everything on both cores:',
    predictions,
    '',
    `Projected: N servers (WORKERS=N on SQLite, N instances on PostgreSQL) on N cores, PostgreSQL on N cores of its own, fsync on,`,
    `clients elsewhere on a ${LINK_BITS_PER_SECOND / 1e9} Gbit/s link; on PostgreSQL with one API key (every request takes from its`,
    'limiter row) or many (batches of different instances do not share rows):',
    projections,
    '',
  ].join('\n');
}
