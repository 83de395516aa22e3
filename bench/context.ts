/**
 * What every part of one `npm run bench` shares: its options, wrk, its temporary folder, the
 * seeded SQLite file, the servers it started (so that an interrupted run kills them), and the
 * service's environment as the bench starts it.
 */
import type { BenchOptions } from './options.ts';
import type { ServerProcess } from './processes.ts';

export interface BenchContext {
  options: BenchOptions;
  /** wrk's path. */
  wrk: string;
  /** The CPUs this process may use, read once at the start (pinning it narrows them later). */
  cpus: number[];
  /** Removed at the end of the run. */
  workDir: string;
  /** The cgroup of `--cpu-quota` the servers run in, or null. */
  cpuGroup: string | null;
  database: { path: string; key: string; seedMs: number; deepSoldAfterId: number };
  /** Every server running now; the run kills them when it is interrupted. */
  children: ServerProcess[];
  /** Waits before a measurement until other processes are quiet, within the run's allowance (measure.ts). */
  quiet(ownPids: readonly number[]): Promise<void>;
  progress(text: string): void;
}

/**
 * The service's environment: production settings, access log on, 127.0.0.1 and any free port,
 * and `extra` (the database, WORKERS). Every load connection comes from 127.0.0.1, which the
 * per-address cap (64 by default) would refuse past 64: it is raised just enough for the
 * connections plus the bench's own checks, so that the default run measures the production
 * setting.
 */
export function serviceEnv(context: BenchContext, connections: number, extra: Record<string, string>): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    // Node's compile cache, as `npm start` has it (src/start.js), in a folder of this run's own.
    NODE_COMPILE_CACHE: `${context.workDir}/compile-cache`,
    APP_ENV: 'production',
    HOST: '127.0.0.1',
    PORT: '0',
    LOG_LEVEL: 'info',
    MAX_CONNECTIONS_PER_ADDRESS: String(Math.min(1024, Math.max(64, connections + 8))),
    ...(context.options.metrics ? { METRICS_PORT: '0' } : {}),
    ...extra,
  };
}
