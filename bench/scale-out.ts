/**
 * `npm run bench:scale-out`: the service on SQLite (one instance) next to the service on
 * PostgreSQL (one instance, then three on one database), in one run, on 127.0.0.1 only, and the
 * cost of the exact shared limiter per request.
 *
 * 1. Starts a throwaway PostgreSQL cluster (test/support/postgres.ts: fsync off, so creates
 *    measure the service and the protocol, not this machine's disk) and seeds both engines with
 *    the same pets and an enterprise key whose limits never bind.
 * 2. For each configuration starts real `src/main.ts` processes (APP_ENV=production, access log
 *    on and drained) and runs each workload of bench/workloads.ts for --seconds, its connections
 *    split evenly over the instances, one wrk each; requests/s are summed, latencies merged.
 * 3. Measures the limiter alone in this process: the in-memory `take`, and the PostgreSQL
 *    `take` one at a time (a round trip each) and 50 at once (batched per event-loop turn).
 *
 * Short by default (a smoke run); the full figures come from a quiet machine.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { createLimiter } from '../src/limits/limiter.ts';
import { connectPostgres, migratePostgres } from '../src/storage/postgres/database.ts';
import { createPostgresKeysStore } from '../src/storage/postgres/keys-store.ts';
import { createPostgresLimiter } from '../src/storage/postgres/limiter.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { findExecutable } from './cpu.ts';
import { runLoad } from './measure.ts';
import { BENCH_KEY_LIMITS, seedDatabase } from './seed.ts';
import { buildWorkloads, type Workload, type WorkloadName } from './workloads.ts';

const ROOT = resolve(import.meta.dirname, '..');
const WORKLOADS: readonly WorkloadName[] = ['list20', 'get', 'create', 'mix'];

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '48' },
    pets: { type: 'string', default: '10000' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write('Usage: npm run bench:scale-out -- [--seconds S (3)] [--connections C (48)] [--pets N (10000)]\n');
  process.exit(0);
}
const seconds = Number(values.seconds);
const connections = Number(values.connections);
const pets = Number(values.pets);
for (const [name, value] of [['--seconds', seconds], ['--connections', connections], ['--pets', pets]] as const) {
  if (!Number.isSafeInteger(value) || value < 1) {
    process.stderr.write(`${name} must be a positive integer\n`);
    process.exit(2);
  }
}

const progress = (text: string) => process.stderr.write(`${text}\n`);
const children: ChildProcess[] = [];
const workDir = mkdtempSync(join(tmpdir(), 'pets-scale-bench-'));
const cluster = await startPostgres();
const cleanUp = () => {
  for (const child of children) child.kill('SIGKILL');
  cluster.remove();
  rmSync(workDir, { recursive: true, force: true });
};
process.on('SIGINT', () => {
  cleanUp();
  process.exit(130);
});

/** Starts `src/main.ts` with `env`; resolves with its URL once it listens. Its log is drained. */
async function startInstance(env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, ['src/main.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', APP_ENV: 'production', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error('an instance did not start within 15 s')), 15_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const match = /"event":"listening","url":"([^"]+)"/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolveUrl(match[1]!);
      }
    });
  });
}

async function stopAll(): Promise<void> {
  await Promise.all(children.splice(0).map((child) => new Promise((done) => {
    child.once('exit', done);
    child.kill('SIGTERM');
  })));
}

interface Figures {
  rps: number;
  p99: number;
  non2xx: number;
}

const wrk = findExecutable('wrk') ?? (() => {
  process.stderr.write('npm run bench:scale-out needs wrk, the load generator: sudo apt-get install wrk\n');
  process.exit(1);
})();

/** One workload against every URL at once (one wrk each), connections split evenly. */
async function measure(urls: string[], authorization: string, workload: Workload): Promise<Figures> {
  const result = await runLoad({ urls, pids: [] }, workload, { wrk, pinning: null, seconds, connections: Math.ceil(connections / urls.length), authorization });
  return { rps: result.rps, p99: result.latencyMs.p99, non2xx: result.non2xx };
}

// 1. Seeds.
const sqlitePath = join(workDir, 'pets.db');
const seeded = seedDatabase(sqlitePath, pets);
const pgUrl = await cluster.createDatabase();
const sql = await connectPostgres(pgUrl, { poolSize: 4 });
await migratePostgres(sql);
await sql`INSERT INTO pets (name, category_id, status)
          SELECT 'Pet ' || n, 1 + (n * 7) % 40, CASE n % 3 WHEN 0 THEN 'sold' WHEN 1 THEN 'available' ELSE 'pending' END
            FROM generate_series(1, ${pets}) AS n`;
const pgKey = (await createPostgresKeysStore(sql, { appEnv: 'production' }).create({ plan: 'enterprise', label: 'bench', ...BENCH_KEY_LIMITS, now: Date.now() })).key;

// 2. The configurations.
const configurations: { name: string; instances: number; env: Record<string, string>; key: string }[] = [
  { name: 'SQLite, 1 instance', instances: 1, env: { DATABASE_PATH: sqlitePath }, key: seeded.key },
  { name: 'PostgreSQL, 1 instance', instances: 1, env: { DATABASE_URL: pgUrl }, key: pgKey },
  { name: 'PostgreSQL, 3 instances', instances: 3, env: { DATABASE_URL: pgUrl }, key: pgKey },
];
const table: string[][] = [];
for (const configuration of configurations) {
  const urls = await Promise.all(Array.from({ length: configuration.instances }, () => startInstance(configuration.env)));
  const workloads = buildWorkloads({ pets, deepSoldAfterId: 0 }, WORKLOADS);
  for (const workload of workloads) {
    await measure(urls, `Bearer ${configuration.key}`, workload); // warm-up: discarded
    const figures = await measure(urls, `Bearer ${configuration.key}`, workload);
    progress(`${configuration.name}, ${workload.name}: ${Math.round(figures.rps)} req/s, p99 ${figures.p99.toFixed(2)} ms${figures.non2xx ? `, ${figures.non2xx} non-2xx` : ''}`);
    table.push([configuration.name, workload.label, String(Math.round(figures.rps)), figures.p99.toFixed(2)]);
  }
  await stopAll();
}

// 3. The limiter alone.
const clock = () => Date.now();
const memory = createLimiter({ clock, banThreshold: 30, banSeconds: 900 });
const limits = { perMinute: 10_000_000, perDay: 100_000_000 };
let started = performance.now();
for (let i = 0; i < 200_000; i++) memory.take('key:bench', limits);
const memoryUs = ((performance.now() - started) * 1000) / 200_000;
const shared = createPostgresLimiter({ sql, clock, banThreshold: 30, banSeconds: 900 });
started = performance.now();
for (let i = 0; i < 2_000; i++) await shared.take('key:bench', limits);
const sequentialUs = ((performance.now() - started) * 1000) / 2_000;
started = performance.now();
await Promise.all(Array.from({ length: 50 }, async (_, caller) => {
  for (let i = 0; i < 400; i++) await shared.take(`key:bench-${caller % 10}`, limits);
}));
const batchedUs = ((performance.now() - started) * 1000) / 20_000;
await sql.end();
cleanUp();

const widths = [24, 34, 8, 8];
const row = (cells: string[]) => cells.map((cell, i) => (i >= 2 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ');
process.stdout.write(`\n${row(['configuration', 'workload', 'req/s', 'p99 ms'])}\n${row(widths.map((w) => '-'.repeat(w)))}\n`);
for (const cells of table) process.stdout.write(`${row(cells)}\n`);
process.stdout.write(`\nLimiter, per take: in memory ${memoryUs.toFixed(2)} us; PostgreSQL one at a time ${sequentialUs.toFixed(0)} us (a round trip);` +
  ` PostgreSQL 50 at once ${batchedUs.toFixed(1)} us (batched per turn, 10 callers)\n`);
process.stdout.write(`Load: wrk (one per instance), ${connections} connections split over the instances, ${seconds} s per workload after a ${seconds} s warm-up; ${pets} pets\n`);
