/**
 * The bench's database: N pets and one enterprise key, written before the service starts, with
 * the service's own migrations (openDatabase) and key store, so the file is exactly what a
 * production server would open.
 */
import type { DatabaseSync } from 'node:sqlite';
import { openDatabase, transaction } from '../src/storage/sqlite/database.ts';
import { createKeysStore } from '../src/storage/sqlite/keys-store.ts';

/**
 * The bench key's own limits. High enough never to refuse a request in a run (a run sends a
 * few million requests at most), and low enough for the limiter's exact integer arithmetic
 * (per-day limits up to about 100 million, see src/limits/limiter.ts).
 */
export const BENCH_KEY_LIMITS = { perMinute: 10_000_000, perDay: 100_000_000 } as const;

/** Every third pet is sold (id % 3 = 0), the others are available or pending (SQL for SQLite and PostgreSQL). */
export const STATUS_OF_N = `CASE n % 3 WHEN 0 THEN 'sold' WHEN 1 THEN 'available' ELSE 'pending' END`;

/**
 * Creates the database at `path` (migrated) with `pets` pets and the bench key (production
 * prefix). `deepSoldAfterId`: a status=sold page there has 20 more sold pets after it: deep in
 * the table, full, with a next link.
 */
export function seedDatabase(path: string, pets: number): { key: string; deepSoldAfterId: number; seedMs: number } {
  const started = performance.now();
  const db = openDatabase(path);
  try {
    // One statement, one transaction: a million pets take seconds, not minutes.
    transaction(db, () => {
      db.prepare(
        `WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ?)
         INSERT INTO pets (name, category_id, status)
         SELECT 'Pet ' || n, 1 + (n * 7) % 40, ${STATUS_OF_N} FROM seq`,
      ).run(pets);
    });
    const issued = createKeysStore(db, { appEnv: 'production' }).create({ plan: 'enterprise', label: 'bench', ...BENCH_KEY_LIMITS, now: Date.now() });
    return { key: issued.key, deepSoldAfterId: idBeforeLast(db, 40, 'sold'), seedMs: performance.now() - started };
  } finally {
    db.close();
  }
}

/** The id after which the last `fromEnd` pets of `status` follow: 0 when there are not that many. */
export function idBeforeLast(db: DatabaseSync, fromEnd: number, status: string): number {
  const row = db.prepare('SELECT id FROM pets WHERE status = ? ORDER BY id DESC LIMIT 1 OFFSET ?').get(status, fromEnd) as { id: number } | undefined;
  return row === undefined ? 0 : Number(row.id);
}
