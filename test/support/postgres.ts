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
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
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
  /** Runs `sql` as the superuser on `database` (default `postgres`); returns its rows as text. */
  psql(sql: string, database?: string): string;
  /** Creates a login role that must give `password` (SCRAM) to connect over TCP; others stay trusted. */
  createRoleWithPassword(role: string, password: string): void;
  /** Stops the cluster (fast shutdown: open connections are cut), keeping its files. */
  stop(): void;
  /** Starts it again on the same port. */
  start(): void;
  /** What the server logged so far. */
  log(): string;
  /** Kills the postmaster and every process it started with SIGKILL, as a crash would. */
  kill(): void;
  /** Makes a standby the primary (pg_ctl promote), and returns once it is. */
  promote(): void;
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

/** `command` with `args`, run as `nobody` when we are root (initdb and PgBouncer refuse root). */
function unprivileged(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', command, ...args]] : [command, args];
}

/** Runs a PostgreSQL binary, as `nobody` when we are root. Throws with its output on failure. */
function runBinary(name: string, args: string[]): void {
  const [file, argv] = unprivileged(join(BIN!, name), args);
  const result = spawnSync(file, argv, { encoding: 'utf8', timeout: 60_000, env: { PATH: process.env.PATH ?? '', LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8' } });
  if (result.status !== 0) throw new Error(`${name} failed (${result.status ?? result.signal}): ${result.stderr || result.stdout}`);
}

/** A folder for a cluster's files, which `nobody` may use when we are root. */
function clusterFolder(): { folder: string; data: string } {
  const folder = mkdtempSync(join(tmpdir(), 'pets-pg-'));
  if (process.getuid?.() === 0) chownSync(folder, NOBODY, NOBODY);
  return { folder, data: join(folder, 'data') };
}

/**
 * Creates and starts a cluster, with `settings` added to its configuration. Call `remove` when
 * done (test files do it in `after`).
 */
export async function startPostgres(settings: Record<string, string> = {}): Promise<PostgresCluster> {
  if (BIN === null) throw new Error(postgresSkip);
  const { folder, data } = clusterFolder();
  runBinary('initdb', ['-D', data, '-U', 'tests', '--auth=trust', '--encoding=UTF8', '--no-sync']);
  return runCluster(folder, data, settings);
}

/**
 * A streaming standby of `primary`, as an operator makes one: `pg_basebackup -R` (which writes
 * standby.signal and primary_conninfo), started with cluster_name `name`, the name the primary's
 * synchronous_standby_names knows it by, with `settings` added to its configuration.
 */
export async function startStandby(primary: PostgresCluster, name: string, settings: Record<string, string> = {}): Promise<PostgresCluster> {
  const { folder, data } = clusterFolder();
  runBinary('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'tests', '-D', data, '-R', '--checkpoint=fast', '--no-sync']);
  return runCluster(folder, data, { cluster_name: name, ...settings });
}

/** Starts the cluster in `data` on 127.0.0.1 and a free port (see startPostgres). */
async function runCluster(folder: string, data: string, settings: Record<string, string>): Promise<PostgresCluster> {
  const port = await freePort();
  // fsync off: the tests kill servers, never the machine, and it makes every commit cheap.
  // synchronous_commit stays on, so a commit acknowledged to us survives a PostgreSQL restart.
  const options = [
    `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories= -c fsync=off -c full_page_writes=off -c max_connections=200`,
    ...Object.entries(settings).map(([name, value]) => `-c ${name}=${value}`),
  ].join(' ');
  const start = () => runBinary('pg_ctl', ['-D', data, '-l', join(folder, 'log'), '-o', options, '-w', '-t', '30', 'start']);
  const stop = () => runBinary('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']);
  start();
  const url = `postgres://tests@127.0.0.1:${port}/postgres`;
  const psql = (sql: string, database = 'postgres') =>
    execFileSync(join(BIN!, 'psql'), ['-X', '-q', '-A', '-t', '-d', `postgres://tests@127.0.0.1:${port}/${database}`, '-c', sql], { encoding: 'utf8', stdio: 'pipe' });
  let databases = 0;
  let running = true;
  return {
    url,
    port,
    async createDatabase() {
      const name = `test_${process.pid}_${++databases}`;
      psql(`CREATE DATABASE ${name}`);
      return `postgres://tests@127.0.0.1:${port}/${name}`;
    },
    psql,
    createRoleWithPassword(role, password) {
      psql(`CREATE ROLE ${role} LOGIN PASSWORD '${password}'`);
      const hba = join(data, 'pg_hba.conf');
      writeFileSync(hba, `host all ${role} 127.0.0.1/32 scram-sha-256\n${readFileSync(hba, 'utf8')}`);
      psql('SELECT pg_reload_conf()');
    },
    stop() {
      stop();
      running = false;
    },
    start() {
      start();
      running = true;
    },
    log: () => readFileSync(join(folder, 'log'), 'utf8'),
    kill() {
      const postmaster = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      for (const pid of [postmaster, ...childrenOf(postmaster)]) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
      running = false;
    },
    promote() {
      runBinary('pg_ctl', ['-D', data, '-w', '-t', '30', 'promote']);
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

/** The processes whose parent is `pid`, from /proc. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc').filter((entry) => /^[0-9]+$/.test(entry)).flatMap((entry) => {
    try {
      // The parent is the field after the command's closing parenthesis and the state.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid ? [Number(entry)] : [];
    } catch {
      return [];
    }
  });
}

/**
 * A fresh, migrated database of `cluster` with a pool of `poolSize` connections, closed when the
 * test ends. Each call is a new database unless `url` names one to share (several "instances");
 * `transactionPooler` as the service has it behind PgBouncer (DATABASE_POOLER=transaction).
 */
export async function openTestDatabase(
  t: { after(fn: () => Promise<void> | void): void },
  cluster: PostgresCluster,
  options: { url?: string; poolSize?: number; transactionPooler?: boolean } = {},
): Promise<{ sql: PostgresSql; url: string }> {
  const url = options.url ?? (await cluster.createDatabase());
  const sql = await connectPostgres(url, { poolSize: options.poolSize ?? 4, transactionPooler: options.transactionPooler });
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

/**
 * Why the PgBouncer tests cannot run here, or undefined when they can (PostgreSQL too). With
 * CI=true a missing PgBouncer throws (CI installs it, see .ci/run).
 */
export const pgbouncerSkip: string | undefined = (() => {
  if (postgresSkip !== undefined) return postgresSkip;
  if (spawnSync('pgbouncer', ['--version'], { stdio: 'ignore' }).status === 0) return undefined;
  if (process.env.CI === 'true') throw new Error('CI=true but PgBouncer is not installed; .ci/run installs it');
  return 'PgBouncer is not installed: apt-get install pgbouncer to run these tests';
})();

export interface Pgbouncer {
  port: number;
  /** `databaseUrl` (a database of the cluster) as reached through PgBouncer. */
  url(databaseUrl: string): string;
  /** What PgBouncer logged so far. */
  log(): string;
  /** Stops it and removes its folder. */
  remove(): void;
}

/**
 * Starts Debian's PgBouncer in front of `cluster`, in transaction pooling mode, on 127.0.0.1 and a
 * free port. The configuration is the package's defaults except what a deployment must set: the
 * databases (every database of the cluster), where to listen, how clients authenticate (trust,
 * as the cluster does) and the pool mode. Resolves once it accepts connections.
 */
export async function startPgbouncer(cluster: PostgresCluster, settings: Record<string, string> = {}): Promise<Pgbouncer> {
  if (pgbouncerSkip !== undefined) throw new Error(pgbouncerSkip);
  const folder = mkdtempSync(join(tmpdir(), 'pets-pgbouncer-'));
  const port = await freePort();
  const config = {
    listen_addr: '127.0.0.1', listen_port: String(port), unix_socket_dir: '',
    auth_type: 'trust', auth_file: join(folder, 'userlist.txt'), pool_mode: 'transaction', ...settings,
  };
  writeFileSync(join(folder, 'userlist.txt'), '"tests" ""\n');
  writeFileSync(join(folder, 'pgbouncer.ini'), [
    '[databases]', `* = host=127.0.0.1 port=${cluster.port}`, '[pgbouncer]',
    ...Object.entries(config).map(([name, value]) => `${name} = ${value}`), '',
  ].join('\n'));
  if (process.getuid?.() === 0) chownSync(folder, NOBODY, NOBODY);
  const child: ChildProcess = spawn(...unprivileged('pgbouncer', [join(folder, 'pgbouncer.ini')]), { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr!.setEncoding('utf8').on('data', (text: string) => (log += text));
  for (let tries = 0; !(await accepts(port)); tries++) {
    if (child.exitCode !== null || tries > 100) {
      child.kill('SIGKILL');
      rmSync(folder, { recursive: true, force: true });
      throw new Error(`PgBouncer did not start: ${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    port,
    url: (databaseUrl) => {
      const url = new URL(databaseUrl);
      url.port = String(port);
      return url.toString();
    },
    log: () => log,
    remove() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * A `describe` whose tests share one cluster and one PgBouncer in front of it (transaction
 * pooling, see startPgbouncer), skipped with one line where either is not installed.
 */
export function describeWithPgbouncer(name: string, body: (cluster: () => PostgresCluster, pgbouncer: () => Pgbouncer) => void): void {
  describe(name, { skip: pgbouncerSkip }, () => {
    let cluster: PostgresCluster | undefined;
    let pgbouncer: Pgbouncer | undefined;
    before(async () => {
      cluster = await startPostgres();
      pgbouncer = await startPgbouncer(cluster);
    });
    after(() => {
      pgbouncer?.remove();
      cluster?.remove();
    });
    body(() => cluster!, () => pgbouncer!);
  });
}
