/**
 * PostgreSQL for `--scale-out`: the tests' throwaway cluster (test/support/postgres.ts: initdb
 * into a temporary folder, 127.0.0.1 only, fsync off, so that a commit costs the protocol and not
 * this machine's shared disk), seeded like the SQLite file, and the CPU it used during a load: the
 * postmaster and every process it forked (backends, WAL writer, checkpointer, ...), from /proc,
 * their user + system time and the time of those that exited (cutime, cstime).
 */
import { connectPostgres, migratePostgres } from '../src/storage/postgres/database.ts';
import { createKeysStore as createPostgresKeysStore } from '../src/storage/postgres/keys-store.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { childrenOf, pinProcess, readCpuTicks, readStatFields } from './cpu.ts';
import { BENCH_KEY_LIMITS, STATUS_OF_N } from './seed.ts';

export interface BenchPostgres {
  /** The seeded database's URL and the bench key in it. */
  url: string;
  key: string;
  /** CPU ticks used so far by the postmaster and everything it forked. */
  ticks(): number;
  /** Runs the postmaster and its processes on `cpus` (backends forked later inherit it). */
  pin(cpus: readonly number[]): void;
  remove(): Promise<void>;
}

/** Starts the cluster and seeds `pets` pets and the bench key. */
export async function startBenchPostgres(pets: number): Promise<BenchPostgres> {
  const cluster = await startPostgres();
  try {
    const url = await cluster.createDatabase();
    const sql = await connectPostgres(url, { poolSize: 1 });
    await migratePostgres(sql);
    await sql.unsafe(`INSERT INTO pets (name, category_id, status) SELECT 'Pet ' || n, 1 + (n * 7) % 40, ${STATUS_OF_N} FROM generate_series(1, ${Number(pets)}) AS n`);
    const issued = await createPostgresKeysStore(sql, { appEnv: 'production' }).create({ plan: 'enterprise', label: 'bench', ...BENCH_KEY_LIMITS, now: Date.now() });
    // The backend serving this connection is a child of the postmaster.
    const [{ pid }] = (await sql`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
    const postmaster = Number(readStatFields(`/proc/${pid}/stat`)![1]);
    return {
      url,
      key: issued.key,
      ticks: () => postgresTicks(postmaster),
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

/** The postmaster's own time, that of its children that exited, and that of those alive. */
function postgresTicks(postmaster: number): number {
  const fields = readStatFields(`/proc/${postmaster}/stat`);
  if (fields === null) return Number.NaN;
  let ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
  // NaN: gone meanwhile.
  for (const child of childrenOf(postmaster)) ticks += readCpuTicks(child) || 0;
  return ticks;
}
