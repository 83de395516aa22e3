/**
 * `npm run bench:events`: what the event log and its stream cost, on a SQLite file.
 *
 * 1. Writes with and without the log: the `create` workload (wrk, durable POST /v1/pets) against
 *    this tree's server, and against a copy of this tree whose write executor does not append
 *    the events (the one line every write passes, removed in the copy: the service has no switch
 *    to turn its log off). Each round measures both, one after the other, in turns; the cost is
 *    the median over the rounds of each round's ratio, so that a drift of the machine's load
 *    between rounds cancels out.
 * 2. Commit to client with 1,000 streams open (200 keys, 5 streams each): one writer creates a
 *    pet every 50 ms; every stream records when each pet's event arrives, against the moment the
 *    write's 201 came back (negative: the event came first).
 *
 * Run it alone on the machine (`flock /tmp/bench.lock npm run bench:events`); it prints the figures.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../src/storage/sqlite/database.ts';
import { createKeysStore } from '../src/storage/sqlite/keys-store.ts';
import { fetchOnce, startServer, type ServerProcess } from './processes.ts';
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
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

let work = '';
const env = (path: string) => ({ PATH: process.env.PATH ?? '', APP_ENV: 'production', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', DATABASE_PATH: path, MAX_CONNECTIONS_PER_ADDRESS: '1024' });
const start = (name: string, root: string, path: string) => startServer({ name, args: [join(root, 'src/main.ts')], env: env(path), timeoutMs: 30_000 });

/** The write executor's source without its one line that appends the events (a test holds it to the source). */
export function withoutEventLog(executorSource: string): string {
  const append = /\n\s*if \(op in LOGGED\) appendEvents\([^\n]*\n/;
  if (!append.test(executorSource)) throw new Error('the executor no longer appends the events where this bench expects: update withoutEventLog');
  return executorSource.replace(append, '\n');
}

/** This tree, copied, with the executor's append of the events removed. */
function treeWithoutLog(): string {
  const copy = join(work, 'without-log');
  cpSync(join(ROOT, 'src'), join(copy, 'src'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(copy, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(copy, 'node_modules'));
  const executor = join(copy, 'src/storage/sqlite/writer/executor.ts');
  writeFileSync(executor, withoutEventLog(readFileSync(executor, 'utf8')));
  return copy;
}

async function writeThroughput(): Promise<void> {
  const trees = { with: ROOT, without: treeWithoutLog() };
  const rates: Record<keyof typeof trees, number[]> = { with: [], without: [] };
  const [create] = buildWorkloads({ pets: 10_000, deepSoldAfterId: 0 }, ['create']);
  for (let round = 0; round < ROUNDS; round++) {
    // Each round in the other order, so that a drift of the machine weighs on both alike.
    for (const name of round % 2 === 0 ? (['with', 'without'] as const) : (['without', 'with'] as const)) {
      const path = join(work, `${name}-${round}.db`);
      const { key } = seedDatabase(path, 10_000);
      const server = await start(`service ${name} the log`, trees[name], path);
      const run = { url: server.url, script: create!.wrk.script, args: create!.wrk.args, threads: 1, connections: CONNECTIONS };
      await runWrk({ ...run, seconds: 2 }, null, `Bearer ${key}`);
      const result = await runWrk({ ...run, seconds: SECONDS }, null, `Bearer ${key}`);
      await server.stop();
      if (result.non2xx + result.errors > 0) throw new Error(`${name}: ${result.non2xx} non-2xx, ${result.errors} errors`);
      rates[name].push(result.responses / result.durationS);
      progress(`round ${round + 1}, ${name} the log: ${(result.responses / result.durationS).toFixed(0)} creates/s, p99 ${result.latencyMs.p99.toFixed(1)} ms`);
    }
  }
  const ratio = median(rates.with.map((rate, round) => rate / rates.without[round]!));
  console.log(`creates/s (medians of ${ROUNDS} rounds, ${CONNECTIONS} connections): ${median(rates.without).toFixed(0)} without the log, ${median(rates.with).toFixed(0)} with it; ` +
    `median ratio of a round ${ratio.toFixed(3)}: the log costs ${((1 - ratio) * 100).toFixed(1)} % (load average ${loadavg()[0]!.toFixed(1)} on ${availableParallelism()} cores)`);
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
  const server: ServerProcess = await start('service', ROOT, path);
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
    await streamLatency();
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
