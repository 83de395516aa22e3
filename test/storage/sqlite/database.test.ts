import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { closeDatabase, migrate, openDatabase } from '../../../src/storage/sqlite/database.ts';
import { dataVersion } from '../../../src/storage/sqlite/data-version.ts';
import { MIGRATIONS } from '../../../src/storage/sqlite/migrations.ts';
import { createPrivateFile, widerPermissions } from '../../../src/storage/sqlite/private-files.ts';

const modeOf = (path: string) => (statSync(path).mode & 0o777).toString(8);

/** A temporary folder, removed after the test, under the usual umask (022) so that modes are what a default shell gives. */
function tempDir(t: { after(fn: () => void): void }): string {
  const previous = process.umask(0o022);
  const dir = mkdtempSync(join(tmpdir(), 'pets-db-'));
  t.after(() => {
    process.umask(previous);
    rmSync(dir, { recursive: true, force: true });
  });
  return dir;
}

test('a new database is migrated to the latest version', () => {
  const db = openDatabase(':memory:');
  const { user_version } = db.prepare('PRAGMA user_version').get() as { user_version: number };
  assert.equal(user_version, MIGRATIONS.length);
  db.close();
});

test('migrating twice runs nothing the second time', () => {
  const db = new DatabaseSync(':memory:');
  migrate(db);
  migrate(db);
  const tables = db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' AND name = 'pets'").all();
  assert.equal(tables.length, 1);
  db.close();
});

test('a failing migration rolls back and leaves the version unchanged', () => {
  const db = new DatabaseSync(':memory:');
  assert.throws(() => migrate(db, ['CREATE TABLE a (x INTEGER) STRICT; CREATE TABLE a (y INTEGER) STRICT;']));
  const { user_version } = db.prepare('PRAGMA user_version').get() as { user_version: number };
  assert.equal(user_version, 0);
  assert.equal(db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE name = 'a'").get()!.n, 0);
  db.close();
});

test('a file database commits in WAL mode with synchronous=FULL, so a commit is on disk when it returns', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pets-db-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const db = openDatabase(join(dir, 'pets.db'), { busyTimeoutMs: 1234 });
  assert.equal((db.prepare('PRAGMA journal_mode').get() as { journal_mode: string }).journal_mode, 'wal');
  assert.equal((db.prepare('PRAGMA synchronous').get() as { synchronous: number }).synchronous, 2); // FULL
  assert.equal((db.prepare('PRAGMA busy_timeout').get() as { timeout: number }).timeout, 1234);
  db.close();
});

test('data_version is read once per callback from the event loop and shows another connection\'s commit in the next one', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'data-version-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const db = openDatabase(join(dir, 'a.db'));
  const other = openDatabase(join(dir, 'a.db'));
  t.after(() => {
    other.close();
    db.close();
  });
  const version = dataVersion(db);
  assert.equal(dataVersion(db), version, 'one watcher per connection, shared by its stores');
  const before = version();
  other.exec('INSERT INTO pets (name, category_id, status) VALUES (\'x\', 1, \'sold\')');
  assert.equal(version(), before, 'the same callback keeps the value it read');
  // Not a whole turn: the value is forgotten once the current callback's microtasks have run.
  await Promise.resolve();
  assert.notEqual(version(), before);
  const after = version();
  db.exec('INSERT INTO pets (name, category_id, status) VALUES (\'y\', 1, \'sold\')');
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(version(), after, "the connection's own commits do not change it");
});

test('every commit by another connection is seen, across checkpoints and WAL restarts, and never one of its own (the -shm pre-check)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'data-version-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'a.db');
  const db = openDatabase(path);
  const other = openDatabase(path);
  t.after(() => {
    other.close();
    closeDatabase(db);
  });
  const version = dataVersion(db);
  const nextCallback = () => new Promise((resolve) => setImmediate(resolve));
  const insert = (connection: typeof db) => connection.exec("INSERT INTO pets (name, category_id, status) VALUES ('x', 1, 'sold')");
  // The pragma itself, asked every time: the pre-check must never hide a change of it.
  const pragma = db.prepare('PRAGMA data_version');
  const direct = () => (pragma.get() as { data_version: number }).data_version;
  // Each step runs between two callbacks. `commits` says whether another connection committed,
  // which must be seen; null: whatever the pragma says (SQLite counts a WAL restart by a
  // checkpoint as a change too). TRUNCATE and RESTART make the next commit start the WAL again
  // from frame 1, with new salts.
  const steps: Array<[string, () => void, boolean | null]> = [
    ['nothing', () => {}, false],
    ['a commit', () => insert(other), true],
    ['a passive checkpoint', () => other.exec('PRAGMA wal_checkpoint(PASSIVE)'), null],
    ['a commit', () => insert(other), true],
    ['a truncating checkpoint', () => other.exec('PRAGMA wal_checkpoint(TRUNCATE)'), null],
    ['a commit into the restarted WAL', () => insert(other), true],
    ['an own commit', () => insert(db), false],
    ['a commit after an own one', () => insert(other), true],
    ['a restarting checkpoint', () => other.exec('PRAGMA wal_checkpoint(RESTART)'), null],
    ['a commit into the restarted WAL again', () => insert(other), true],
    ['an own truncating checkpoint and commit', () => { db.exec('PRAGMA wal_checkpoint(TRUNCATE)'); insert(db); }, null],
    ['a commit after those', () => insert(other), true],
    ['a rolled-back transaction', () => { other.exec('BEGIN IMMEDIATE'); insert(other); other.exec('ROLLBACK'); }, false],
    ['nothing again', () => {}, false],
  ];
  let before = version();
  let directBefore = direct();
  for (const [what, step, commits] of steps) {
    await nextCallback();
    step();
    await nextCallback();
    const now = version();
    const directNow = direct();
    assert.equal(now !== before, directNow !== directBefore, `${what}: seen exactly when the pragma changes`);
    if (commits !== null) assert.equal(now !== before, commits, `${what}: ${commits ? 'seen' : 'changes nothing'}`);
    before = now;
    directBefore = directNow;
  }
});

test('closeDatabase also closes the -shm file that the data_version pre-check opened', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'data-version-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'a.db');
  const openShm = () => readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === `${path}-shm`;
    } catch {
      return false; // the directory's own descriptor, gone by now
    }
  }).length;
  const db = openDatabase(path);
  const bySqlite = openShm();
  dataVersion(db)();
  assert.equal(openShm(), bySqlite + 1);
  closeDatabase(db);
  assert.equal(openShm(), 0);
  assert.equal(db.isOpen, false);
  closeDatabase(db); // a second close is harmless
});

test('a new database is created 0600 in new folders 0700, and SQLite gives its -wal and -shm 0600 too', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'state', 'data', 'pets.db');
  const db = openDatabase(path);
  t.after(() => db.close());
  db.exec("INSERT INTO pets (name, category_id, status) VALUES ('Rex', 1, 'available')");
  assert.equal(modeOf(join(dir, 'state')), '700');
  assert.equal(modeOf(dirname(path)), '700');
  for (const file of [path, `${path}-wal`, `${path}-shm`]) assert.equal(modeOf(file), '600', file);
  assert.deepEqual(widerPermissions(path), []);
});

test('an existing database keeps its modes, and widerPermissions names each part that others can read', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'pets.db');
  chmodSync(dir, 0o755);
  openDatabase(path).close();
  assert.deepEqual(widerPermissions(path), [`${dir} 0755`]);
  chmodSync(path, 0o644);
  const db = openDatabase(path);
  t.after(() => db.close());
  db.exec("INSERT INTO pets (name, category_id, status) VALUES ('Rex', 1, 'available')");
  assert.equal(modeOf(path), '644', 'an existing file is not changed behind the operator\'s back');
  assert.deepEqual(widerPermissions(path), [`${dir} 0755`, `${path} 0644`, `${path}-wal 0644`, `${path}-shm 0644`]);
  assert.deepEqual(widerPermissions(':memory:'), []);
});

test('createPrivateFile with exclusive never overwrites a file, as a backup must not', (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'backups', 'copy.db');
  createPrivateFile(path, { exclusive: true });
  assert.equal(modeOf(dirname(path)), '700');
  assert.equal(modeOf(path), '600');
  writeFileSync(path, 'kept');
  assert.throws(() => createPrivateFile(path, { exclusive: true }), { code: 'EEXIST' });
  createPrivateFile(path);
  assert.equal(readFileSync(path, 'utf8'), 'kept');
});
