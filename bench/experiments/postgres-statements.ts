// Experiment: the CPU of the PostgreSQL statements of a request, in PostgreSQL and in the service (docs/performance.md).
/**
 * `node_modules/.bin/node bench/experiments/postgres-statements.ts`: a throwaway cluster (the
 * tests', test/support/postgres.ts), 1,000 pets, one connection; each figure is the median of 5
 * alternating runs of a few hundred calls. PostgreSQL's CPU is its backend's user and system
 * time from /proc, the client's `process.cpuUsage()` (the driver and the store's own code).
 *
 * - take_tokens, version 2 (a database at schema version 3) against the latest: PostgreSQL's user
 *   CPU per call of 45 takes of one key, as a busy instance sends them.
 * - A batch of 45 pages of 21 pets: the statement that returned a row per pet (written out below
 *   as it was) against the store's, which returns one JSON text per page; both sides' CPU per
 *   page, the service's including the pets made of the rows or of the text.
 */
import { connectPostgres, migratePostgres } from '../../src/storage/postgres/database.ts';
import type { PostgresSql } from '../../src/storage/postgres/driver.ts';
import { MIGRATIONS } from '../../src/storage/postgres/migrations.ts';
import { PAGES } from '../../src/storage/postgres/pet-reads.ts';
import { toPet, type PetRow, type PetStatus } from '../../src/storage/pets.ts';
import { startPostgres } from '../../test/support/postgres.ts';
import { readStatFields } from '../processes.ts';
import { median } from '../report.ts';
import { STATUS_OF_N } from '../seed.ts';

const BATCH = 45;
const ROUNDS = 5;
const COLUMNS = 'id, name, category_id::text AS category_id, status, version';
const ROWS_OF_PAGES = `SELECT q.ord, p.* FROM unnest($1::bigint[], $2::text[], $3::integer[]) WITH ORDINALITY AS q(after_id, status, lim, ord)
  CROSS JOIN LATERAL ((SELECT ${COLUMNS} FROM pets WHERE q.status IS NULL AND id > q.after_id ORDER BY id LIMIT q.lim)
    UNION ALL (SELECT ${COLUMNS} FROM pets WHERE q.status IS NOT NULL AND status = q.status AND id > q.after_id ORDER BY status, id LIMIT q.lim)) AS p
  ORDER BY q.ord, p.id`;

/** User and system ticks (1/100 s) of a process so far. */
function ticks(pid: number): { user: number; system: number } {
  const fields = readStatFields(`/proc/${pid}/stat`)!;
  return { user: Number(fields[11]), system: Number(fields[12]) };
}

/** PostgreSQL's user µs and both sides' µs per unit of `work`, `calls` times after a warm-up. */
async function measure(sql: PostgresSql, units: number, calls: number, work: () => Promise<unknown>): Promise<{ pgUser: number; pg: number; client: number }> {
  const [{ pid }] = (await sql`SELECT pg_backend_pid() AS pid`) as unknown as [{ pid: number }];
  for (let i = 0; i < 30; i++) await work();
  const before = ticks(pid);
  const cpu = process.cpuUsage();
  for (let i = 0; i < calls; i++) await work();
  const after = ticks(pid);
  const client = process.cpuUsage(cpu);
  const per = calls * units;
  return { pgUser: ((after.user - before.user) * 1e4) / per, pg: ((after.user + after.system - before.user - before.system) * 1e4) / per, client: (client.user + client.system) / per };
}

const cluster = await startPostgres();
try {
  const open = async (migrations: readonly string[]) => {
    const sql = await connectPostgres(await cluster.createDatabase(), { poolSize: 1 });
    await migratePostgres(sql, migrations);
    await sql.unsafe(`INSERT INTO pets (name, category_id, status) SELECT 'Pet ' || n, 1 + (n * 7) % 40, ${STATUS_OF_N} FROM generate_series(1, 1000) AS n`);
    await sql.unsafe('ANALYZE');
    return sql;
  };
  const [version2, latest] = [await open(MIGRATIONS.slice(0, 3)), await open(MIGRATIONS)];

  const callers = Array.from({ length: BATCH }, () => 'key:bench');
  const limits = [Array.from({ length: BATCH }, () => 10_000_000), Array.from({ length: BATCH }, () => 100_000_000)];
  let now = Date.now();
  const take = (sql: PostgresSql) => () => sql.unsafe(
    'SELECT ord, minute_units::text, day_units::text, updated_at::text, code, retry_after FROM take_tokens($1::text[], $2::bigint[], $3::bigint[], $4::bigint, 30, 900000, 100000)',
    [callers, ...limits, now++], { prepare: true });
  const takes: Record<string, number[]> = { 'version 2': [], latest: [] };
  for (let round = 0; round < ROUNDS; round++) {
    takes['version 2']!.push((await measure(version2, 1, 300, take(version2))).pgUser);
    takes.latest!.push((await measure(latest, 1, 300, take(latest))).pgUser);
  }
  for (const [name, values] of Object.entries(takes)) process.stdout.write(`take_tokens ${name}: PostgreSQL ${median(values).toFixed(0)} us of user CPU per call of ${BATCH} takes of one key\n`);

  const after = Array.from({ length: BATCH }, (_, i) => String((i * 13) % 900));
  const statuses = Array.from({ length: BATCH }, (_, i) => (i % 5 === 0 ? 'sold' : null));
  const rows = Array.from({ length: BATCH }, () => 21);
  const fromJson = ([id, name, categoryId, status, version]: [number, string, string, PetStatus, number]) => ({ id, name, categoryId: BigInt(categoryId), status, version });
  const forms: Record<string, () => Promise<unknown>> = {
    'a row per pet': async () => (await latest.unsafe<(PetRow & { ord: string })[]>(ROWS_OF_PAGES, [after, statuses, rows], { prepare: true })).map(toPet),
    'one JSON text': async () => (await latest.unsafe<{ pets: string | null }[]>(PAGES, [after, statuses, rows], { prepare: true }))
      .map((row) => (JSON.parse(row.pets ?? '[]') as Parameters<typeof fromJson>[0][]).map(fromJson)),
  };
  const results: Record<string, { pg: number[]; client: number[] }> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, form] of Object.entries(forms)) {
      const { pg, client } = await measure(latest, BATCH, 300, form);
      (results[name] ??= { pg: [], client: [] }).pg.push(pg);
      results[name]!.client.push(client);
    }
  }
  for (const [name, { pg, client }] of Object.entries(results)) {
    process.stdout.write(`a page of 21 pets, ${name}: PostgreSQL ${median(pg).toFixed(1)} us, the service ${median(client).toFixed(1)} us\n`);
  }
  await Promise.all([version2.end(), latest.end()]);
} finally {
  cluster.remove();
}
