/**
 * `npm run bench`: performance measured on 127.0.0.1 with wrk, a load generator that is never
 * the limit (`npm run bench -- --help` lists what it can run).
 *
 * 1. Seeds a SQLite file (N pets, one enterprise key whose limits never bind).
 * 2. By default, the comparison with a bare node:http baseline (bench/compare.ts); with --cores or
 *    --scale-out, the service alone in each configuration they ask for (bench/scaling.ts).
 * 3. Prints one text report and writes results/latest.json. Exits 1 when a measurement is not
 *    valid (errors, non-2xx answers, an unclean exit) or not usable (the generator at its limit).
 *
 * Every step has a time limit, and the whole run a deadline derived from its options.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, release, tmpdir, totalmem } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { runCompare } from './compare.ts';
import type { BenchContext } from './context.ts';
import { allowedCpus, createCpuQuotaGroup } from './cpu.ts';
import { quietWaiter } from './measure.ts';
import { parseBenchOptions, SCALING_WORKLOADS, USAGE, type BenchOptions } from './options.ts';
import { formatText } from './report.ts';
import { configurationsFor, formatScaling, runScaling } from './scaling.ts';
import { seedDatabase } from './seed.ts';
import { buildWorkloads, WORKLOAD_NAMES } from './workloads.ts';
import { requireWrk } from './wrk.ts';

const progress = (text: string) => process.stderr.write(`${text}\n`);

let options: BenchOptions;
try {
  options = parseBenchOptions(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n\n${USAGE}`);
  process.exit(2);
}
if (options.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}
requireWrk('npm run bench');

const configurations = configurationsFor(options);
const compare = configurations.length === 0;
const workloadNames = options.only ?? (compare ? WORKLOAD_NAMES : SCALING_WORKLOADS);
const workDir = mkdtempSync(join(tmpdir(), 'pets-bench-'));
// --cpu-quota: the servers' cgroup, made before they start and removed once they have stopped.
const cpuGroup = options.cpuQuota === null ? null : createCpuQuotaGroup(options.cpuQuota);
const context: BenchContext = {
  options, cpus: allowedCpus(), workDir, cpuGroup: cpuGroup?.dir ?? null, database: { path: join(workDir, 'pets.db'), key: '' },
  children: [], progress, quiet: quietWaiter(options.quietWaitSeconds),
};

/** Removes the temporary files and the cgroup of --cpu-quota, once its servers are gone (a group with processes stays). */
function cleanUp(): void {
  rmSync(workDir, { recursive: true, force: true });
  try {
    cpuGroup?.remove();
  } catch {
    progress(`could not remove the cgroup ${cpuGroup?.dir}: remove it with rmdir once its processes are gone`);
  }
}

/** Ends the run at once: servers killed, temporary files removed. */
function abort(message: string, code = 1): never {
  progress(message);
  for (const child of context.children) child.kill();
  cleanUp();
  process.exit(code);
}
process.on('SIGINT', () => abort('interrupted', 130));
process.on('SIGTERM', () => abort('terminated', 143));

// The loads as planned (two servers per workload in the comparison, one per configuration
// otherwise); at worst, every round measured again for noise (twice at most in a comparison's
// workload, three times in the others), and every wait for quiet. Starts, seeding (about 2 s per
// million pets) and stops take well under two minutes.
const [servers, measured, again] = compare ? [2, options.rounds, 2] : [configurations.length, 1, 3];
const loadSeconds = workloadNames.length * servers * (options.warmup + measured * options.seconds);
const budgetMs = (workloadNames.length * servers * (options.warmup + again * measured * options.seconds) + options.quietWaitSeconds + 120 + options.pets / 100_000) * 1250;
setTimeout(() => abort(`the bench exceeded its time limit of ${Math.round(budgetMs / 1000)} s`), budgetMs).unref();

try {
  await main();
} catch (error) {
  abort(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
}

async function main(): Promise<void> {
  const startedAt = new Date();
  progress(`bench: ${compare ? 'the service against the baseline' : configurations.length + ' configurations'}; ${workloadNames.join(', ')}; about ${Math.ceil(loadSeconds / 60)} min of load`);
  progress(`seeding ${options.pets.toLocaleString('en-US')} pets ...`);
  const seeded = seedDatabase(context.database.path, options.pets);
  context.database = { ...context.database, key: seeded.key };
  const workloads = buildWorkloads({ pets: options.pets, deepSoldAfterId: seeded.deepSoldAfterId }, workloadNames);

  const comparison = compare ? await runCompare(context, workloads) : null;
  const scaling = compare ? [] : await runScaling(context, workloads, configurations);
  let text = comparison === null ? formatScaling(scaling) : formatText(comparison);
  const machine = { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', memoryBytes: totalmem(), kernel: release(), node: process.version };
  text += `\nMachine: ${machine.cpus} x ${machine.cpuModel}, ${(machine.memoryBytes / 2 ** 30).toFixed(0)} GiB, Linux ${machine.kernel}, Node ${machine.node}; ` +
    `${options.pets.toLocaleString('en-US')} pets seeded in ${seeded.seedMs.toFixed(0)} ms\n`;
  process.stdout.write(`\n${text}`);

  const command = ['npm run bench', ...(process.argv.length > 2 ? ['--', ...process.argv.slice(2)] : [])].join(' ');
  const results = options.out ?? resolve(import.meta.dirname, 'results');
  mkdirSync(results, { recursive: true });
  writeFileSync(join(results, 'latest.json'), `${JSON.stringify({ startedAt: startedAt.toISOString(), finishedAt: new Date().toISOString(), command, machine, options, comparison, scaling }, null, 2)}\n`);
  progress(`\nwrote ${relative(process.cwd(), join(results, 'latest.json'))}`);
  cleanUp();

  // Valid and usable, or say what is not.
  const problems = [
    ...(comparison?.workloads.flatMap((workload) => workload.problems.map((problem) => `${workload.name}: ${problem}`)) ?? []),
    ...(comparison !== null && (comparison.servers.service.exitCode !== 0 || comparison.servers.baseline.exitCode !== 0) ? ['a server did not exit cleanly'] : []),
    ...scaling.filter((row) => row.result.non2xx + row.result.errors > 0).map((row) => `${row.workload}: ${row.result.non2xx} non-2xx answers, ${row.result.errors} connection errors`),
  ];
  if (problems.length > 0) progress(`some measurements are invalid: ${problems.join('; ')}`);
  const unusable = comparison?.workloads.filter((workload) => workload.unusableRounds > 0).map((workload) => workload.name) ?? [];
  if (unusable.length > 0) progress(`UNUSABLE: the generator was near its limit in some rounds of ${unusable.join(', ')}: those figures measure the generator, not the server`);
  process.exitCode = problems.length === 0 && unusable.length === 0 ? 0 : 1;
}
