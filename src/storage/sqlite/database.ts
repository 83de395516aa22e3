/**
 * Opening the SQLite database and bringing its schema up to date.
 *
 * Migrations are versioned by `PRAGMA user_version`: each entry runs once, in order, inside a
 * transaction, so a crash mid-migration leaves the previous version intact.
 */
import { DatabaseSync } from 'node:sqlite';
import { closeSync, mkdirSync, openSync, readSync, statSync } from 'node:fs';
import { dirname } from 'node:path';

/** Each migration's index + 1 is the schema version it produces. Append only; never edit. */
export const MIGRATIONS: readonly string[] = [
  // 1: pets and API keys.
  `
  CREATE TABLE pets (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL,
    category_id INTEGER NOT NULL CHECK (category_id >= 1),
    status      TEXT    NOT NULL CHECK (status IN ('available', 'pending', 'sold'))
  ) STRICT;
  -- Keyset pagination of a status-filtered list walks this index in id order.
  CREATE INDEX pets_status_id ON pets (status, id);

  CREATE TABLE api_keys (
    id          TEXT    PRIMARY KEY,
    key_hash    TEXT    NOT NULL UNIQUE,
    label       TEXT    NOT NULL DEFAULT '',
    plan        TEXT    NOT NULL CHECK (plan IN ('free', 'pro', 'business', 'enterprise')),
    per_minute  INTEGER CHECK (per_minute IS NULL OR per_minute >= 1),
    per_day     INTEGER CHECK (per_day IS NULL OR per_day >= 1),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER,
    revoked_at  INTEGER,
    -- Only enterprise keys carry their own numbers; the other plans use the published ones.
    CHECK ((plan = 'enterprise') = (per_minute IS NOT NULL AND per_day IS NOT NULL))
  ) STRICT;
  `,
  // 2: rate-limiter state, so that a restart never hands out a fresh daily quota or ends a ban.
  `
  CREATE TABLE rate_limit_callers (
    caller            TEXT    PRIMARY KEY,  -- opaque: 'key:<key id>' or 'ip:<address>'
    per_minute        INTEGER NOT NULL CHECK (per_minute >= 1),  -- limits of the last request
    per_day           INTEGER NOT NULL CHECK (per_day >= 1),
    minute_tokens     REAL    NOT NULL CHECK (minute_tokens >= 0),
    day_tokens        REAL    NOT NULL CHECK (day_tokens >= 0),
    updated_at        INTEGER NOT NULL,  -- ms since the epoch at which the tokens were counted
    banned_until      INTEGER NOT NULL DEFAULT 0,  -- ms; end of the last ban, 0 if never banned
    ban_count         INTEGER NOT NULL DEFAULT 0 CHECK (ban_count >= 0),
    recent_rejections TEXT    NOT NULL DEFAULT '[]'  -- JSON array of ms: 429s of the last 60 s
  ) STRICT, WITHOUT ROWID;
  `,
  // 3: Idempotency-Key records of POST /v1/pets, written in the same transaction as the pet.
  `
  CREATE TABLE idempotency_keys (
    id               INTEGER PRIMARY KEY,
    api_key_id       TEXT    NOT NULL,  -- keys are scoped by the API key that sent them
    idempotency_key  TEXT    NOT NULL CHECK (length(idempotency_key) BETWEEN 1 AND 255),
    fingerprint      TEXT    NOT NULL,  -- SHA-256 of the canonical request body
    response_status  INTEGER NOT NULL,
    response_headers TEXT    NOT NULL,  -- JSON object of the headers to replay (Location)
    response_body    TEXT    NOT NULL,  -- the exact body that was sent
    created_at       INTEGER NOT NULL,  -- ms since the epoch; the record expires 24 h later
    UNIQUE (api_key_id, idempotency_key)
  ) STRICT;
  -- The background purge deletes the oldest records first, in small chunks.
  CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
  `,
  // 4: a version per pet (contract 1.1), bumped by the statement that changes the pet; the ETag
  // is made of the id and the version. A creation remembered before this migration replays with
  // the ETag its pet had then (version 1), in the format of src/api/pet-json.ts (petETag).
  `
  ALTER TABLE pets ADD COLUMN version INTEGER NOT NULL DEFAULT 1 CHECK (version >= 1);
  UPDATE idempotency_keys
  SET response_headers = json_set(response_headers, '$.ETag', '"' || json_extract(response_body, '$.id') || '.1"')
  WHERE response_status = 201;
  `,
];

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
 * left as they are, with one warning through `log` if other accounts can read them.
 */
export function openServerDatabase(path: string, log: (fields: Record<string, unknown>) => void): DatabaseSync {
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
 * Modes of the database's folder and files (issue #15): they hold key labels, plans, client
 * addresses and stored responses, which no other local account may read.
 */
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

const watchers = new WeakMap<DatabaseSync, () => number>();
/** The `-shm` file descriptors opened by `walIndexHeader`, closed by `closeDatabase`. */
const walIndexFiles = new WeakMap<DatabaseSync, number>();

/** Closes the connection and the `-shm` file that `dataVersion` may have opened beside it. */
export function closeDatabase(db: DatabaseSync): void {
  const fd = walIndexFiles.get(db);
  if (fd !== undefined) {
    walIndexFiles.delete(db);
    closeSync(fd);
  }
  if (db.isOpen) db.close();
}

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
 * turn's first read; pet-lifecycle-reads.test.ts pins it.)
 *
 * The pragma starts a WAL read transaction: two `fcntl` locks and SQLite's bookkeeping, about
 * 4 us under load, once per request. So it is asked only when the WAL index header may have
 * changed (see `walIndexHeader`): one 48-byte `pread`, about 0.7 us. Issue #12 measured the
 * whole change at about 1.5 us of CPU per request by id (see the README's benchmark section).
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
