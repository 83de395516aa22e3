/**
 * How a reading connection tells the writer thread's commits (journaled: its cached answers
 * survive those that do not touch them) from any other connection's (nothing cached survives):
 * `createCommitPublisher` on the writer's connection, `foreignCommits` on the reader's
 * (src/storage/sqlite/data-version.ts). Here the three connections live in one thread and the
 * writer's steps are made by hand, so that each interleaving is made on purpose.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeDatabase, openDatabase, openReaderDatabase, openWriterDatabase } from '../../../src/storage/sqlite/database.ts';
import { createCommitPublisher, foreignCommits, publicationIn, walIndexLayoutMatches, type LayoutCheck } from '../../../src/storage/sqlite/data-version.ts';
import { readFileSync } from 'node:fs';
import { endianness } from 'node:os';

function connections(t: TestContext, layoutMatches?: LayoutCheck) {
  const dir = mkdtempSync(join(tmpdir(), 'pets-publication-'));
  const path = join(dir, 'pets.db');
  const writer = openWriterDatabase(path);
  const reader = openReaderDatabase(path);
  const other = openDatabase(path);
  t.after(() => {
    closeDatabase(reader);
    other.close();
    closeDatabase(writer);
    rmSync(dir, { recursive: true, force: true });
  });
  const publication = publicationIn();
  const publisher = createCommitPublisher(writer, publication, layoutMatches);
  const external = foreignCommits(reader, publication, layoutMatches);
  const insert = (db: typeof writer) => db.exec("INSERT INTO pets (name, category_id, status) VALUES ('x', 1, 'sold')");
  /** A group of the writer thread: BEGIN, the write, COMMIT, then the publication. */
  const group = (between: () => void = () => {}) => {
    writer.exec('BEGIN IMMEDIATE');
    insert(writer);
    writer.exec('COMMIT');
    between();
    publisher.publish();
  };
  return { writer, other, publisher, external, insert, group };
}

/** The reader reads `external` at most once per callback: each look in a callback of its own. */
const nextCallback = () => new Promise((resolve) => setImmediate(resolve));

test('the writer\'s commits leave `external` as it is; every other connection\'s commit changes it, across checkpoints and WAL restarts', async (t) => {
  const { writer, other, external, insert, group } = connections(t);
  const steps: Array<[string, () => void, boolean]> = [
    ['nothing', () => {}, false],
    ['a group of the writer', () => group(), false],
    ['another connection\'s commit', () => insert(other), true],
    ['the writer\'s next group, which notices it (drops once more)', () => group(), true],
    ['and the one after', () => group(), false],
    ['the writer\'s passive checkpoint', () => writer.exec('PRAGMA wal_checkpoint(PASSIVE)'), false],
    ['a group restarting the WAL', () => group(), false],
    ['another connection\'s commit after a restart', () => insert(other), true],
    ['a truncating checkpoint by another connection, then a group', () => { other.exec('PRAGMA wal_checkpoint(TRUNCATE)'); group(); }, true],
    ['two groups', () => { group(); group(); }, false],
    ['a rolled-back transaction elsewhere', () => { other.exec('BEGIN IMMEDIATE'); insert(other); other.exec('ROLLBACK'); }, false],
  ];
  await nextCallback();
  let before = external();
  for (const [what, step, changes] of steps) {
    await nextCallback();
    step();
    await nextCallback();
    const now = external();
    assert.equal(now !== before, changes, what);
    before = now;
  }
});

test('another connection\'s commit between the writer\'s COMMIT and its publication is still seen', async (t) => {
  const { other, external, insert, group } = connections(t);
  await nextCallback();
  const before = external();
  // It lands in the header the writer reads for its publication; the writer's data_version,
  // read after, counts it.
  group(() => insert(other));
  await nextCallback();
  assert.notEqual(external(), before);
});

test('a reader that looks between the writer\'s COMMIT and its publication assumes the worst at once, and waits for nothing', async (t) => {
  const { writer, publisher, external, insert } = connections(t);
  await nextCallback();
  const before = external();
  writer.exec('BEGIN IMMEDIATE');
  insert(writer);
  writer.exec('COMMIT');
  await nextCallback();
  const started = performance.now();
  const during = external();
  assert.notEqual(during, before, 'not yet published: maybe foreign');
  assert.ok(performance.now() - started < 5, 'no wait');
  publisher.publish();
  // Published, the header is the writer's: nothing more changes.
  await nextCallback();
  assert.equal(external(), during);
});

test('the value is read once per callback: a commit seen only in the next one', async (t) => {
  const { other, external, insert } = connections(t);
  await nextCallback();
  const before = external();
  insert(other);
  assert.equal(external(), before, 'the same callback keeps what it read');
  await Promise.resolve();
  assert.notEqual(external(), before);
});

test('the WAL-index header of the running SQLite has the layout read here; a changed layout is refused', async (t) => {
  const { writer, group } = connections(t);
  group();
  const start = readFileSync(`${writer.location()}-shm`).subarray(0, 96);
  const pageSize = (writer.prepare('PRAGMA page_size').get() as { page_size: number }).page_size;
  assert.equal(walIndexLayoutMatches(start, pageSize), true);
  const changed = (edit: (copy: Buffer) => void) => {
    const copy = Buffer.from(start);
    edit(copy);
    return walIndexLayoutMatches(copy, pageSize);
  };
  const little = endianness() === 'LE';
  assert.equal(changed((copy) => (little ? copy.writeUInt32LE(3_007_001, 0) : copy.writeUInt32BE(3_007_001, 0))), false, 'another version');
  assert.equal(changed((copy) => (copy[12] = 0)), false, 'not initialised');
  assert.equal(walIndexLayoutMatches(start, pageSize * 2), false, 'another page size');
  assert.equal(changed((copy) => (copy[64] = copy[64]! ^ 1)), false, 'the two copies differ');
  assert.equal(walIndexLayoutMatches(start.subarray(0, 48), pageSize), false, 'too short');
});

test('a WAL that holds no frame yet (szPage 0 in its header, as a server finds a file whose last connection closed) has the layout read here too', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pets-empty-wal-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'pets.db');
  const first = openDatabase(path);
  first.exec("INSERT INTO pets (name, category_id, status) VALUES ('x', 1, 'sold')");
  first.close();
  const db = openDatabase(path);
  t.after(() => db.close());
  db.prepare('SELECT count(*) FROM pets').get();
  const start = readFileSync(`${path}-shm`).subarray(0, 96);
  const pageSize = (db.prepare('PRAGMA page_size').get() as { page_size: number }).page_size;
  assert.equal(endianness() === 'LE' ? start.readUInt16LE(14) : start.readUInt16BE(14), 0, 'an empty WAL\'s header has no page size');
  assert.equal(walIndexLayoutMatches(start, pageSize), true);
});

test('where the layout is not the one expected, the reader falls back to PRAGMA data_version: every commit but its own counts, the writer\'s too', async (t) => {
  const { writer, publisher, external, insert, other, group } = connections(t, () => false);
  assert.equal(publisher.publish(), 0);
  assert.equal((writer.prepare('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number }).wal_autocheckpoint, 1000, 'SQLite checkpoints by itself');
  await nextCallback();
  let seen = external();
  group();
  await nextCallback();
  assert.notEqual(external(), seen, 'the writer\'s commit');
  seen = external();
  insert(other);
  await nextCallback();
  assert.notEqual(external(), seen, 'another connection\'s commit');
  seen = external();
  await nextCallback();
  assert.equal(external(), seen, 'nothing committed');
});
