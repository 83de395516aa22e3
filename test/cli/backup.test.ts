/** `npm run backup -- FILE` in-process: its arguments, environment, exit codes and the copy it writes. */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from '../../src/cli/exit-codes.ts';
import { runBackupCli, USAGE } from '../../src/cli/backup.ts';
import { tempDir as tempFolder } from '../support/main-process.ts';

const tempDir = (t: TestContext) => tempFolder(t, 'pets-backup-');

/** A database file with two pets and a key, left open as a running server would hold it. */
function liveDatabase(t: TestContext, dir: string): { path: string; db: DatabaseSync } {
  const path = join(dir, 'live.db');
  const db = openDatabase(path);
  t.after(() => db.close());
  createPetsStore(db).insertMany([{ name: 'Rex', categoryId: 1n, status: 'available' }, { name: 'Tom', categoryId: 2n, status: 'sold' }]);
  createKeysStore(db, { appEnv: 'development' }).create({ plan: 'free', label: 'backup test', now: Date.UTC(2026, 0, 1) });
  return { path, db };
}

async function run(argv: string[], env: Record<string, string>) {
  let stdout = '';
  let stderr = '';
  const code = await runBackupCli(argv, env, { stdout: { write: (text: string) => (stdout += text) }, stderr: { write: (text: string) => (stderr += text) } });
  return { code, stdout, stderr };
}

function assertOneLineError(stderr: string, pattern: RegExp): void {
  assert.match(stderr, /^backup: [^\n]+\n$/);
  assert.match(stderr, pattern);
}

test('backs up the database to FILE, readable by its owner only, with every row', async (t) => {
  const dir = tempDir(t);
  const { path, db } = liveDatabase(t, dir);
  const file = join(dir, 'copy.db');
  const result = await run([file], { DATABASE_PATH: path });
  assert.equal(result.code, EXIT_OK, result.stderr);
  assert.equal(result.stderr, '');
  assert.match(result.stdout, /^Backed up .*live\.db to .*copy\.db \(\d+ pages\)\n$/);
  assert.equal(statSync(file).mode & 0o777, 0o600);
  assert.deepEqual(readdirSync(dir).sort(), ['copy.db', 'live.db', 'live.db-shm', 'live.db-wal'], 'no temporary file is left');
  const copy = new DatabaseSync(file, { readOnly: true });
  t.after(() => copy.close());
  for (const table of ['pets', 'api_keys', 'rate_limit_callers', 'idempotency_keys']) {
    assert.deepEqual(copy.prepare(`SELECT * FROM ${table} ORDER BY 1`).all(), db.prepare(`SELECT * FROM ${table} ORDER BY 1`).all(), table);
  }
  assert.deepEqual(copy.prepare('PRAGMA user_version').get(), db.prepare('PRAGMA user_version').get());
});

test('an existing FILE is never overwritten: exit 1, the file unchanged', async (t) => {
  const dir = tempDir(t);
  const { path } = liveDatabase(t, dir);
  const file = join(dir, 'precious.db');
  writeFileSync(file, 'yesterday');
  const result = await run([file], { DATABASE_PATH: path });
  assert.equal(result.code, EXIT_FAILURE);
  assertOneLineError(result.stderr, /already exists/);
  assert.equal(readFileSync(file, 'utf8'), 'yesterday');
});

test('bad arguments exit 2 with one line; help exits 0', async (t) => {
  const dir = tempDir(t);
  const { path } = liveDatabase(t, dir);
  const env = { DATABASE_PATH: path };
  for (const argv of [[], ['a.db', 'b.db'], ['--force', 'a.db'], ['-f'], ['']]) {
    const result = await run(argv.map((word) => (word.endsWith('.db') ? join(dir, word) : word)), env);
    assert.equal(result.code, EXIT_USAGE, JSON.stringify(argv));
    assertOneLineError(result.stderr, /./);
  }
  assert.deepEqual(readdirSync(dir).filter((name) => !name.startsWith('live.db')), [], 'nothing was written');
  for (const help of ['help', '--help', '-h']) assert.deepEqual(await run([help], env), { code: EXIT_OK, stdout: USAGE, stderr: '' });
  // After --, a name that starts with a dash is a file.
  const dashed = await run(['--', join(dir, '-dash.db')], env);
  assert.equal(dashed.code, EXIT_OK, dashed.stderr);
});

test('with DATABASE_URL set it exits 2 and points to pg_dump', async (t) => {
  const dir = tempDir(t);
  const result = await run([join(dir, 'copy.db')], { DATABASE_URL: 'postgres://localhost/pets' });
  assert.equal(result.code, EXIT_USAGE);
  assertOneLineError(result.stderr, /pg_dump/);
  assert.deepEqual(readdirSync(dir), []);
});

test('what cannot be backed up exits 1 with one line: no database, :memory:, a bad variable, a missing folder, not a database', async (t) => {
  const dir = tempDir(t);
  const { path } = liveDatabase(t, dir);
  const notDatabase = join(dir, 'notes.txt');
  writeFileSync(notDatabase, 'not a database, not at all, but long enough to have a header '.repeat(10));
  const cases: [Record<string, string>, string, RegExp][] = [
    [{ DATABASE_PATH: join(dir, 'missing.db') }, join(dir, 'a.db'), /no database at/],
    [{ DATABASE_PATH: ':memory:' }, join(dir, 'b.db'), /DATABASE_PATH/],
    [{ DATABASE_PATH: path, APP_ENV: 'prod' }, join(dir, 'c.db'), /APP_ENV/],
    [{ DATABASE_PATH: path }, join(dir, 'no', 'such', 'folder.db'), /folder/],
    [{ DATABASE_PATH: notDatabase }, join(dir, 'd.db'), /not a database/],
  ];
  for (const [env, file, pattern] of cases) {
    const result = await run([file], env);
    assert.equal(result.code, EXIT_FAILURE, JSON.stringify(env));
    assertOneLineError(result.stderr, pattern);
  }
  assert.deepEqual(readdirSync(dir).sort(), ['live.db', 'live.db-shm', 'live.db-wal', 'notes.txt'], 'no copy, no temporary file, no new database');
});

test('a name of the live database\'s own files is refused, however it is spelled: exit 1, nothing written', async (t) => {
  // A copy written to <DATABASE_PATH>-journal was taken by SQLite for a hot journal: `keys
  // revoke` failed with "database is locked" and the next start deleted the copy.
  const dir = tempDir(t);
  const { path } = liveDatabase(t, dir);
  const { mkdirSync, symlinkSync, existsSync } = await import('node:fs');
  mkdirSync(join(dir, 'sub'));
  symlinkSync(dir, join(dir, 'alias'));
  for (const file of [`${path}-journal`, join(dir, 'sub', '..', 'live.db-journal'), join(dir, 'alias', 'live.db-journal'), `${path}-mj0123ABCD`]) {
    const result = await run([file], { DATABASE_PATH: path });
    assert.equal(result.code, EXIT_FAILURE, file);
    assertOneLineError(result.stderr, /live database/);
    assert.equal(existsSync(`${path}-journal`), false);
    assert.equal(existsSync(`${path}-mj0123ABCD`), false);
  }
  // A name that only begins like it is a name of its own.
  assert.equal((await run([`${path}-backup`], { DATABASE_PATH: path })).code, EXIT_OK);
});

test('a database with a damaged page is not backed up: the copy fails its integrity check, exit 1, nothing left', async (t) => {
  const dir = tempDir(t);
  const path = join(dir, 'damaged.db');
  const db = openDatabase(path);
  const pets = createPetsStore(db);
  for (let i = 0; i < 20; i++) pets.insertMany(Array.from({ length: 100 }, (_, j) => ({ name: `pet ${i}-${j} ${'x'.repeat(40)}`, categoryId: 1n, status: 'available' as const })));
  db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  db.close();
  // Scribble over a page in the middle of the pets table (pages are 4096 bytes).
  const { openSync, writeSync, closeSync, statSync: stat, readdirSync: list } = await import('node:fs');
  const pages = stat(path).size / 4096;
  assert.ok(pages > 10, `${pages} pages`);
  const fd = openSync(path, 'r+');
  writeSync(fd, Buffer.alloc(4096, 0x5a), 0, 4096, Math.floor(pages / 2) * 4096);
  closeSync(fd);
  const result = await run([join(dir, 'copy.db')], { DATABASE_PATH: path });
  assert.equal(result.code, EXIT_FAILURE);
  assertOneLineError(result.stderr, /integrity check/);
  assert.deepEqual(list(dir).filter((name) => !name.startsWith('damaged.db')), [], 'no copy and no temporary file');
});
