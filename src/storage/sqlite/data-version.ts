/**
 * Whether anything committed since a cache was filled: `PRAGMA data_version`, read cheaply.
 */
import type { DatabaseSync } from 'node:sqlite';
const { endianness } = process.getBuiltinModule('node:os');

// Not `import ... from 'node:fs'`: its ES-module view loads what a start does not use (http/access-log.ts).
const { closeSync, openSync, readSync } = process.getBuiltinModule('node:fs');

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
 * Where there is no such file (`:memory:`, or a journal mode other than WAL), every call says
 * "changed" and the pragma is asked each time, as before.
 */
function walIndexHeader(db: DatabaseSync): { changed: () => boolean } {
  const read = headerReader(db);
  if (read === null) return { changed: () => true };
  const seen = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  const current = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  let known = false;
  return {
    changed() {
      if (!read(current)) return true;
      if (known && current.equals(seen)) return false;
      current.copy(seen);
      known = true;
      return true;
    },
  };
}

/** The WAL-index format SQLite has written since 3.7.0 (the header's iVersion). */
const WAL_INDEX_VERSION = 3_007_000;

/**
 * Whether the start of a `-shm` file (two copies of the header, 96 bytes) is laid out as this
 * module reads it (https://sqlite.org/walformat.html, 2.1), for a database of `pageSize` bytes a
 * page: iVersion 3007000 and isInit 1 in the machine's byte order, szPage the page size (1 for
 * 65536; 0 while the WAL is empty), and the two copies equal. A SQLite that changed the layout fails it, and the callers
 * fall back to asking `PRAGMA data_version` each time.
 */
export function walIndexLayoutMatches(start: Buffer, pageSize: number): boolean {
  if (start.length < 2 * WAL_INDEX_HEADER_BYTES) return false;
  const view = new DataView(start.buffer, start.byteOffset, 2 * WAL_INDEX_HEADER_BYTES);
  const little = endianness() === 'LE';
  const szPage = view.getUint16(14, little);
  // szPage is 0 while the WAL holds no frame (a new file, or one a checkpoint has just reset).
  return view.getUint32(0, little) === WAL_INDEX_VERSION && view.getUint8(12) === 1 &&
    (szPage === 0 || szPage === (pageSize === 65_536 ? 1 : pageSize)) &&
    start.subarray(0, WAL_INDEX_HEADER_BYTES).equals(start.subarray(WAL_INDEX_HEADER_BYTES, 2 * WAL_INDEX_HEADER_BYTES));
}

/** Checks the layout of a connection's `-shm`; tests pass one that refuses. */
export type LayoutCheck = (start: Buffer, pageSize: number) => boolean;

/**
 * Reads the WAL index header of `db`'s file into a buffer of WAL_INDEX_HEADER_BYTES, saying
 * whether it could; null where there is no `-shm` file, or where its layout is not the one this
 * module reads (checked once, when the file is opened). One descriptor per connection, whoever
 * asks: the connection keeps the database open, so the file is never removed under it, and
 * `closeDatabase` closes the descriptor.
 */
function headerReader(db: DatabaseSync, layoutMatches: LayoutCheck = walIndexLayoutMatches): ((into: Buffer) => boolean) | null {
  let fd = walIndexFiles.get(db);
  if (fd === undefined) {
    const path = db.location();
    if (path === null || path === '') return null;
    try {
      fd = openSync(`${path}-shm`, 'r');
    } catch {
      return null;
    }
    if (!layoutChecked(db, fd, layoutMatches)) {
      // Kept open, unused, until the connection closes: closing a descriptor of a file drops
      // every POSIX lock this process holds on it, SQLite's own on `-shm` included, and another
      // process (a backup) would then take the file for unused and reset it under this
      // process's mapping (SIGBUS).
      walIndexFiles.set(db, fd);
      return null;
    }
    walIndexFiles.set(db, fd);
  }
  const opened = fd;
  return (into) => readSync(opened, into, 0, WAL_INDEX_HEADER_BYTES, 0) === WAL_INDEX_HEADER_BYTES;
}

/** Whether `-shm` (open as `fd`) has the layout expected; a few reads, should a commit rewrite it meanwhile. */
function layoutChecked(db: DatabaseSync, fd: number, layoutMatches: LayoutCheck): boolean {
  const pageSize = (db.prepare('PRAGMA page_size').get() as { page_size: number }).page_size;
  const start = Buffer.alloc(2 * WAL_INDEX_HEADER_BYTES);
  for (let attempt = 0; attempt < 3; attempt++) {
    if (readSync(fd, start, 0, start.length, 0) === start.length && layoutMatches(start, pageSize)) return true;
  }
  return false;
}

// --- the writer thread's commits, told apart from everybody else's ------------------------------

/**
 * What the writer thread tells the readers about its commits, in memory they share: the WAL
 * index header as its last commit left it, a count of the commits by other connections it has
 * noticed (`epoch`). `seq` is odd while the header is being copied.
 */
export interface CommitPublication {
  readonly buffer: SharedArrayBuffer;
  readonly state: Int32Array;
  readonly header: Uint8Array;
}

const SEQ = 0;
const EPOCH = 2;
const STATE_BYTES = 16;

/** A publication over `buffer`, which another thread may have made: both then see the same one. */
export function publicationIn(buffer = new SharedArrayBuffer(STATE_BYTES + WAL_INDEX_HEADER_BYTES)): CommitPublication {
  return { buffer, state: new Int32Array(buffer, 0, STATE_BYTES / 4), header: new Uint8Array(buffer, STATE_BYTES, WAL_INDEX_HEADER_BYTES) };
}

export interface CommitPublisher {
  /**
   * Called after the transaction, committed or not, and before anybody is answered: publishes
   * the header as it now is, with the epoch raised if any other connection committed since the
   * previous publication (PRAGMA data_version of the writer's connection says so, exactly).
   * Returns the frames in the WAL now (the header's mxFrame), for the writer's checkpoints.
   */
  publish(): number;
}

/** The writer thread's side, over its own connection `db` (a file in WAL mode). */
export function createCommitPublisher(db: DatabaseSync, { state, header }: CommitPublication, layoutMatches?: LayoutCheck): CommitPublisher {
  const read = headerReader(db, layoutMatches);
  if (read === null) {
    // A `-shm` this module cannot read: the readers ask `PRAGMA data_version` instead (see
    // foreignCommits), and SQLite checkpoints by itself, inside COMMIT, as before the writer.
    db.exec('PRAGMA wal_autocheckpoint = 1000');
    return { publish: () => 0 };
  }
  const statement = db.prepare('PRAGMA data_version');
  statement.setReturnArrays(true);
  const current = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  // mxFrame, the last valid frame of the WAL: 4 bytes at offset 16, in the machine's byte order.
  const frames = new Uint32Array(current.buffer, current.byteOffset + 16, 1);
  // Should the pragma fail (an I/O error), the readers assume that anyone may have committed.
  const version = () => {
    try {
      return (statement.get() as unknown as [number])[0];
    } catch {
      return NaN;
    }
  };
  let seen = version();
  const publish = () => {
    // The header first, then the pragma: a commit by another connection between our COMMIT and
    // the read of the header is in the header, and the pragma, read after, counts it.
    if (!read(current)) current.fill(0);
    const now = version();
    if (now !== seen) {
      seen = now;
      Atomics.add(state, EPOCH, 1);
    }
    Atomics.add(state, SEQ, 1);
    header.set(current);
    Atomics.add(state, SEQ, 1);
    return frames[0]!;
  };
  // Another connection's commits before the writer started are nobody's concern: the readers'
  // first look comes after this.
  publish();
  return { publish };
}

/**
 * The `external` of a reading connection whose writes the writer thread makes: a number that
 * changes when, and only when, a connection other than the writer may have committed since the
 * previous call (the keys command, another process). The writer's own commits are journaled
 * (writer/journal.ts) and leave it as it is. Read at most once per callback, like `dataVersion`.
 *
 * The WAL index header moves with every commit. When it moved since the last look, the change
 * was the writer's alone if the header is now exactly the one the writer published after its
 * last commit, and the writer noticed no other commit meanwhile (the epoch is the one seen at the
 * last look). Otherwise the number changes: also when a reader looks between the writer's COMMIT
 * and its publication (microseconds), which drops every cached answer once rather than make a
 * request thread wait for another thread.
 */
export function foreignCommits(db: DatabaseSync, { state, header: published }: CommitPublication, layoutMatches?: LayoutCheck): () => number {
  const read = headerReader(db, layoutMatches);
  // A `-shm` this module cannot read: every commit but this connection's own counts, the
  // writer's too. Exact, and every cached answer goes at each write.
  if (read === null) return dataVersion(db);
  const current = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  const seen = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  const copy = Buffer.alloc(WAL_INDEX_HEADER_BYTES);
  let known = false;
  let epoch = 0;
  let version = 0;
  let fresh = false;
  const expire = () => {
    fresh = false;
  };

  /**
   * The writer's epoch at its last publication, if that publication is the current header (and
   * was not being copied meanwhile); null otherwise. The epoch is read after the publication's
   * `seq`, so it includes every other commit the writer noticed before publishing it.
   */
  function publishedEpoch(): number | null {
    const before = Atomics.load(state, SEQ);
    copy.set(published);
    const now = Atomics.load(state, EPOCH);
    return (before & 1) === 0 && Atomics.load(state, SEQ) === before && copy.equals(current) ? now : null;
  }

  function look(): void {
    if (!read!(current)) {
      version++;
      return;
    }
    if (!known) {
      epoch = Atomics.load(state, EPOCH);
    } else if (!current.equals(seen)) {
      // Between the writer's COMMIT and its publication (microseconds), the change cannot be told
      // apart: assumed foreign, so every cached answer goes. A request thread never waits for the
      // writer: its event loop serves everyone.
      const now = publishedEpoch();
      if (now === null || now !== epoch) {
        version++;
        epoch = Atomics.load(state, EPOCH);
      }
    }
    current.copy(seen);
    known = true;
  }

  return () => {
    if (!fresh) {
      fresh = true;
      queueMicrotask(expire);
      look();
    }
    return version;
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
