/**
 * `npm run bench:cores` (issue #12, item 3): throughput of the service against the number of
 * cores it uses. For each worker count (`WORKERS`: 1 is the plain single process) it starts the
 * real service on a seeded file database, pinned to that many cores, and drives the list, get,
 * create and mix workloads of bench/workloads.ts with wrk on the cores left over.
 *
 * It prints how many cores the machine has and where the server and the generator ran. When
 * the server takes every core, wrk shares them: the output says so on every such row, since
 * those figures then measure the server and its load generator together.
 *
 * Short by default (a smoke run); the figures worth quoting come from a quiet machine with more
 * cores than workers.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus as machineCpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { allowedCpus, findExecutable, type Pinning } from './cpu.ts';
import { runLoad, type LoadResult } from './measure.ts';
import { startServer, type ServerProcess } from './processes.ts';
import { startCommand } from './start-command.ts';
import { seedDatabase } from './seed.ts';
import { buildWorkloads, WORKLOAD_NAMES, type WorkloadName } from './workloads.ts';

const ROOT = resolve(import.meta.dirname, '..');
const DEFAULT_WORKLOADS: readonly WorkloadName[] = ['list20', 'get', 'create', 'mix'];

const USAGE = `Usage: npm run bench:cores -- [options]

  --workers L      worker counts to measure, e.g. 1,2,4 (default: 1, 2 and the cores this
                   process may use)
  --seconds S      measured seconds per workload and worker count (default 5)
  --warmup S       warm-up seconds before each (default 2)
  --connections C  concurrent connections (default 64)
  --pets N         pets in the database (default 10000)
  --only A,B       workloads among ${WORKLOAD_NAMES.join(', ')} (default ${DEFAULT_WORKLOADS.join(',')})
  --no-pin         run the server and wrk on any core
  --help           this text
`;

const { values } = parseArgs({
  strict: true,
  options: {
    workers: { type: 'string' },
    seconds: { type: 'string', default: '5' },
    warmup: { type: 'string', default: '2' },
    connections: { type: 'string', default: '64' },
    pets: { type: 'string', default: '10000' },
    only: { type: 'string' },
    'no-pin': { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const positive = (name: string, raw: string) => {
  const value = /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1) {
    process.stderr.write(`${name} must be a positive integer, got ${JSON.stringify(raw)}\n\n${USAGE}`);
    process.exit(2);
  }
  return value;
};
const allowed = allowedCpus();
const workerCounts = values.workers === undefined
  ? [...new Set([1, 2, allowed.length])].sort((a, b) => a - b)
  : values.workers.split(',').map((raw) => positive('--workers', raw));
const seconds = positive('--seconds', values.seconds);
const warmup = positive('--warmup', values.warmup);
const connections = positive('--connections', values.connections);
const pets = positive('--pets', values.pets);
const names = (values.only?.split(',') ?? DEFAULT_WORKLOADS) as WorkloadName[];
const unknown = names.filter((name) => !WORKLOAD_NAMES.includes(name));
if (unknown.length > 0) {
  process.stderr.write(`--only: unknown workload ${unknown.join(', ')}\n\n${USAGE}`);
  process.exit(2);
}
const pin = !values['no-pin'] && findExecutable('taskset') !== null;
const wrk = findExecutable('wrk');
const progress = (text: string) => process.stderr.write(`${text}\n`);
if (wrk === null) {
  process.stderr.write('npm run bench:cores needs wrk, the load generator: sudo apt-get install wrk\n');
  process.exit(1);
}

/**
 * The server's cores and wrk's for `workers` workers: the server on the first `workers` CPUs this
 * process may use, wrk on the rest; when none is left, wrk shares the server's (and says so).
 */
function pinningFor(workers: number): { pinning: Pinning | null; note: string; shared: boolean } {
  if (!pin) return { pinning: null, note: 'not pinned', shared: true };
  const server = allowed.slice(0, Math.min(workers, allowed.length));
  const rest = allowed.slice(server.length);
  if (rest.length > 0) return { pinning: { server, generator: rest }, note: `server on CPU ${server.join(',')}, wrk on CPU ${rest.join(',')}`, shared: false };
  return {
    pinning: { server, generator: server },
    note: `server on CPU ${server.join(',')}, wrk SHARES them (no core left for it${workers > allowed.length ? `; ${workers} workers on ${allowed.length} cores` : ''})`,
    shared: true,
  };
}

const workDir = mkdtempSync(join(tmpdir(), 'pets-cores-bench-'));
let service: ServerProcess | null = null;
process.on('SIGINT', () => {
  if (service !== null) process.kill(service.pid, 'SIGKILL');
  rmSync(workDir, { recursive: true, force: true });
  process.exit(130);
});

const path = join(workDir, 'pets.db');
const seeded = seedDatabase(path, pets);
const authorization = `Bearer ${seeded.key}`;
const workloads = buildWorkloads({ pets, deepSoldAfterId: 0 }, names);

interface Row {
  workers: number;
  workload: string;
  result: LoadResult;
  shared: boolean;
}
const rows: Row[] = [];
const notes: string[] = [];
const npmStart = startCommand(ROOT);
for (const workers of workerCounts) {
  const { pinning, note, shared } = pinningFor(workers);
  notes.push(`WORKERS=${workers}: ${note}`);
  progress(`WORKERS=${workers}: ${note}`);
  service = await startServer({
    name: 'service',
    // As `npm start` runs it: its node options and src/start.js (the compile cache, for the workers too).
    args: [...npmStart.nodeOptions, npmStart.entry],
    env: {
      PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', APP_ENV: 'production', LOG_LEVEL: 'info', DATABASE_PATH: path,
      WORKERS: String(workers), MAX_CONNECTIONS_PER_ADDRESS: String(Math.min(1024, Math.max(64, connections + 8))),
    },
    timeoutMs: 30_000,
    cpus: pinning?.server ?? null,
  });
  for (const workload of workloads) {
    const setup = { wrk, pinning, connections, authorization };
    const target = { urls: [service.url], pids: [service.pid] };
    await runLoad(target, workload, { ...setup, seconds: warmup });
    const result = await runLoad(target, workload, { ...setup, seconds });
    rows.push({ workers, workload: workload.label, result, shared });
    progress(`  ${workload.name}: ${Math.round(result.rps)} req/s, p99 ${result.latencyMs.p99.toFixed(2)} ms, server ${result.cpu.server.toFixed(2)} cores${result.non2xx ? `, ${result.non2xx} non-2xx` : ''}`);
  }
  const code = await service.stop();
  if (code !== 0) progress(`  the service exited with code ${code}: ${service.stderrTail()}`);
  service = null;
}
rmSync(workDir, { recursive: true, force: true });

const cpuModel = machineCpus()[0]?.model ?? 'unknown CPU';
const out: string[] = [];
out.push('', `Machine: ${availableParallelism()} cores available to Node (${allowed.length} allowed to this process: CPU ${allowed.join(',')}), ${cpuModel}`);
out.push(`Load: wrk, ${connections} connections, ${seconds} s per workload after ${warmup} s of warm-up; ${pets} pets`);
for (const note of notes) out.push(`Pinning, ${note}`);
out.push('');
const header = ['workload', 'workers', 'req/s', 'x 1 worker', 'p99 ms', 'server cores', 'wrk core busy', 'other load', 'note'];
const table = rows.map((row) => {
  const single = rows.find((other) => other.workload === row.workload && other.workers === 1);
  const busy = row.result.cpu.generatorCore;
  return [
    row.workload, String(row.workers), String(Math.round(row.result.rps)),
    single === undefined ? '-' : (row.result.rps / single.result.rps).toFixed(2),
    row.result.latencyMs.p99.toFixed(2), row.result.cpu.server.toFixed(2),
    busy === null ? '-' : `${Math.round(busy * 100)} %`,
    row.result.cpu.other.toFixed(2),
    [row.shared ? 'wrk shares the server\'s cores' : '', row.result.non2xx ? `${row.result.non2xx} non-2xx` : ''].filter(Boolean).join('; '),
  ];
});
const widths = header.map((title, i) => Math.max(title.length, ...table.map((cells) => cells[i]!.length)));
const line = (cells: string[]) => cells.map((cell, i) => (i >= 1 && i <= 7 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ').trimEnd();
out.push(line(header), line(widths.map((width) => '-'.repeat(width))), ...table.map(line), '');
out.push('server cores: CPU the whole service process used (all its threads), in cores; wrk core busy: the busiest of');
out.push('wrk\'s cores, whatever ran on it (over 90 %: wrk may have been the limit); other load: cores used by other');
out.push('processes meanwhile (noise, when not near 0).', '');
process.stdout.write(`${out.join('\n')}\n`);
