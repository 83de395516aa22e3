import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import { BENCH_KEY_LIMITS, idBeforeLast, seedDatabase } from '../../bench/seed.ts';

test('the bench database holds the pets and a production enterprise key with limits that never bind', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'seed-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'pets.db');
  const seeded = seedDatabase(path, 300);
  assert.match(seeded.key, /^pk_live_/);

  const db = openDatabase(path);
  t.after(() => db.close());
  const counts = db.prepare('SELECT status, count(*) AS n, max(id) AS last FROM pets GROUP BY status ORDER BY status').all();
  assert.deepEqual(counts.map((row) => [row.status, row.n, row.last]), [['available', 100, 298], ['pending', 100, 299], ['sold', 100, 300]]);
  const record = createKeysStore(db, { appEnv: 'production' }).findByKey(seeded.key, Date.now());
  assert.equal(record?.label, 'bench');
  assert.equal(record?.perMinute, BENCH_KEY_LIMITS.perMinute);
  assert.equal(record?.perDay, BENCH_KEY_LIMITS.perDay);

  // Sold pets are ids 3, 6, ..., 300: the one before the last 5 is 285.
  assert.equal(idBeforeLast(db, 5, 'sold'), 285);
  assert.equal(seeded.deepSoldAfterId, 180, 'the 40 sold pets after it: 183 to 300');
  assert.equal(idBeforeLast(db, 1000, 'available'), 0);
});
