/**
 * The command line of `npm run bench`. Strict: an unknown option or a bad number stops the bench
 * before it starts anything.
 */
import { parseArgs } from 'node:util';
import { WORKLOAD_NAMES, type WorkloadName } from './workloads.ts';

export interface BenchOptions {
  /** Pets seeded before the service starts. */
  pets: number;
  /** Length of one measured round, per server. */
  seconds: number;
  /** Warm-up per server and workload before its rounds. */
  warmup: number;
  rounds: number;
  connections: number;
  /** Workloads to run, in the standard order; null for all. */
  only: WorkloadName[] | null;
  /** Start the service with --cpu-prof (its figures are then not representative). */
  profile: boolean;
  /** Start the service with METRICS_PORT, so that every request is counted (issue #14). */
  metrics: boolean;
  /** false with --no-pin: no core of its own for the server nor for the generator. */
  pin: boolean;
  /** How long, in all, the bench may wait for other processes to quieten before its rounds. */
  quietWaitSeconds: number;
  /** Where latest.json, latest.md and profiles go. */
  out: string;
  help: boolean;
}

export const USAGE = `Usage: npm run bench -- [options]

Starts the service (production settings, a seeded file database, access log on) and a bare
node:http baseline, and measures them alternately on 127.0.0.1 with wrk, the servers pinned to
one core and wrk to another.

  --pets N          pets in the database (default 10000)
  --seconds S       length of one measured round per server (default 5)
  --warmup S        warm-up per server and workload (default 3)
  --rounds R        measured rounds per server and workload (default 3)
  --connections C   concurrent connections (default 50)
  --only A,B        only these workloads: ${WORKLOAD_NAMES.join(', ')}
  --profile         run the service under node --cpu-prof and summarise the profile
  --metrics         run the service with METRICS_PORT set (metrics counted), and scrape it at the end
  --no-pin          run the servers and the generator on any core (taskset not used)
  --quiet-wait S    wait at most S seconds in all for other processes to quieten (default 180)
  --out DIR         where to write latest.json, latest.md and profiles (default bench/results)
  --help            this text
`;

/** Parses `argv` (without node and the script); throws an Error with a one-line message. */
export function parseBenchOptions(argv: string[], defaultOut: string): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      pets: { type: 'string' },
      seconds: { type: 'string' },
      warmup: { type: 'string' },
      rounds: { type: 'string' },
      connections: { type: 'string' },
      only: { type: 'string' },
      profile: { type: 'boolean' },
      metrics: { type: 'boolean' },
      'no-pin': { type: 'boolean' },
      'quiet-wait': { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  let only: WorkloadName[] | null = null;
  if (values.only !== undefined) {
    const wanted = values.only.split(',').map((name) => name.trim());
    for (const name of wanted) {
      if (!(WORKLOAD_NAMES as readonly string[]).includes(name)) {
        throw new Error(`--only: unknown workload ${JSON.stringify(name)}; known: ${WORKLOAD_NAMES.join(', ')}`);
      }
    }
    only = WORKLOAD_NAMES.filter((name) => wanted.includes(name));
  }
  return {
    pets: integer(values.pets, '--pets', 10_000, 1, 100_000_000),
    seconds: integer(values.seconds, '--seconds', 5, 1, 600),
    warmup: integer(values.warmup, '--warmup', 3, 0, 600),
    rounds: integer(values.rounds, '--rounds', 3, 1, 100),
    connections: integer(values.connections, '--connections', 50, 1, 10_000),
    only,
    profile: values.profile ?? false,
    metrics: values.metrics ?? false,
    pin: !(values['no-pin'] ?? false),
    quietWaitSeconds: integer(values['quiet-wait'], '--quiet-wait', 180, 0, 3600),
    out: values.out ?? defaultOut,
    help: values.help ?? false,
  };
}

function integer(raw: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  // Digits only, with optional _ separators as in 1_000_000.
  const value = /^[0-9][0-9_]*$/.test(raw) ? Number(raw.replaceAll('_', '')) : Number.NaN;
  if (!(Number.isSafeInteger(value) && value >= min && value <= max)) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return value;
}
