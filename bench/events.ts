/**
 * `npm run bench:events`: what the event log and its stream cost, on a SQLite file;
 * `npm run bench:events -- --postgres`: what the log costs writes on PostgreSQL (part 1 only).
 *
 * 1. Writes with and without the log: the `create` workload (wrk, durable POST /v1/pets) and a
 *    change workload (durable PATCH /v1/pets/{id}, each a real change of status) against this
 *    tree's server, and against a copy of this tree that does not append the events (the lines
 *    of LOG_LINES, replaced in the copy: the service has no switch to turn its log off). Each
 *    round measures both, one after the other, in turns, each on a freshly seeded database (on
 *    PostgreSQL a throwaway cluster, bench/postgres.ts); the cost is the median over the rounds
 *    of each round's ratio, so that a drift of the machine's load between rounds cancels out.
 * 2. Commit to client with 1,000 streams open (200 keys, 5 streams each): one writer creates a
 *    pet every 50 ms; every stream records when each pet's event arrives, against the moment the
 *    write's 201 came back (negative: the event came first).
 *
 * Run it alone on the machine (`flock /tmp/bench.lock npm run bench:events [-- --postgres]`); it prints the figures.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../src/storage/sqlite/database.ts';
import { createKeysStore } from '../src/storage/sqlite/keys-store.ts';
import { serviceEnv } from './context.ts';
import { fetchOnce, startServer, type ServerProcess } from './processes.ts';
import { startBenchPostgres } from './postgres.ts';
import { median } from './report.ts';
import { BENCH_KEY_LIMITS, seedDatabase } from './seed.ts';
import { buildWorkloads } from './workloads.ts';
import { runWrk } from './wrk.ts';

const ROOT = join(import.meta.dirname, '..');
const ROUNDS = 7;
const SECONDS = 5;
const CONNECTIONS = 32;
const STREAMS = 1000;
const WRITES = 300;
const progress = (text: string) => process.stderr.write(`${text}\n`);
const POSTGRES = process.argv.includes('--postgres');
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

let work = '';
// The bench's settings for the service, with room for every stream's connection from 127.0.0.1.
const start = (name: string, root: string, database: Record<string, string>) =>
  startServer({ name, args: [join(root, 'src/main.ts')], env: serviceEnv(work, STREAMS, database), timeoutMs: 30_000 });

/**
 * The lines that append events, and what the copy without the log has instead (a test holds them
 * to the source): SQLite's executor, which every write passes; on PostgreSQL the append of every
 * logged transaction, and the creations' statement that inserts their events itself.
 */
export const LOG_LINES: readonly { file: string; line: RegExp; instead: string }[] = [
  { file: 'src/storage/sqlite/writer/executor.ts', line: /\n\s*appendEvents\(requests\.flatMap\([^\n]*\n/, instead: '\n' },
  { file: 'src/storage/postgres/event-log.ts', line: /\n\s*await appendEvents\(tx, [^\n]*\n/, instead: '\n' },
  { file: 'src/storage/postgres/pet-creations.ts', line: /insertPets\(sql, creations, \{ logged: true \}\)/, instead: 'insertPets(sql, creations)' },
];

/** `source`, the text of `file`, without its line of LOG_LINES. */
export function withoutEventLog(file: string, source: string): string {
  const { line, instead } = LOG_LINES.find((entry) => entry.file === file)!;
  if (!line.test(source)) throw new Error(`${file} no longer appends the events where this bench expects: update LOG_LINES`);
  return source.replace(line, instead);
}

/** This tree, copied, without the lines that append the events. */
function treeWithoutLog(): string {
  const copy = join(work, 'without-log');
  cpSync(join(ROOT, 'src'), join(copy, 'src'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(copy, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  for (const { file } of LOG_LINES) writeFileSync(join(copy, file), withoutEventLog(file, readFileSync(join(copy, file), 'utf8')));
  return copy;
}

/** A freshly seeded database of 10,000 pets: the server's settings for it, the bench key, and its removal. */
async function seeded(name: string): Promise<{ database: Record<string, string>; key: string; remove(): Promise<void> }> {
  if (POSTGRES) {
    const postgres = await startBenchPostgres(10_000);
    return { database: { DATABASE_URL: postgres.url }, key: postgres.key, remove: () => postgres.remove() };
  }
  const path = join(work, `${name}.db`);
  return { database: { DATABASE_PATH: path }, key: seedDatabase(path, 10_000).key, remove: async () => rmSync(path, { force: true }) };
}

/**
 * Changes of 512 pets, all to sold, then all back to available: 512 requests apart, a pet's
 * previous change has been answered, so each is a real change (the seed's status of ids 3k + 2 is
 * pending), which the log records.
 */
const CHANGED = Array.from({ length: 512 }, (_, k) => 18 * k + 2);
const CHANGES = ['sold', 'available'].flatMap((status) => CHANGED.map((id) => `PATCH /v1/pets/${id} {"status":"${status}"}`));

async function writeThroughput(): Promise<void> {
  const trees = { with: ROOT, without: treeWithoutLog() };
  const [create] = buildWorkloads({ pets: 10_000, deepSoldAfterId: 0 }, ['create']);
  const workloads = [{ name: 'creates', script: create!.wrk.script, args: create!.wrk.args }, { name: 'changes', script: 'sequence.lua', args: CHANGES }];
  for (const workload of workloads) {
    const rates: Record<keyof typeof trees, number[]> = { with: [], without: [] };
    for (let round = 0; round < ROUNDS; round++) {
      // Each round in the other order, so that a drift of the machine weighs on both alike.
      for (const name of round % 2 === 0 ? (['with', 'without'] as const) : (['without', 'with'] as const)) {
        const database = await seeded(`${name}-${round}`);
        const server = await start(`service ${name} the log`, trees[name], database.database);
        const run = { url: server.url, script: workload.script, args: workload.args, threads: 1, connections: CONNECTIONS };
        await runWrk({ ...run, seconds: 2 }, null, `Bearer ${database.key}`);
        const result = await runWrk({ ...run, seconds: SECONDS }, null, `Bearer ${database.key}`);
        await server.stop();
        await database.remove();
        if (result.non2xx + result.errors > 0) throw new Error(`${name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
        rates[name].push(result.responses / result.durationS);
        progress(`${workload.name}, round ${round + 1}, ${name} the log: ${(result.responses / result.durationS).toFixed(0)}/s, p99 ${result.latencyMs.p99.toFixed(1)} ms`);
      }
    }
    const ratios = rates.with.map((rate, round) => rate / rates.without[round]!);
    const ratio = median(ratios);
    console.log(`${POSTGRES ? 'PostgreSQL' : 'SQLite'} ${workload.name}/s (medians of ${ROUNDS} rounds, ${CONNECTIONS} connections): ${median(rates.without).toFixed(0)} without the log, ${median(rates.with).toFixed(0)} with it; ` +
      `median ratio of a round ${ratio.toFixed(3)} (${Math.min(...ratios).toFixed(2)} to ${Math.max(...ratios).toFixed(2)}): the log costs ${((1 - ratio) * 100).toFixed(1)} % (load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores)`);
  }
}

/** One stream over its own connection: calls `arrived(petId)` for each pet.created it reads. */
function openStream(url: string, key: string, agent: Agent, arrived: (petId: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    request(`${url}/v1/events?types=pet.created`, { agent, headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`a stream answered ${res.statusCode}`));
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => {
        text += chunk;
        const cut = text.lastIndexOf('\n\n');
        if (cut === -1) return;
        for (const match of text.slice(0, cut).matchAll(/"data":\{"id":(\d+)/g)) arrived(Number(match[1]));
        text = text.slice(cut + 2);
      });
      resolve();
    }).on('error', reject).end();
  });
}

async function streamLatency(): Promise<void> {
  const path = join(work, 'streams.db');
  const { key } = seedDatabase(path, 1000);
  const db = openDatabase(path);
  const keys = createKeysStore(db, { appEnv: 'production' });
  const readers = Array.from({ length: STREAMS / 5 }, () => keys.create({ plan: 'enterprise', ...BENCH_KEY_LIMITS, now: Date.now() }).key);
  db.close();
  const server: ServerProcess = await start('service', ROOT, { DATABASE_PATH: path });
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const answeredAt = new Map<number, number>();
  // Kept until the end: an event may come before its write's answer.
  const arrivals: [number, number][] = [];
  const arrived = (petId: number) => arrivals.push([petId, performance.now()]);
  for (let i = 0; i < STREAMS; i++) await openStream(server.url, readers[Math.floor(i / 5)]!, agent, arrived);
  progress(`${STREAMS} streams open; ${WRITES} creates, one every 50 ms`);
  for (let i = 0; i < WRITES; i++) {
    const sent = performance.now();
    const answer = await fetchOnce(`${server.url}/v1/pets`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"name":"Streamed","categoryId":1}' });
    if (answer.status !== 201) throw new Error(`a create answered ${answer.status}`);
    answeredAt.set((JSON.parse(answer.body) as { id: number }).id, performance.now());
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 50 - (performance.now() - sent))));
  }
  await new Promise((resolve) => setTimeout(resolve, 2000));
  agent.destroy();
  await server.stop();
  const sorted = arrivals.filter(([petId]) => answeredAt.has(petId)).map(([petId, at]) => at - answeredAt.get(petId)!).sort((a, b) => a - b);
  console.log(`commit to client, ${STREAMS} streams: ${sorted.length} of ${WRITES * STREAMS} events received; p50 ${quantile(sorted, 0.5).toFixed(0)} ms, p99 ${quantile(sorted, 0.99).toFixed(0)} ms, max ${sorted.at(-1)!.toFixed(0)} ms after the write's answer`);
}

if (import.meta.main) {
  work = mkdtempSync(join(tmpdir(), 'pets-bench-events-'));
  try {
    await writeThroughput();
    if (!POSTGRES) await streamLatency();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
