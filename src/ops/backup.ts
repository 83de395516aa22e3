/**
 * An online, consistent copy of the SQLite database (docs/operations.md, "Backups and restore"),
 * taken with SQLite's backup API through `node:sqlite` while the server keeps running.
 *
 * Consistent: the whole copy is one backup step, so it reads every page inside one read
 * transaction. Copying in small steps would let another connection's commit (the server's)
 * restart the copy, again and again under steady writes; in WAL mode one long read blocks no
 * writer. The copy is made and checked in a private folder, written beside FILE through a
 * descriptor of our own, and only then linked to its name, which fails if that name exists: the
 * file never appears half-written and nothing is overwritten, even by a race.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, fsyncSync, linkSync, lstatSync, mkdtempSync, openSync, readSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { backup, DatabaseSync } from 'node:sqlite';
import { PRIVATE_FILE_MODE } from '../storage/sqlite/private-files.ts';

/** The copy is readable by its owner only, like the database (it holds the key hashes). */
export const BACKUP_FILE_MODE = PRIVATE_FILE_MODE;
/** More pages than any database has: the whole copy in one step (node:sqlite wants a positive int32). */
const ALL_PAGES = 2 ** 31 - 1;
/** Bytes copied per read and write from the checked copy to FILE. */
const CHUNK_BYTES = 1024 * 1024;

/** `file` already exists: a backup never replaces anything. */
export class BackupExistsError extends Error {
  constructor(file: string) {
    super(`${file} already exists; a backup never overwrites a file, so choose a new name`);
    this.name = 'BackupExistsError';
  }
}

export interface BackupOptions {
  /**
   * A folder of this account's (the live database's): SQLite writes and checks its copy in a
   * private folder made there, where no other account can swap a file under it.
   */
  scratchIn: string;
  /** Called with the temporary name beside FILE once it is created (tests swap it there). */
  createdPartial?: (path: string) => void;
}

/**
 * Copies the open database `source` to `file`, which must not exist. Resolves with the page count.
 *
 * SQLite's backup writes to a path, and the old way let it write to a temporary name beside FILE:
 * in a folder that others can write to (and without the sticky bit), that name could be swapped
 * for a symlink between its creation and SQLite opening it, and the backup then overwrote whatever
 * the symlink named, another database included. Now SQLite writes into a private folder (0700)
 * beside the live database, the copy is checked there, and its bytes reach FILE's folder only
 * through a descriptor this function opened itself (O_CREAT|O_EXCL|O_NOFOLLOW, 0600). The name is
 * linked to FILE (which fails if FILE exists) only if it still names that descriptor's file.
 */
export async function backupDatabase(source: DatabaseSync, file: string, options: BackupOptions): Promise<number> {
  const scratch = mkdtempSync(join(options.scratchIn, '.backup-'));
  const partial = join(dirname(file), `.${basename(file)}.partial-${randomBytes(6).toString('hex')}`);
  let fd: number | null = null;
  try {
    const copy = join(scratch, 'copy.db');
    const pages = await backup(source, copy, { rate: ALL_PAGES });
    checkCopy(copy);
    fd = openSync(partial, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, BACKUP_FILE_MODE);
    options.createdPartial?.(partial);
    copyInto(copy, fd);
    fsyncSync(fd);
    const written = fstatSync(fd);
    try {
      linkSync(partial, file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new BackupExistsError(file);
      throw error;
    }
    const named = lstatSync(file);
    if (named.ino !== written.ino || named.dev !== written.dev) {
      // Someone replaced the temporary name meanwhile: FILE is not our copy. Only the name we
      // just made is removed; nothing is ever written through it.
      unlinkSync(file);
      throw new Error(`the temporary file beside ${file} was replaced while the copy was written; nothing was backed up (is its folder writable by others?)`);
    }
    syncFile(dirname(file));
    return pages;
  } finally {
    if (fd !== null) closeSync(fd);
    rmSync(partial, { force: true });
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Copies the file at `path` (in the private scratch folder) into the descriptor `fd`. */
function copyInto(path: string, fd: number): void {
  const from = openSync(path, 'r');
  try {
    const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
    for (let read = readSync(from, buffer); read > 0; read = readSync(from, buffer)) {
      for (let written = 0; written < read;) written += writeSync(fd, buffer, written, read - written);
    }
  } finally {
    closeSync(from);
  }
}

/** The copy must open as a database whose pages are sound. (Read-write: closing it removes its -wal.) */
function checkCopy(path: string): void {
  const copy = new DatabaseSync(path);
  try {
    const { quick_check: verdict } = copy.prepare('PRAGMA quick_check').get() as { quick_check: string };
    if (verdict !== 'ok') throw new Error(`the copy failed its integrity check: ${verdict}`);
  } catch (error) {
    if ((error as Error).message.startsWith('the copy failed')) throw error;
    throw new Error(`the copy failed its integrity check: ${(error as Error).message.split('\n')[0]}`);
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
