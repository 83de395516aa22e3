import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createPrivateFile, dataVersion, migrate, MIGRATIONS, openDatabase, widerPermissions } from '../../../src/storage/sqlite/database.ts';

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

test('a new database is created 0600 in new folders 0700, and SQLite gives its -wal and -shm 0600 too (issue #15)', (t) => {
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
