/**
 * The runs past the comparison: the service alone, on SQLite with WORKERS=N (--cores) or on
 * PostgreSQL with N instances on one database (--scale-out), every workload after a warm-up,
 * measured once. The servers get the first cores (one per worker or instance), wrk and
 * PostgreSQL the next ones, or share them when none is left. Beside throughput, each run keeps
 * the CPU of every process (the servers', PostgreSQL's, wrk's, and the rest of the machine's).
 */
import { startService, stopServer, type BenchContext } from './context.ts';
import { choosePinning, installed, pinProcess } from './cpu.ts';
import { checkWorkloads, measureQuietly, runLoad, type LoadResult } from './measure.ts';
import { startBenchPostgres, type BenchPostgres } from './postgres.ts';
import { count, describeLoad, fixed, percent, textTable } from './report.ts';
import type { Workload, WorkloadName } from './workloads.ts';

interface Configuration {
  engine: 'sqlite' | 'postgres';
  /** Server processes (PostgreSQL only: one SQLite file is served by one process). */
  instances: number;
  /** WORKERS of each (SQLite only). */
  workers: number;
}

export function describe({ engine, instances, workers }: Configuration): string {
  return engine === 'sqlite' ? `SQLite, ${workers === 1 ? '1 process' : `WORKERS=${workers}`}` : `PostgreSQL, ${instances} instance${instances === 1 ? '' : 's'}`;
}

/** The configurations that --cores and --scale-out ask for, SQLite first. */
export function configurationsFor(options: { cores: number[] | null; scaleOut: number[] | null }): Configuration[] {
  return [
    ...(options.cores ?? []).map((n): Configuration => ({ engine: 'sqlite', instances: 1, workers: n })),
    ...(options.scaleOut ?? []).map((n): Configuration => ({ engine: 'postgres', instances: n, workers: 1 })),
  ];
}

export interface ScalingRow {
  configuration: Configuration;
  workload: WorkloadName;
  result: LoadResult;
  /** Whether wrk (and PostgreSQL) shared the servers' cores. */
  shared: boolean;
}

/** Measures every workload in every configuration; PostgreSQL is started for the first that needs it. */
export async function runScaling(context: BenchContext, workloads: Workload[], configurations: Configuration[]): Promise<ScalingRow[]> {
  let postgres: BenchPostgres | null = null;
  const rows: ScalingRow[] = [];
  try {
    for (const configuration of configurations) {
      if (configuration.engine === 'postgres' && postgres === null) {
        context.progress('starting a throwaway PostgreSQL cluster ...');
        postgres = await startBenchPostgres(context.options.pets);
      }
      rows.push(...(await runConfiguration(context, workloads, configuration, postgres)));
    }
  } finally {
    await postgres?.remove();
  }
  return rows;
}

async function runConfiguration(context: BenchContext, workloads: Workload[], configuration: Configuration, postgres: BenchPostgres | null): Promise<ScalingRow[]> {
  const { options, progress } = context;
  const { pinning, note, shared } = choosePinning(context.cpus, configuration.instances * configuration.workers, { pin: options.pin, tasksetFound: installed('taskset') });
  progress(`${describe(configuration)}: ${note}${postgres !== null && pinning !== null ? '; PostgreSQL with the generator' : ''}`);
  // This process reads the servers' logs and samples /proc during the loads: with wrk, and so is PostgreSQL.
  if (pinning !== null) pinProcess(process.pid, pinning.generator);
  if (configuration.engine === 'postgres' && pinning !== null) postgres!.pin(pinning.generator);
  const connections = options.connections * configuration.workers;
  const database: Record<string, string> = configuration.engine === 'sqlite'
    ? { DATABASE_PATH: context.database.path, WORKERS: String(configuration.workers) }
    : { DATABASE_URL: postgres!.url };
  const servers = [];
  for (let i = 0; i < configuration.instances; i++) servers.push(await startService(context, connections, database, pinning?.server ?? null));
  const authorization = `Bearer ${configuration.engine === 'sqlite' ? context.database.key : postgres!.key}`;
  await checkWorkloads(servers[0]!.url, workloads, authorization);
  const target = { urls: servers.map((server) => server.url), pids: servers.map((server) => server.pid), ...(postgres === null ? {} : { extraTicks: postgres.ticks }) };
  const load = (workload: Workload, seconds: number) => runLoad(target, workload, { pinning, seconds, connections, authorization });

  const rows: ScalingRow[] = [];
  for (const workload of workloads) {
    if (options.warmup > 0) await load(workload, options.warmup);
    // Disturbed by other processes: measured again, twice at most.
    const { result } = await measureQuietly(context, target.pids, `  ${workload.name}`, () => load(workload, options.seconds), 2);
    rows.push({ configuration, workload: workload.name, result, shared });
    progress(`  ${workload.name}: ${describeLoad(result)}`);
  }
  for (const server of servers) {
    const code = await stopServer(context, server);
    if (code !== 0) progress(`  the service exited with code ${code}: ${server.stderrTail()}`);
  }
  return rows;
}

/**
 * Every configuration and workload, with its speed-up over the engine's first configuration and,
 * for PostgreSQL, its speed against one SQLite process on the same workload in the same run.
 */
export function formatScaling(rows: readonly ScalingRow[]): string {
  const headings = ['configuration', 'workload', 'req/s', 'x first', 'x SQLite', 'p99 ms', 'server cores', 'PostgreSQL cores', 'wrk core %', 'other', 'note'];
  const table = rows.map(({ configuration, workload, result, shared }) => {
    const first = rows.find((other) => other.workload === workload && other.configuration.engine === configuration.engine)!;
    const sqlite = rows.find((other) => other.workload === workload && other.configuration.engine === 'sqlite' && other.configuration.workers === 1);
    return [
      describe(configuration), workload, count(result.rps), fixed(result.rps / first.result.rps),
      configuration.engine === 'postgres' && sqlite !== undefined ? fixed(result.rps / sqlite.result.rps) : '-',
      fixed(result.latencyMs.p99),
      fixed(result.cpu.server), configuration.engine === 'sqlite' ? '-' : fixed(result.cpu.postgres),
      result.cpu.generatorCore === null ? '-' : percent(result.cpu.generatorCore), fixed(result.cpu.other),
      [shared ? 'wrk shares the servers\' cores' : '', result.non2xx + result.errors > 0 ? `${result.non2xx} non-2xx, ${result.errors} errors` : ''].filter(Boolean).join('; '),
    ];
  });
  return `${textTable(headings, table, [false, false, true, true, true, true, true, true, true, true, false])}\n\n` +
    'x SQLite: against one SQLite process on the same workload in this run (the target for one PostgreSQL instance is 0.50 for list20 and get);\n' +
    'server cores: CPU of the service\'s processes, all threads; wrk core %: the busiest of wrk\'s cores, whatever ran on it\n' +
    '(over 90 %: wrk may have been the limit, unless it shared the servers\' cores); other: cores used by other processes (noise).\n';
}
