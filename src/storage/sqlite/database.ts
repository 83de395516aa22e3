/**
 * Opening the SQLite database, bringing its schema up to date (migrations.ts), transactions, and
 * closing it.
 */
import { DatabaseSync } from 'node:sqlite';
import { closeDataVersion } from './data-version.ts';
import { MIGRATIONS } from './migrations.ts';
import { createPrivateFile, makeOwnFolderPrivate, widerPermissions } from './private-files.ts';

const { dirname } = process.getBuiltinModule('node:path');

export interface OpenOptions {
  /** Milliseconds to wait for another connection's write lock before failing with SQLITE_BUSY. */
  busyTimeoutMs?: number;
}

/**
 * Opens (creating if needed) the database at `path` (`:memory:` allowed) and migrates it. A new
 * file and its folder are private to the account that runs the service (`createPrivateFile`).
 * WAL with `synchronous=FULL`: a committed transaction is on disk before the commit returns,
 * which is what lets a 201 promise durability.
 */
export function openDatabase(path: string, options: OpenOptions = {}): DatabaseSync {
  if (path !== ':memory:') createPrivateFile(path);
  const db = new DatabaseSync(path);
  db.exec(`PRAGMA busy_timeout = ${Math.trunc(options.busyTimeoutMs ?? 5000)}`);
  if (path !== ':memory:') db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = FULL');
  db.exec('PRAGMA foreign_keys = ON');
  migrate(db);
  return db;
}

/**
 * The server's connection to its file (the single process's, and with WORKERS each thread's).
 * node:sqlite is synchronous: waiting on another connection's write lock blocks every request,
 * so the server waits briefly (250 ms) and answers 503 rather than freezing (the keys command's
 * writes take ms). A new folder and file are created private (0700, 0600); existing ones are
 * left as they are, with one warning through `log` if other accounts can read them, except the
 * default data/ folder (`ownFolder`), which is made private.
 */
export function openServerDatabase(path: string, log: (fields: Record<string, unknown>) => void, { ownFolder = false }: { ownFolder?: boolean } = {}): DatabaseSync {
  // The default data/ folder is the service's own: made private rather than warned about.
  if (ownFolder && path !== ':memory:' && makeOwnFolderPrivate(dirname(path))) {
    log({ level: 'info', event: 'database_folder_made_private', folder: dirname(path) });
  }
  const db = openDatabase(path, { busyTimeoutMs: 250 });
  const exposed = widerPermissions(path);
  if (exposed.length > 0) {
    log({
      level: 'warn', event: 'database_permissions', found: exposed.join(', '),
      message: 'Other local accounts can read the database (key labels, plans, client addresses, stored answers): make its folder 0700 and its files 0600.',
    });
  }
  return db;
}

/**
 * The writer thread's connection (writer/thread.ts): the only one of the server that writes the
 * file. WAL and synchronous=FULL as every connection; SQLite's automatic checkpoint is off, since
 * it would run inside a COMMIT, before the group is answered: the writer checkpoints after.
 * Waiting for another process's write lock blocks only the writer, and still at most 250 ms.
 */
export function openWriterDatabase(path: string): DatabaseSync {
  const db = openDatabase(path, { busyTimeoutMs: 250 });
  db.exec('PRAGMA wal_autocheckpoint = 0');
  return db;
}

/**
 * A connection that only reads, on a file that the server's first connection migrated: each
 * worker thread's of WORKERS. Its writes go to the writer thread; one made here by mistake fails
 * (SQLITE_READONLY, a 503) rather than take the write lock from the writer.
 */
export function openReaderDatabase(path: string): DatabaseSync {
  const db = new DatabaseSync(path, { readOnly: true });
  db.exec('PRAGMA busy_timeout = 250');
  return db;
}

/** From now on `db` only reads (the server's first connection, once it has migrated the file). */
export function readOnly(db: DatabaseSync): DatabaseSync {
  db.exec('PRAGMA query_only = 1');
  return db;
}

/** Runs every migration newer than the database's `user_version`. */
export function migrate(db: DatabaseSync, migrations: readonly string[] = MIGRATIONS): void {
  const row = db.prepare('PRAGMA user_version').get() as { user_version: number };
  for (let version = row.user_version; version < migrations.length; version++) {
    transaction(db, () => {
      db.exec(migrations[version]!);
      db.exec(`PRAGMA user_version = ${version + 1}`);
    });
  }
}

/** Runs `work` inside BEGIN IMMEDIATE ... COMMIT, rolling back on any error (all or nothing). */
export function transaction<T>(db: DatabaseSync, work: () => T): T {
  db.exec('BEGIN IMMEDIATE');
  try {
    const result = work();
    db.exec('COMMIT');
    return result;
  } catch (error) {
    if (db.isTransaction) db.exec('ROLLBACK');
    throw error;
  }
}

/** Closes the connection and the `-shm` file that `dataVersion` may have opened beside it. */
export function closeDatabase(db: DatabaseSync): void {
  closeDataVersion(db);
  if (db.isOpen) db.close();
}
