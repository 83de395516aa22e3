// Experiment: what the request pipeline's JavaScript costs per cached read, without the kernel (docs/performance.md).
/**
 * `node_modules/.bin/node bench/experiments/pipeline-cost.ts [get|list20|deep]`: the service as
 * main.ts builds it (SQLite, production settings, the access log written to /dev/null), driven
 * through in-memory connections (`stream.duplexPair`: no socket, no system call but the log's and
 * the answer caches' check), 50 connections, each sending its next request from a new callback
 * once it has its answer. Against it, the floor: the same HTTP server (connection caps, parse-error
 * answers) with an app that writes the service's own answer, headers and body, as the bench's
 * baseline does. Each in a child process of its own, alternately, 5 runs of 150,000 requests after
 * 50,000 of warm-up; CPU per request of the whole process, median. The difference is what the
 * pipeline costs: identification, limiting, routing, the handler and its cache, the writer and the
 * access log. `LOG_LEVEL=warn` in the environment turns the access log off, to see its share.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { duplexPair } from 'node:stream';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { DatabaseSync } from 'node:sqlite';
import { median } from '../report.ts';
import { idBeforeLast, seedDatabase } from '../seed.ts';
import { buildWorkloads, type WorkloadName } from '../workloads.ts';

const RUNS = 5;
const REQUESTS = 150_000;
const WARM_UP = 50_000;
const CONNECTIONS = 50;

const [kind, workloadName = 'get'] = process.argv.slice(2) as [string, WorkloadName | undefined];
if (kind !== 'service' && kind !== 'floor') {
  const name = (kind ?? 'get') as WorkloadName;
  const results: Record<string, number[]> = { service: [], floor: [] };
  for (let run = 0; run < RUNS; run++) {
    for (const which of run % 2 === 0 ? ['service', 'floor'] : ['floor', 'service']) {
      const child = spawnSync(process.execPath, ['--max-semi-space-size=8', import.meta.filename, which, name], { encoding: 'utf8', env: process.env });
      if (child.status !== 0) throw new Error(`${which}: ${child.stderr}`);
      results[which]!.push(Number(child.stdout.trim()));
    }
  }
  const [service, floor] = [median(results.service!), median(results.floor!)];
  process.stdout.write(`${name}: the service ${service.toFixed(2)} us of CPU per request, the floor ${floor.toFixed(2)}, the pipeline ${(service - floor).toFixed(2)}\n`);
} else {
  const work = mkdtempSync(join(tmpdir(), 'pipeline-cost-'));
  try {
    process.stdout.write(`${(await measure(kind, workloadName, work)).toFixed(3)}\n`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  process.exit(0);
}

/** CPU µs per request of this process, serving `name` as the service or as the floor. */
async function measure(which: 'service' | 'floor', name: WorkloadName, work: string): Promise<number> {
  const path = join(work, 'pets.db');
  const seeded = seedDatabase(path, 10_000);
  const db = new DatabaseSync(path, { readOnly: true });
  const [workload] = buildWorkloads({ pets: 10_000, deepSoldAfterId: idBeforeLast(db, 40, 'sold') }, [name]);
  db.close();
  const [{ loadConfig }, { systemClock }, { createLogger }, { openServerDatabase }, { openStores }, { createService }, { createHttpServer }] = await Promise.all([
    import('../../src/config.ts'), import('../../src/clock.ts'), import('../../src/http/access-log.ts'), import('../../src/storage/sqlite/database.ts'),
    import('../../src/storage/sqlite/stores.ts'), import('../../src/service/service.ts'), import('../../src/http/server.ts'),
  ]);
  const config = loadConfig({ APP_ENV: 'production', DATABASE_PATH: path, LOG_LEVEL: process.env.LOG_LEVEL ?? 'info', MAX_CONNECTIONS_PER_ADDRESS: '1000' });
  const devNull = openSync('/dev/null', 'w');
  const logger = createLogger({ level: config.logLevel, clock: systemClock, write: (text) => void writeSync(devNull, text) });
  const stores = openStores(openServerDatabase(path, () => {}), { appEnv: 'production', clock: systemClock, banThreshold: config.rateLimitBanThreshold, banSeconds: config.rateLimitBanSeconds });
  const service = createService({ stores, config, clock: systemClock, logger });
  const requests = workload!.sequence.map((request) => `${request.method} ${request.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${seeded.key}\r\n\r\n`);
  let server = service.server;
  if (which === 'floor') {
    // The service's own first answer, replayed: same status line, headers (Date and the
    // connection's own aside) and body.
    const answer = await exchange(server, requests[0]!);
    const [head, body] = [answer.slice(0, answer.indexOf('\r\n\r\n')), answer.slice(answer.indexOf('\r\n\r\n') + 4)];
    const headers = head.split('\r\n').slice(1).map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)] as const)
      .filter(([header]) => !['date', 'connection', 'keep-alive'].includes(header.toLowerCase())).flat();
    server = createHttpServer({ handle: (_req: IncomingMessage, res: ServerResponse) => void res.writeHead(200, headers).end(body), drain() {} }, logger);
  }
  return drive(server, requests);
}

/** One request on a fresh in-memory connection; its raw answer. */
function exchange(server: import('node:http').Server, request: string): Promise<string> {
  const [client, socket] = duplexPair();
  Object.defineProperty(socket, 'remoteAddress', { value: '127.0.0.1' });
  server.emit('connection', socket);
  return new Promise((resolve) => {
    client.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1')));
    client.write(request);
  });
}

/** CPU µs per request over REQUESTS requests after WARM_UP, on CONNECTIONS in-memory connections. */
function drive(server: import('node:http').Server, requests: string[]): Promise<number> {
  let sent = 0;
  let answered = 0;
  let started = process.cpuUsage();
  const { promise, resolve } = Promise.withResolvers<number>();
  for (let c = 0; c < CONNECTIONS; c++) {
    const [client, socket] = duplexPair();
    Object.defineProperty(socket, 'remoteAddress', { value: '127.0.0.1' });
    let next = c;
    const send = () => {
      if (sent++ < WARM_UP + REQUESTS) client.write(requests[next++ % requests.length]!);
    };
    client.on('data', (chunk: Buffer) => {
      if (chunk.toString('latin1', 9, 12) !== '200') throw new Error(`not 200: ${chunk.toString('latin1', 0, 200)}`);
      answered++;
      if (answered === WARM_UP) started = process.cpuUsage();
      if (answered === WARM_UP + REQUESTS) {
        const used = process.cpuUsage(started);
        resolve((used.user + used.system) / REQUESTS);
      }
      // From a new callback, as a socket's next read would be.
      setImmediate(send);
    });
    server.emit('connection', socket);
    setImmediate(send);
  }
  return promise;
}
