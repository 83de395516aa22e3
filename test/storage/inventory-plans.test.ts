/**
 * The inventory's cost does not grow with the number of pets: on both engines its query reads
 * the counts (and, on PostgreSQL, the changes not yet folded into them), never the pets table.
 * Checked on the plans the engines choose with a million pets, not by timing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { INVENTORY_SQL as SQLITE_INVENTORY } from '../../src/storage/sqlite/orders-store.ts';
import { createOrdersStore, INVENTORY_SQL as POSTGRES_INVENTORY } from '../../src/storage/postgres/orders-store.ts';
import { describeWithPostgres, openTestDatabase } from '../support/postgres.ts';

test('SQLite: the inventory reads pet_counts alone, with 1,000,000 pets', (t) => {
  const db = openDatabase(':memory:');
  t.after(() => db.close());
  db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000)
    INSERT INTO pets (name, category_id, status) SELECT 'pet', 1, CASE i % 3 WHEN 0 THEN 'sold' WHEN 1 THEN 'available' ELSE 'pending' END FROM n`);
  const plan = db.prepare(`EXPLAIN QUERY PLAN ${SQLITE_INVENTORY}`).all().map((row) => String(row.detail));
  assert.deepEqual(plan, ['SCAN pet_counts']);
  const counts = Object.fromEntries(db.prepare(SQLITE_INVENTORY).all().map((row) => [row.status, row.pets]));
  assert.deepEqual(counts, { available: 333334, pending: 333333, sold: 333333 });
});

describeWithPostgres('PostgreSQL: the inventory plan', (cluster) => {
  test('reads pet_counts and pet_count_changes only, with 1,000,000 pets, and the fold keeps the changes few', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    await sql.unsafe('SET statement_timeout = 0');
    await sql.unsafe(`INSERT INTO pets (name, category_id, status)
      SELECT 'pet', 1, (ARRAY['sold', 'available', 'pending'])[1 + i % 3] FROM generate_series(1, 1000000) i`);
    const [explained] = await sql.unsafe<{ 'QUERY PLAN': unknown }[]>(`EXPLAIN (FORMAT JSON) ${POSTGRES_INVENTORY}`);
    const plan = explained!['QUERY PLAN'];
    const relations = new Set<string>();
    const visit = (node: Record<string, unknown>) => {
      if (typeof node['Relation Name'] === 'string') relations.add(node['Relation Name']);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) visit(child);
    };
    visit((plan as { Plan: Record<string, unknown> }[])[0]!.Plan);
    assert.deepEqual([...relations].sort(), ['pet_count_changes', 'pet_counts']);
    const orders = createOrdersStore(sql);
    assert.deepEqual(await orders.inventory(), { available: 333334, pending: 333333, sold: 333333 });
    // One statement inserted the million: one row of changes per status, folded at once.
    assert.equal(await orders.foldCounts(1000), 3);
    const [left] = await sql<{ n: string }[]>`SELECT count(*)::text AS n FROM pet_count_changes`;
    assert.equal(left!.n, '0');
    assert.deepEqual(await orders.inventory(), { available: 333334, pending: 333333, sold: 333333 });
  });
});
