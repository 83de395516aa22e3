/**
 * The backup's copy reaches FILE's folder only through a descriptor it opened itself: a temporary
 * name swapped for a symlink (as another account could do in a folder it may write to) never
 * gets a byte written through it, and FILE is never published as the swapped file.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { backupDatabase } from '../../src/ops/backup.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';

test('a temporary name swapped for a symlink to another database: that database is untouched, and nothing is backed up', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pets-backup-swap-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const live = openDatabase(join(dir, 'live.db'));
  t.after(() => live.close());
  createPetsStore(live).insertMany([{ name: 'Rex', categoryId: 1n, status: 'available' }]);
  const victim = join(dir, 'victim.db');
  writeFileSync(victim, 'another database, not ours to write');
  const file = join(dir, 'copy.db');
  await assert.rejects(backupDatabase(live, file, {
    scratchIn: dir,
    createdPartial(partial) {
      // What an attacker watching the folder does: replace our new name with a symlink.
      unlinkSync(partial);
      symlinkSync(victim, partial);
    },
  }), /was replaced/);
  assert.equal(readFileSync(victim, 'utf8'), 'another database, not ours to write');
  assert.equal(existsSync(file), false, 'FILE was not published as the swapped name');
  assert.equal(lstatSync(victim).isFile(), true);
  // Unswapped, the same call backs up.
  assert.ok((await backupDatabase(live, file, { scratchIn: dir })) > 0);
  const copy = new DatabaseSync(file, { readOnly: true });
  assert.equal((copy.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n, 1);
  copy.close();
});
