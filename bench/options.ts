/**
 * The command line of `npm run bench`. Strict: an unknown option or a bad number stops the bench
 * before it starts anything.
 */
import { parseArgs } from 'node:util';
import { WORKLOAD_NAMES, type WorkloadName } from './workloads.ts';

/** The options as USAGE describes them; null where an option was not given and has no default. */
export interface BenchOptions {
  pets: number;
  seconds: number;
  warmup: number;
  rounds: number;
  connections: number;
  /** In the standard order. */
  only: WorkloadName[] | null;
  /** false with --no-pin. */
  pin: boolean;
  cpuQuota: number | null;
  quietWaitSeconds: number;
  /** --cores: the WORKERS counts to measure on SQLite. */
  cores: number[] | null;
  /** --scale-out: the numbers of PostgreSQL instances to measure (--instances). */
  scaleOut: number[] | null;
  out: string | null;
  help: boolean;
}

/** The workloads of the cores and scale-out runs unless --only says otherwise. */
export const SCALING_WORKLOADS: readonly WorkloadName[] = ['list20', 'deep', 'get', 'create', 'mix', 'patchmix'];

export const USAGE = `Usage: npm run bench -- [options]

By default: the service (production settings, a seeded SQLite file, access log on) against a
bare node:http baseline, measured alternately with wrk on 127.0.0.1, the servers pinned to one
core and wrk to another; ratios, latencies, memory and start-up against their targets.

Instead (any of them, together):
  --cores L         the service on SQLite with WORKERS=N for each N of the list L (e.g. 1,2):
                    throughput against the cores it has; the first N cores are the server's,
                    wrk gets the next ones or, when none is left, shares them (and says so)
  --scale-out       the service on PostgreSQL (a throwaway cluster, fsync off), N instances on
                    one database for each N of --instances, one wrk per instance
  --instances L     the instance counts of --scale-out (default 1,2)

Options:
  --pets N          pets in the database (default 10000)
  --seconds S       length of one measured round per server (default 5)
  --warmup S        warm-up per server and workload (default 3)
  --rounds R        measured rounds per server and workload in the comparison (default 3)
  --connections C   connections per server instance, or per worker (default 50)
  --only A,B        only these workloads: ${WORKLOAD_NAMES.join(', ')}
                    (default: all in the comparison; ${SCALING_WORKLOADS.join(', ')} otherwise)
  --no-pin          run the servers and the generator on any core (taskset not used)
  --cpu-quota N     run the servers in a cgroup (v1 cpu) that gives them N cores' time, as a
                    container's --cpus=N does (with --no-pin: every core visible, N cores' time)
  --quiet-wait S    wait at most S seconds in all for other processes to quieten (default 180)
  --out DIR         where to write latest.json (default bench/results)
  --help            this text
`;

const FLAGS = ['no-pin', 'scale-out', 'help'] as const;
const VALUES = ['pets', 'seconds', 'warmup', 'rounds', 'connections', 'only', 'cpu-quota', 'quiet-wait', 'cores', 'instances', 'out'] as const;

/** Parses `argv` (without node and the script); throws an Error with a one-line message. */
export function parseBenchOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv, strict: true, allowPositionals: false,
    options: Object.fromEntries([...FLAGS.map((name) => [name, { type: 'boolean' }]), ...VALUES.map((name) => [name, { type: 'string' }])]),
  }) as { values: Partial<Record<(typeof FLAGS)[number], boolean> & Record<(typeof VALUES)[number], string>> };
  let only: WorkloadName[] | null = null;
  if (values.only !== undefined) {
    const wanted = values.only.split(',').map((name) => name.trim());
    const unknown = wanted.find((name) => !(WORKLOAD_NAMES as readonly string[]).includes(name));
    if (unknown !== undefined) throw new Error(`--only: unknown workload ${JSON.stringify(unknown)}; known: ${WORKLOAD_NAMES.join(', ')}`);
    only = WORKLOAD_NAMES.filter((name) => wanted.includes(name));
  }
  if (values.instances !== undefined && !values['scale-out']) throw new Error('--instances goes with --scale-out');
  const quota = values['cpu-quota'];
  const cores = quota !== undefined && /^[0-9]+(\.[0-9]+)?$/.test(quota) ? Number(quota) : Number.NaN;
  if (quota !== undefined && !(cores > 0 && cores <= 256)) throw new Error(`--cpu-quota must be a number of cores above 0, got ${JSON.stringify(quota)}`);
  return {
    pets: integer(values.pets, '--pets', 10_000, 1, 100_000_000),
    seconds: integer(values.seconds, '--seconds', 5, 1, 600),
    warmup: integer(values.warmup, '--warmup', 3, 0, 600),
    rounds: integer(values.rounds, '--rounds', 3, 1, 100),
    connections: integer(values.connections, '--connections', 50, 1, 1000),
    only,
    pin: !(values['no-pin'] ?? false),
    cpuQuota: quota === undefined ? null : cores,
    quietWaitSeconds: integer(values['quiet-wait'], '--quiet-wait', 180, 0, 3600),
    cores: values.cores === undefined ? null : counts(values.cores, '--cores', 256),
    scaleOut: values['scale-out'] ? counts(values.instances ?? '1,2', '--instances', 16) : null,
    out: values.out ?? null,
    help: values.help ?? false,
  };
}

/** A list such as 1,2,4: distinct counts from 1 to `max`, in increasing order. */
function counts(raw: string, name: string, max: number): number[] {
  return [...new Set(raw.split(',').map((part) => integer(part.trim(), name, 1, 1, max)))].sort((a, b) => a - b);
}

/** An integer option from `min` to `max`, `fallback` when not given; throws an Error naming the option. */
export function integer(raw: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  // Digits only, with optional _ separators as in 1_000_000.
  const value = /^[0-9][0-9_]*$/.test(raw) ? Number(raw.replaceAll('_', '')) : Number.NaN;
  if (!(Number.isSafeInteger(value) && value >= min && value <= max)) throw new Error(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  return value;
}
