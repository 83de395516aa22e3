/**
 * Whether anything committed since a cache was filled: `PRAGMA data_version`, read cheaply.
 */
import type { DatabaseSync } from 'node:sqlite';
import { closeSync, openSync, readSync } from 'node:fs';

const watchers = new WeakMap<DatabaseSync, () => number>();

/** The `-shm` file descriptors opened by `walIndexHeader`, closed by `closeDatabase`. */
const walIndexFiles = new WeakMap<DatabaseSync, number>();

/**
 * `PRAGMA data_version` of this connection: it changes when another connection (the keys
 * command, another process) commits, never for this connection's own writes. Caches compare it
 * to know whether what they hold may be stale.
 *
 * The value is read at most once per callback from the event loop and shared by every store on
 * the connection (the key cache and the answer caches of one request read it once). That loses
 * nothing: every request handled in a callback was received by the socket read that started the
 * callback, before any of its JavaScript ran, so a commit that returned before a request was sent
 * had returned before the value was read. The value is forgotten in a microtask, which runs
 * before the callback returns to the event loop. (It used to be kept for a whole turn of the
 * event loop, which is not exact: a turn reads many sockets one after another, and a request
 * pipelined behind another on a socket read later in the turn may have been sent after the
 * turn's first read; test/interface/pet-reads-after-writes.test.ts pins it.)
 *
 * The pragma starts a WAL read transaction: two `fcntl` locks and SQLite's bookkeeping, about
 * 4 us under load, once per request. So it is asked only when the WAL index header may have
 * changed (see `walIndexHeader`): one 48-byte `pread`, about 0.7 us. The whole change measured
 * about 1.5 us of CPU per request by id (docs/decisions/0002-exact-answer-caches.md).
 */
export function dataVersion(db: DatabaseSync): () => number {
  let watcher = watchers.get(db);
  if (watcher) return watcher;
  const statement = db.prepare('PRAGMA data_version');
  statement.setReturnArrays(true);
  const header = walIndexHeader(db);
  let version = 0;
  let fresh = false;
  const expire = () => {
    fresh = false;
  };
  watcher = () => {
    if (!fresh) {
      fresh = true;
      queueMicrotask(expire);
      // The header is read before the pragma: a commit between the two is seen by the pragma
      // now, and by the changed header next time.
      if (header.changed()) version = (statement.get() as unknown as [number])[0];
    }
    return version;
  };
  watchers.set(db, watcher);
  return watcher;
}

/** Bytes of the first copy of the WAL index header (https://sqlite.org/walformat.html, 2.1). */
const WAL_INDEX_HEADER_BYTES = 48;

/**
 * Tells whether any connection may have committed since the last call, from the WAL index
 * header at the start of the database's `-shm` file. Every commit in WAL mode rewrites that
 * header (its change counter, frame count and checksums) before it returns, in shared memory
 * that is the file's page cache, so a plain `pread` sees it; a checkpoint does not touch it.
 * "Unchanged" therefore proves that nobody committed; "changed" may also be this connection's
 * own commit, and then the pragma (which is exact) is asked for nothing.
 *
 * This connection keeps the database open, so the `-shm` file is never removed under it. Where
 * there is no such file (`:memory:`, or a journal mode other than WAL), every call says
 * "changed" and the pragma is asked each time, as before.
 */
function walIndexHeader(db: DatabaseSync): { changed: () => boolean } {
  const always = { changed: () => true };
  const path = db.location();
  if (path === null || path === '') return always;
  let fd: number;
  try {
    fd = openSync(`${path}-shm`, 'r');
  } catch {
    return always;
  }
  walIndexFiles.set(db, fd);
  const seen = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  const read = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  let known = false;
  return {
    changed() {
      if (readSync(fd, read, 0, WAL_INDEX_HEADER_BYTES, 0) !== WAL_INDEX_HEADER_BYTES) return true;
      if (known && read.equals(seen)) return false;
      read.copy(seen);
      known = true;
      return true;
    },
  };
}

/** Closes the `-shm` file that `dataVersion` opened for `db`, if any (database.ts closes `db`). */
export function closeDataVersion(db: DatabaseSync): void {
  const fd = walIndexFiles.get(db);
  if (fd !== undefined) {
    walIndexFiles.delete(db);
    closeSync(fd);
  }
}
