/**
 * `npm run --silent backup -- FILE`: a consistent copy of the server's SQLite database, taken while
 * the server runs, read with the same environment variables as the server (`APP_ENV`,
 * `DATABASE_PATH`).
 *
 * Exit codes as the keys command: 0 done, 1 the backup could not be made (FILE exists, no
 * database, a bad environment variable, a database or file error), 2 bad arguments, and also
 * when `DATABASE_URL` is set: this command copies SQLite files only. Every error is one line
 * on stderr; success is one line on stdout.
 */
import { existsSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { ConfigError, loadConfig } from '../config.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type Output } from './exit-codes.ts';
import { BackupExistsError, backupDatabase } from '../ops/backup.ts';

export const USAGE = `Usage: npm run --silent backup -- FILE

Writes a consistent copy of the SQLite database (DATABASE_PATH, default data/<APP_ENV>.db) to
FILE while the server keeps running. FILE must not exist. Set the same APP_ENV and DATABASE_PATH
as the server. To restore: stop the server, replace the database file with the copy (and remove
its -wal and -shm files), start the server.

Exit codes: 0 done, 1 failed (FILE exists, no database, bad environment variable), 2 bad arguments.
`;

/** How long to wait for a lock on the live database (only while SQLite recovers a WAL). */
const BUSY_TIMEOUT_MS = 5_000;

export interface BackupCliIo {
  stdout: Output;
  stderr: Output;
}

/** Bad arguments: exit code 2. */
class UsageError extends Error {}

/**
 * What `file` is to the live database at `databasePath` when it is one of that database's own
 * names (the database, its `-journal`, `-wal` or `-shm`, or a super-journal `-mjXXXXXXXX`), or
 * null. Compared in the real folder, so `./data/../data/x.db-journal` is caught too. A copy named
 * `<DATABASE_PATH>-journal` was taken by SQLite for a hot journal: `keys revoke` then failed
 * with "database is locked", and the next start deleted it.
 */
function liveFileName(databasePath: string, file: string): string | null {
  const real = (path: string) => {
    try {
      return `${realpathSync(dirname(resolve(path)))}/${basename(path)}`;
    } catch {
      return resolve(path);
    }
  };
  const live = real(databasePath);
  const target = real(file);
  if (target === live) return 'the live database itself';
  if (!target.startsWith(`${live}-`)) return null;
  const suffix = target.slice(live.length);
  if (['-journal', '-wal', '-shm'].includes(suffix)) return `the live database's ${suffix} file`;
  if (/^-mj[0-9A-Fa-f]{8}$/.test(suffix)) return "a super-journal name of the live database";
  return null;
}

/** The FILE argument, or 'help'. Throws UsageError. */
function parseArgs(argv: readonly string[]): { file: string } | 'help' {
  const words = [...argv];
  if (words.length === 1 && ['help', '--help', '-h'].includes(words[0]!)) return 'help';
  const separator = words.indexOf('--');
  const options = separator === -1 ? words : words.slice(0, separator);
  const option = options.find((word) => word.startsWith('-') && word !== '-');
  if (option !== undefined) throw new UsageError(`unknown option ${JSON.stringify(option)}; the only argument is FILE`);
  const files = separator === -1 ? words : [...options, ...words.slice(separator + 1)];
  if (files.length === 0) throw new UsageError('missing FILE: the path to write the copy to');
  if (files.length > 1) throw new UsageError(`one FILE only, got ${files.length} arguments`);
  if (files[0] === '') throw new UsageError('FILE is empty');
  return { file: files[0]! };
}

/** The whole command line: arguments, then the environment, then the copy. Returns the exit code. */
export async function runBackupCli(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: BackupCliIo): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.stderr.write(`backup: ${error.message}\n`);
    return EXIT_USAGE;
  }
  if (parsed === 'help') {
    io.stdout.write(USAGE);
    return EXIT_OK;
  }
  if ((env.DATABASE_URL ?? '') !== '') {
    io.stderr.write('backup: DATABASE_URL is set, and this command copies SQLite databases only; back up PostgreSQL with pg_dump\n');
    return EXIT_USAGE;
  }
  let source: DatabaseSync | undefined;
  try {
    const { databasePath } = loadConfig(env);
    if (databasePath === ':memory:') throw new ConfigError('DATABASE_PATH', 'DATABASE_PATH is ":memory:": there is no file to back up');
    // Checked before opening: opening would create an empty database where none was.
    if (!existsSync(databasePath)) throw new Error(`no database at ${databasePath} (DATABASE_PATH); set the server's APP_ENV and DATABASE_PATH`);
    const { file } = parsed;
    if (existsSync(file)) throw new BackupExistsError(file);
    const family = liveFileName(databasePath, file);
    if (family !== null) throw new Error(`${file} is ${family}: SQLite would take a copy there for part of the live database; choose a name of its own`);
    if (!statSync(dirname(file), { throwIfNoEntry: false })?.isDirectory()) throw new Error(`the folder of ${file} does not exist`);
    source = new DatabaseSync(databasePath, { readOnly: true });
    source.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    const pages = await backupDatabase(source, file, { scratchIn: dirname(resolve(databasePath)) });
    io.stdout.write(`Backed up ${databasePath} to ${file} (${pages} pages)\n`);
    return EXIT_OK;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    io.stderr.write(`backup: ${message.split('\n')[0]}\n`);
    return EXIT_FAILURE;
  } finally {
    source?.close();
  }
}

if (import.meta.main) {
  process.exitCode = await runBackupCli(process.argv.slice(2), process.env, { stdout: process.stdout, stderr: process.stderr });
}
