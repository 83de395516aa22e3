/**
 * An online, consistent copy of the SQLite database (docs/operations.md, "Backups and restore"),
 * taken with SQLite's backup API through `node:sqlite` while the server keeps running.
 *
 * Consistent: the whole copy is one backup step, so it reads every page inside one read
 * transaction. Copying in small steps would let another connection's commit (the server's)
 * restart the copy, again and again under steady writes; in WAL mode one long read blocks no
 * writer. The copy is written to a private temporary file, checked, and only then linked to its
 * name, which fails if that name exists: the file never appears half-written and nothing is
 * overwritten, even by a race.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, openSync, rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { backup, DatabaseSync } from 'node:sqlite';
import { createPrivateFile, PRIVATE_FILE_MODE } from '../storage/sqlite/private-files.ts';

/** The copy is readable by its owner only, like the database (it holds the key hashes). */
export const BACKUP_FILE_MODE = PRIVATE_FILE_MODE;
/** More pages than any database has: the whole copy in one step (node:sqlite wants a positive int32). */
const ALL_PAGES = 2 ** 31 - 1;

/** `file` already exists: a backup never replaces anything. */
export class BackupExistsError extends Error {
  constructor(file: string) {
    super(`${file} already exists; a backup never overwrites a file, so choose a new name`);
    this.name = 'BackupExistsError';
  }
}

/** Copies the open database `source` to `file`, which must not exist. Resolves with the page count. */
export async function backupDatabase(source: DatabaseSync, file: string): Promise<number> {
  const partial = join(dirname(file), `.${basename(file)}.partial-${randomBytes(6).toString('hex')}`);
  // Created here, exclusively and 0600, as the server creates its database, so that
  // SQLite opens a file that is already ours.
  createPrivateFile(partial, { exclusive: true });
  try {
    const pages = await backup(source, partial, { rate: ALL_PAGES });
    checkCopy(partial);
    syncFile(partial);
    try {
      linkSync(partial, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new BackupExistsError(file);
      throw error;
    }
    syncFile(dirname(file));
    return pages;
  } finally {
    for (const suffix of ['', '-journal', '-wal', '-shm']) rmSync(partial + suffix, { force: true });
  }
}

/** The copy must open as a database whose pages are sound. (Read-write: closing it removes its -wal.) */
function checkCopy(path: string): void {
  const copy = new DatabaseSync(path);
  try {
    const { quick_check: verdict } = copy.prepare('PRAGMA quick_check').get() as { quick_check: string };
    if (verdict !== 'ok') throw new Error(`the copy failed its integrity check: ${verdict}`);
  } finally {
    copy.close();
  }
}

/** fsync a file or a folder, so that the copy and its name survive a crash once we say "done". */
function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
