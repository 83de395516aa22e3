/**
 * PostgreSQL for `--scale-out` and `--model`: the tests' throwaway cluster (test/support/
 * postgres.ts: initdb into a temporary folder, 127.0.0.1 only, fsync off, so that a commit
 * costs the protocol and not this machine's shared disk), seeded like the SQLite file, and what
 * it did during a load:
 *
 * - CPU: the postmaster and every process it forked (backends, WAL writer, checkpointer, ...),
 *   from /proc: their user + system time, and the time of those that exited (cutime, cstime).
 * - Statements: pg_stat_statements, loaded into the cluster, counts every statement the
 *   instances run (calls), the rows of each, and its time in PostgreSQL.
 * - Commits that would wait for a WAL flush: pg_stat_wal's wal_write, the writes of the WAL to
 *   its file (every commit writes it unless a concurrent one already has; fsync off skips only
 *   the flush that follows).
 */
import { readdirSync } from 'node:fs';
import { connectPostgres, migratePostgres } from '../src/storage/postgres/database.ts';
import type { PostgresSql } from '../src/storage/postgres/driver.ts';
import { createKeysStore as createPostgresKeysStore } from '../src/storage/postgres/keys-store.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { pinProcess } from './cpu.ts';
import { readStatFields } from './processes.ts';
import { BENCH_KEY_LIMITS, STATUS_OF_N } from './seed.ts';

export interface PostgresCounters {
  /** Statements run by the service (the bench's own queries left out). */
  statements: number;
  /** Calls of take_tokens (one per batch of rate-limit takes), the takes in them, and their time in PostgreSQL. */
  takeCalls: number;
  takes: number;
  takeMs: number;
  /** WAL writes: with fsync on, each would be followed by a flush. */
  walWrites: number;
}

export interface BenchPostgres {
  /** The seeded database's URL and the bench key in it. */
  url: string;
  key: string;
  /** CPU ticks used so far by the postmaster and everything it forked. */
  ticks(): number;
  counters(): Promise<PostgresCounters>;
  /** Runs the postmaster and its processes on `cpus` (backends forked later inherit it). */
  pin(cpus: readonly number[]): void;
  remove(): Promise<void>;
}

/** Starts the cluster, loads pg_stat_statements, and seeds `pets` pets and the bench key. */
export async function startBenchPostgres(pets: number): Promise<BenchPostgres> {
  const cluster = await startPostgres();
  try {
    // pg_stat_statements must be loaded at start: set it, then restart the cluster.
    const admin = await connectPostgres(cluster.url, { poolSize: 1 });
    await admin.unsafe("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'");
    await admin.end();
    cluster.stop();
    cluster.start();
    const url = await cluster.createDatabase();
    const sql = await connectPostgres(url, { poolSize: 1 });
    await migratePostgres(sql);
    await sql.unsafe('CREATE EXTENSION pg_stat_statements');
    await sql.unsafe(`INSERT INTO pets (name, category_id, status) SELECT 'Pet ' || n, 1 + (n * 7) % 40, ${STATUS_OF_N} FROM generate_series(1, ${Number(pets)}) AS n`);
    const issued = await createPostgresKeysStore(sql, { appEnv: 'production' }).create({ plan: 'enterprise', label: 'bench', ...BENCH_KEY_LIMITS, now: Date.now() });
    // The backend serving this connection is a child of the postmaster.
    const [{ pid }] = (await sql`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
    const postmaster = Number(readStatFields(`/proc/${pid}/stat`)![1]);
    return {
      url,
      key: issued.key,
      ticks: () => postgresTicks(postmaster),
      counters: () => readCounters(sql),
      pin(cpus) {
        pinProcess(postmaster, cpus);
        for (const child of childrenOf(postmaster)) {
          try {
            pinProcess(child, cpus);
          } catch {
            // Exited meanwhile (an autovacuum worker).
          }
        }
      },
      async remove() {
        await sql.end({ timeout: 1 });
        cluster.remove();
      },
    };
  } catch (error) {
    cluster.remove();
    throw error;
  }
}

async function readCounters(sql: PostgresSql): Promise<PostgresCounters> {
  const [row] = (await sql`
    SELECT coalesce(sum(calls), 0)::float8 AS statements,
           coalesce(sum(calls) FILTER (WHERE query LIKE '%take_tokens(%'), 0)::float8 AS take_calls,
           coalesce(sum(rows) FILTER (WHERE query LIKE '%take_tokens(%'), 0)::float8 AS takes,
           coalesce(sum(total_exec_time) FILTER (WHERE query LIKE '%take_tokens(%'), 0)::float8 AS take_ms,
           (SELECT wal_write FROM pg_stat_wal)::float8 AS wal_writes
      FROM pg_stat_statements
     WHERE query NOT LIKE '%pg_stat%'`) as unknown as [Record<string, number>];
  return { statements: row!.statements!, takeCalls: row!.take_calls!, takes: row!.takes!, takeMs: row!.take_ms!, walWrites: row!.wal_writes! };
}

/** `after` less `before`, field by field. */
export function countersBetween(before: PostgresCounters, after: PostgresCounters): PostgresCounters {
  return {
    statements: after.statements - before.statements,
    takeCalls: after.takeCalls - before.takeCalls,
    takes: after.takes - before.takes,
    takeMs: after.takeMs - before.takeMs,
    walWrites: after.walWrites - before.walWrites,
  };
}

/** The postmaster's own time, that of its children that exited, and that of those alive. */
function postgresTicks(postmaster: number): number {
  const fields = readStatFields(`/proc/${postmaster}/stat`);
  if (fields === null) return Number.NaN;
  let ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  for (const child of childrenOf(postmaster)) {
    const own = readStatFields(`/proc/${child}/stat`);
    if (own !== null) ticks += Number(own[11]) + Number(own[12]);
  }
  return ticks;
}

/** The live processes whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^[0-9]+$/.test(entry) && readStatFields(`/proc/${entry}/stat`)?.[1] === String(pid))
    .map(Number);
}
