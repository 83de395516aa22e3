// Experiment: creates per second with and without group commit, at 1 and 50 clients (docs/decisions/0001-durable-writes-and-group-commit.md).
/**
 * Creates per second with and without group commit, at 1 and 50 concurrent clients.
 *
 *   node_modules/.bin/node bench/experiments/creates.ts [--seconds 5] [--rounds 3] [--dir PATH]
 *
 * For each setting the service runs in a child process (so the client does not share its event
 * loop or core) on a fresh file database in `--dir` (default: the OS temporary directory, which
 * must be a real disk for the fsyncs to mean anything), with WAL and synchronous=FULL as in
 * production. Clients are node:http loops over a keep-alive Agent on loopback, each sending its
 * next POST /v1/pets as soon as the previous one is answered. Access logs are off so the write
 * path is what is measured. Each run lasts `--seconds`; nothing here runs without bound.
 * Settings alternate within each of `--rounds` rounds, so that drift of a shared machine (other
 * tenants, disk cache) falls on both alike; the table shows the median and the range.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from '../report.ts';

interface Ready {
  type: 'ready';
  url: string;
  key: string;
}

interface Stats {
  type: 'stats';
  transactions: number;
  creates: number;
}

if (process.argv[2] === 'serve') await serve(process.argv[3] === 'on', process.argv[4]!);
else await main();

/** The child: the real service over a file database, reporting transactions over IPC. */
async function serve(groupCommit: boolean, databasePath: string): Promise<void> {
  const { openDatabase } = await import('../../src/storage/sqlite/database.ts');
  const { createLogger } = await import('../../src/http/access-log.ts');
  const { createPetsStore } = await import('../../src/storage/sqlite/pets-store.ts');
  const { createService } = await import('../../src/service/service.ts');
  const { openStores } = await import('../../src/storage/sqlite/stores.ts');
  const { systemClock } = await import('../../src/clock.ts');
  const db = openDatabase(databasePath);
  const real = createPetsStore(db);
  let transactions = 0;
  let creates = 0;
  const pets = {
    ...real,
    insertMany: (creations: Parameters<typeof real.insertMany>[0]) => {
      const stored = real.insertMany(creations);
      transactions++;
      creates += creations.length;
      return stored;
    },
  };
  const logger = createLogger({ level: 'silent', clock: systemClock, write: () => {} });
  const service = createService({
    config: { appEnv: 'development', trustProxy: false, rateLimitBanThreshold: 30, rateLimitBanSeconds: 900, publicBaseUrl: null, stagingBaseUrl: null },
    stores: openStores(db, { appEnv: 'development', clock: systemClock, banThreshold: 30, banSeconds: 900 }), clock: systemClock, logger, groupCommit, overrides: { pets },
  });
  const { key } = service.stores.keys.create({ plan: 'enterprise', perMinute: 1_000_000_000, perDay: 1_000_000_000, label: 'bench', now: Date.now() });
  await new Promise<void>((resolve) => service.server.listen(0, '127.0.0.1', resolve));
  const { port } = service.server.address() as AddressInfo;
  process.on('message', (message: { type: string }) => {
    if (message.type === 'stats') {
      process.send!({ type: 'stats', transactions, creates } satisfies Stats);
      transactions = 0;
      creates = 0;
    }
  });
  process.on('disconnect', () => {
    service.server.closeAllConnections();
    service.server.close(() => {
      db.close();
      process.exit(0);
    });
  });
  process.send!({ type: 'ready', url: `http://127.0.0.1:${port}`, key } satisfies Ready);
}

/** The parent: one child per setting and round, two concurrency levels each, then a table. */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '3' }, dir: { type: 'string', default: tmpdir() } },
  });
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  if (!(seconds > 0 && seconds <= 120)) throw new Error('--seconds must be from 1 to 120');
  if (!(Number.isInteger(rounds) && rounds >= 1 && rounds <= 10)) throw new Error('--rounds must be from 1 to 10');
  const cells = new Map<string, { rates: number[]; perTransaction: number[] }>();
  for (let round = 1; round <= rounds; round++) {
    for (const groupCommit of [true, false]) {
      const dir = mkdtempSync(join(values.dir, 'pets-bench-'));
      const child = fork(new URL(import.meta.url).pathname, ['serve', groupCommit ? 'on' : 'off', join(dir, 'pets.db')], { stdio: 'inherit' });
      try {
        const [ready] = (await once(child, 'message')) as [Ready];
        for (const clients of [1, 50]) {
          await run(ready, clients, 0.5); // warm up: JIT, connections, WAL file
          await stats(child);
          const created = await run(ready, clients, seconds);
          const { transactions, creates } = await stats(child);
          const label = `| ${groupCommit ? 'on' : 'off'} | ${clients} |`;
          const cell = cells.get(label) ?? { rates: [], perTransaction: [] };
          cell.rates.push(created / seconds);
          cell.perTransaction.push(creates / transactions);
          cells.set(label, cell);
          process.stderr.write(`round ${round}, group commit ${groupCommit ? 'on' : 'off'}, ${clients} clients: ${(created / seconds).toFixed(0)} creates/s\n`);
        }
      } finally {
        child.disconnect();
        await once(child, 'exit');
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }
  console.log(`${rounds} rounds of ${seconds} s per cell, ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}, database in ${values.dir}\n`);
  console.log('| group commit | clients | creates/s (median) | range | creates per transaction (median) |');
  console.log('|---|---|---|---|---|');
  for (const [label, { rates, perTransaction }] of cells) {
    console.log(`${label} ${median(rates).toFixed(0)} | ${Math.min(...rates).toFixed(0)}–${Math.max(...rates).toFixed(0)} | ${median(perTransaction).toFixed(1)} |`);
  }
}

function stats(child: ReturnType<typeof fork>): Promise<Stats> {
  child.send({ type: 'stats' });
  return once(child, 'message').then(([message]) => message as Stats);
}

/** `clients` loops of sequential creates for `seconds`; resolves with the number of 201s. */
async function run(ready: Ready, clients: number, seconds: number): Promise<number> {
  const agent = new Agent({ keepAlive: true, maxSockets: clients });
  const end = performance.now() + seconds * 1000;
  let created = 0;
  const loop = async (client: number) => {
    for (let i = 0; performance.now() < end; i++) {
      const status = await post(ready, agent, `{"name":"bench ${client}-${i}","categoryId":${client + 1}}`);
      if (status !== 201) throw new Error(`create answered ${status}`);
      created++;
    }
  };
  await Promise.all(Array.from({ length: clients }, (_, client) => loop(client)));
  agent.destroy();
  return created;
}

function post(ready: Ready, agent: Agent, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(`${ready.url}/v1/pets`, {
      method: 'POST',
      agent,
      headers: { authorization: `Bearer ${ready.key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end(body);
  });
}
