/**
 * The bench's timed starts (bench/compare.ts): the server it keeps for the loads must find in the
 * compile cache every module the loads use, as a server restarted after an earlier run does;
 * otherwise it loads Node's TypeScript stripper during the loads, and its peak memory measures that.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { timedStarts } from '../../bench/compare.ts';
import { startService, stopServer, type BenchContext } from '../../bench/context.ts';
import { checkWorkloads } from '../../bench/measure.ts';
import { parseBenchOptions } from '../../bench/options.ts';
import type { ServerProcess } from '../../bench/processes.ts';
import { seedDatabase } from '../../bench/seed.ts';
import { buildWorkloads } from '../../bench/workloads.ts';

const PETS = 300;

/** A bench context on a seeded database of its own, its compile cache empty; its servers stopped after `t`. */
function benchContext(t: { after(fn: () => unknown): void }): { context: BenchContext; check: (server: ServerProcess) => Promise<void>; cacheEntries: () => number } {
  const workDir = mkdtempSync(join(tmpdir(), 'bench-starts-'));
  const path = join(workDir, 'pets.db');
  const seeded = seedDatabase(path, PETS);
  const context: BenchContext = {
    options: parseBenchOptions([]),
    cpus: [],
    workDir,
    cpuGroup: null,
    database: { path, key: seeded.key },
    children: [],
    quiet: async () => {},
    progress: () => {},
  };
  t.after(async () => {
    await Promise.all([...context.children].map((server) => stopServer(context, server)));
    rmSync(workDir, { recursive: true, force: true });
  });
  const workloads = buildWorkloads({ pets: PETS, deepSoldAfterId: seeded.deepSoldAfterId });
  const check = (server: ServerProcess) => checkWorkloads(server.url, workloads, `Bearer ${seeded.key}`);
  // serviceEnv's NODE_COMPILE_CACHE; Node writes what a process compiled there when it exits.
  const cacheEntries = () => readdirSync(join(workDir, 'compile-cache'), { recursive: true }).length;
  return { context, check, cacheEntries };
}

/** How many compile cache entries the kept server adds by answering every workload's requests, then exiting. */
async function addedByTheKeptServer(t: { after(fn: () => unknown): void }, primed: boolean): Promise<number> {
  const { context, check, cacheEntries } = benchContext(t);
  const start = () => startService(context, 50, { DATABASE_PATH: context.database.path }, null);
  const { server, starts } = await timedStarts(context, start, primed ? check : undefined);
  assert.equal(starts.length, 5);
  const before = cacheEntries();
  await check(server);
  assert.equal(await stopServer(context, server), 0);
  return cacheEntries() - before;
}

test('the bench keeps a server that compiles nothing its loads use: the first start answers every workload once', async (t) => {
  assert.equal(await addedByTheKeptServer(t, true), 0);
  // The control: without it, the kept server compiles the write paths (and loads the stripper).
  assert.ok(await addedByTheKeptServer(t, false) > 0);
});
