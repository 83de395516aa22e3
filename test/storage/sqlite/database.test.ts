import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dataVersion, migrate, MIGRATIONS, openDatabase } from '../../../src/storage/sqlite/database.ts';

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
