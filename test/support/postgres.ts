/**
 * A throwaway PostgreSQL cluster for tests, from Debian's `postgresql` binaries: `initdb` into a
 * temporary folder (as `nobody` when the tests run as root, since initdb refuses root), `pg_ctl`
 * on 127.0.0.1 and a free port, no Unix socket, removed when the test file ends.
 *
 * One cluster per test file (starting one takes about a second); each test takes its own database
 * from it with `createDatabase`, so tests do not see each other's rows.
 *
 * Without PostgreSQL installed, `postgresSkip` is the one line to skip with; with CI=true a missing
 * PostgreSQL is a failure instead (CI installs it, see .ci/run), so CI never skips these tests.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { connectPostgres, migratePostgres } from '../../src/storage/postgres/database.ts';
import type { PostgresSql } from '../../src/storage/postgres/driver.ts';

const NOBODY = 65534;

/** The newest installed PostgreSQL's bin folder, or null. */
function findBinaries(): string | null {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return null;
  const versions = readdirSync(root)
    .filter((name) => existsSync(join(root, name, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions.length === 0 ? null : join(root, versions[0]!, 'bin');
}

const BIN = findBinaries();

/**
 * The reason to skip PostgreSQL tests on this machine, or undefined when they can run. With
 * CI=true a missing PostgreSQL throws: CI must run these tests, never skip them.
 */
export const postgresSkip: string | undefined = (() => {
  if (BIN !== null) return undefined;
  if (process.env.CI === 'true') throw new Error('CI=true but PostgreSQL is not installed (/usr/lib/postgresql/*/bin/initdb); .ci/run installs it');
  return 'PostgreSQL is not installed: apt-get install postgresql to run these tests';
})();

export interface PostgresCluster {
  /** `postgres://` URL of the `postgres` database, as the superuser `tests`. */
  url: string;
  port: number;
  /** Creates an empty database and returns its URL. */
  createDatabase(): Promise<string>;
  /** Stops the cluster (fast shutdown: open connections are cut), keeping its files. */
  stop(): void;
  /** Starts it again on the same port. */
  start(): void;
  /** Stops it and removes its folder. */
  remove(): void;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Runs a PostgreSQL binary, as `nobody` when we are root. Throws with its output on failure. */
function runBinary(name: string, args: string[]): void {
  const command = join(BIN!, name);
  const asRoot = process.getuid?.() === 0;
  const [file, argv] = asRoot ? ['setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', command, ...args]] : [command, args];
  const result = spawnSync(file, argv, { encoding: 'utf8', timeout: 60_000, env: { PATH: process.env.PATH ?? '', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' } });
  if (result.status !== 0) throw new Error(`${name} failed (${result.status ?? result.signal}): ${result.stderr || result.stdout}`);
}

/** Creates and starts a cluster. Call `remove` when done (test files do it in `after`). */
export async function startPostgres(): Promise<PostgresCluster> {
  if (BIN === null) throw new Error(postgresSkip);
  const folder = mkdtempSync(join(tmpdir(), 'pets-pg-'));
  const data = join(folder, 'data');
  if (process.getuid?.() === 0) chownSync(folder, NOBODY, NOBODY);
  runBinary('initdb', ['-D', data, '-U', 'tests', '--auth=trust', '--encoding=UTF8', '--no-sync']);
  const port = await freePort();
  // fsync off: the tests kill servers, never the machine, and it makes every commit cheap.
  // synchronous_commit stays on, so a commit acknowledged to us survives a PostgreSQL restart.
  const options = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories= -c fsync=off -c full_page_writes=off -c max_connections=200`;
  const start = () => runBinary('pg_ctl', ['-D', data, '-l', join(folder, 'log'), '-o', options, '-w', '-t', '30', 'start']);
  const stop = () => runBinary('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
  start();
  const url = `postgres://tests@127.0.0.1:${port}/postgres`;
  let databases = 0;
  let running = true;
  return {
    url,
    port,
    async createDatabase() {
      const name = `test_${process.pid}_${++databases}`;
      execFileSync(join(BIN, 'psql'), ['-X', '-q', '-d', url, '-c', `CREATE DATABASE ${name}`], { stdio: 'pipe' });
      return `postgres://tests@127.0.0.1:${port}/${name}`;
    },
    stop() {
      stop();
      running = false;
    },
    start() {
      start();
      running = true;
    },
    remove() {
      try {
        if (running) runBinary('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(folder, { recursive: true, force: true });
      }
    },
  };
}

/**
 * A fresh, migrated database of `cluster` with a pool of `poolSize` connections, closed when the
 * test ends. Each call is a new database unless `url` names one to share (several "instances").
 */
export async function openTestDatabase(
  t: { after(fn: () => Promise<void> | void): void },
  cluster: PostgresCluster,
  options: { url?: string; poolSize?: number } = {},
): Promise<{ sql: PostgresSql; url: string }> {
  const url = options.url ?? (await cluster.createDatabase());
  const sql = await connectPostgres(url, { poolSize: options.poolSize ?? 4 });
  t.after(() => sql.end({ timeout: 1 }));
  await migratePostgres(sql);
  return { sql, url };
}

/**
 * A `describe` whose tests share one cluster (started before them, removed after), skipped with
 * one line where PostgreSQL is not installed. `cluster()` is the running cluster, inside tests.
 */
export function describeWithPostgres(name: string, body: (cluster: () => PostgresCluster) => void): void {
  describe(name, { skip: postgresSkip }, () => {
    let cluster: PostgresCluster | undefined;
    before(async () => {
      cluster = await startPostgres();
    });
    after(() => cluster?.remove());
    body(() => cluster!);
  });
}
