/**
 * The database's folder and files hold key labels, plans, client addresses and stored responses,
 * which no other local account may read: they are created private, and a start on wider modes
 * says so once.
 */
const { dirname } = process.getBuiltinModule('node:path');

// Not `import ... from 'node:fs'`: its ES-module view loads what a start does not use (http/access-log.ts).
const { chmodSync, closeSync, mkdirSync, openSync, statSync } = process.getBuiltinModule('node:fs');

/** Modes of the database's folder and files. */
export const PRIVATE_FOLDER_MODE = 0o700;

export const PRIVATE_FILE_MODE = 0o600;

/**
 * Creates `path` empty with mode 0600, and its folder (with any missing parents) with mode 0700,
 * where they do not exist yet; existing ones are left as they are. SQLite takes an empty file as
 * a new database and gives its `-wal` and `-shm` files the mode of the database file, so they
 * are 0600 too. The server, the keys command and a backup (a copy made into a new file, with
 * `exclusive`: an existing file is an `EEXIST` error, never overwritten) all create files here.
 */
export function createPrivateFile(path: string, { exclusive = false }: { exclusive?: boolean } = {}): void {
  mkdirSync(dirname(path), { recursive: true, mode: PRIVATE_FOLDER_MODE });
  try {
    closeSync(openSync(path, 'wx', PRIVATE_FILE_MODE));
  } catch (error) {
    if (exclusive || (error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/**
 * The database's folder and files (the database, `-wal`, `-shm`) that other accounts may read or
 * enter, as `path 0755` texts, for the one warning a start logs. Empty when all are private.
 */
export function widerPermissions(path: string): string[] {
  if (path === ':memory:') return [];
  const found: string[] = [];
  for (const entry of [dirname(path), path, `${path}-wal`, `${path}-shm`]) {
    const mode = statSync(entry, { throwIfNoEntry: false })?.mode;
    // Any bit for the group or for others: read, write, or (on the folder) enter.
    if (mode !== undefined && (mode & 0o077) !== 0) found.push(`${entry} ${(mode & 0o777).toString(8).padStart(4, '0')}`);
  }
  return found;
}

/**
 * Makes `folder` private (0700) when this account owns it and others may read or enter it; tells
 * whether it did. For the default `data/` folder only, which the service owns: a clone of the
 * repository has it (the project's layout keeps it), made 0755 by git, and the first start
 * tightens it instead of warning at every start. A folder named in `DATABASE_PATH` is the
 * operator's, and is only warned about.
 */
export function makeOwnFolderPrivate(folder: string): boolean {
  const stat = statSync(folder, { throwIfNoEntry: false });
  if (stat === undefined || !stat.isDirectory() || (stat.mode & 0o077) === 0) return false;
  if (typeof process.getuid === 'function' && stat.uid !== process.getuid()) return false;
  chmodSync(folder, PRIVATE_FOLDER_MODE);
  return true;
}
