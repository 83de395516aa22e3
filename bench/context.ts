/**
 * What every part of one `npm run bench` shares: its options, its temporary folder, the seeded
 * SQLite file, the servers it started (so that an interrupted run kills them), and the service's
 * command line and environment as the bench starts it.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { BenchOptions } from './options.ts';
import { startServer, type ServerProcess, type StartOptions } from './processes.ts';

export interface BenchContext {
  options: BenchOptions;
  /** The CPUs this process may use, read once at the start (pinning it narrows them later). */
  cpus: number[];
  /** Removed at the end of the run. */
  workDir: string;
  /** The cgroup of `--cpu-quota` the servers run in, or null. */
  cpuGroup: string | null;
  /** The seeded SQLite file, and the bench key in it. */
  database: { path: string; key: string };
  /** Every server running now; the run kills them when it is interrupted. */
  children: ServerProcess[];
  /** Waits before a measurement until other processes are quiet, within the run's allowance (measure.ts). */
  quiet(ownPids: readonly number[]): Promise<void>;
  progress(text: string): void;
}

/**
 * The service's environment: production settings, access log on, 127.0.0.1 and any free port,
 * and `extra` (the database, WORKERS). The per-address cap (64 by default) would refuse the load's
 * connections past 64, all from 127.0.0.1: it is raised just enough for them and the bench's own
 * checks, so that the default run (50 connections) measures the production setting.
 */
export function serviceEnv(workDir: string, connections: number, extra: Record<string, string>): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    // Node's compile cache, as `npm start` has it (src/start.js), in a folder of this run's own.
    NODE_COMPILE_CACHE: `${workDir}/compile-cache`,
    APP_ENV: 'production', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info',
    MAX_CONNECTIONS_PER_ADDRESS: String(Math.min(1024, Math.max(64, connections + 8))),
    ...extra,
  };
}

/** Starts a server (startServer) in the run's cgroup; the run kills it if interrupted. */
export async function startChild(context: BenchContext, options: Omit<StartOptions, 'cpuGroup'>): Promise<ServerProcess> {
  const server = await startServer({ ...options, cpuGroup: context.cpuGroup });
  context.children.push(server);
  return server;
}

/** Starts the service as `npm start` starts it, with `extra` in its environment (the database, WORKERS), on `cpus` when pinned. */
export function startService(context: BenchContext, connections: number, extra: Record<string, string>, cpus: readonly number[] | null): Promise<ServerProcess> {
  const { nodeOptions, entry } = startCommand(resolve(import.meta.dirname, '..'));
  return startChild(context, { name: 'service', args: [...nodeOptions, entry], env: serviceEnv(context.workDir, connections, extra), timeoutMs: 30_000, cpus });
}

/** Stops a server the run started; resolves with its exit code. */
export async function stopServer(context: Pick<BenchContext, 'children'>, server: ServerProcess): Promise<number | null> {
  const code = await server.stop();
  context.children.splice(context.children.indexOf(server), 1);
  return code;
}

/**
 * The node options and the script of a `[exec] node [options] script` command, the script
 * relative. Nothing else is accepted (`exec` makes npm's shell become node, so that npm's SIGTERM
 * reaches the server): a start script the bench cannot copy exactly stops it rather than
 * measuring something else.
 */
export function parseStartScript(script: string): { nodeOptions: string[]; entry: string } {
  const words = script.trim().replace(/^exec\s+/, '').split(/\s+/);
  const entry = words.at(-1);
  if (words[0] !== 'node' || words.length < 2 || entry === undefined || entry.startsWith('-') || /["'$`&|;<>\\]/.test(script)) {
    throw new Error(`the start script is not of the form "[exec] node [options] script": ${script}`);
  }
  const nodeOptions = words.slice(1, -1);
  if (nodeOptions.some((option) => !option.startsWith('--'))) throw new Error(`the start script has arguments other than node options: ${script}`);
  return { nodeOptions, entry };
}

/**
 * `npm start`'s node options and its entry as an absolute path, from ROOT/package.json: the bench
 * measures exactly that, the entry (src/start.js, with its compile cache) and the node options
 * set for the service (--max-semi-space-size, see docs/decisions/0007-semi-space-cap.md).
 */
export function startCommand(root: string): { nodeOptions: string[]; entry: string } {
  const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const { nodeOptions, entry } = parseStartScript(scripts.start ?? '');
  return { nodeOptions, entry: join(root, entry) };
}
