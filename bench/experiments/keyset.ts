// Experiment: keyset pagination's last page costs what its first does (0.97 and 1.00 at 10,000 pets; docs/performance.md).
/**
 *   node_modules/.bin/node bench/experiments/keyset.ts [PETS]
 *
 * "Cost that does not grow with the data": the first page of a traversal against
 * the page at its end, same limit, timed twice: over HTTP against the running service (one
 * keep-alive connection, requests one at a time, first and last alternating so that drift
 * hits both alike), and in this process against the pets store alone, where the SQL is the
 * only difference and HTTP noise cannot hide it. test/storage/sqlite/pets-store.test.ts checks
 * the query plan that makes it so.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { encodeCursor } from '../../src/api/cursor.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';
import type { PetStatus } from '../../src/storage/pets.ts';
import { startServer } from '../processes.ts';
import { idBeforeLast, seedDatabase } from '../seed.ts';
import { median } from '../report.ts';

export interface KeysetCase {
  label: string;
  firstPath: string;
  lastPath: string;
  /** Median time of one request, microseconds. */
  http: { firstUs: number; lastUs: number; ratio: number };
  /** Median time of the store's `list` call behind the page, microseconds. */
  store: { firstUs: number; lastUs: number; ratio: number };
}

export interface KeysetResult {
  pets: number;
  limit: number;
  samples: number;
  cases: KeysetCase[];
}

export interface KeysetOptions {
  url: string;
  key: string;
  databasePath: string;
  pets: number;
  limit?: number;
  /** Requests per page over HTTP (store calls: 4 times as many). */
  samples?: number;
}

/** Measures the unfiltered and the `status=sold` traversals. */
export async function checkKeyset({ url, key, databasePath, pets, limit = 20, samples = 500 }: KeysetOptions): Promise<KeysetResult> {
  const db = new DatabaseSync(databasePath, { readOnly: true });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    const store = createPetsStore(db);
    const cases: KeysetCase[] = [];
    for (const status of [undefined, 'sold'] as const) {
      const lastAfter = idBeforeLast(db, limit, status);
      const path = (afterId: number) =>
        `/v1/pets?limit=${limit}${status ? `&status=${status}` : ''}${afterId > 0 ? `&cursor=${encodeCursor(afterId)}` : ''}`;
      const firstPath = path(0);
      const lastPath = path(lastAfter);
      const headers = { authorization: `Bearer ${key}` };
      const [firstHttp, lastHttp] = await alternate(samples, (which) => timeRequest(agent, url + (which === 0 ? firstPath : lastPath), headers));
      // Exactly what GET /v1/pets asks of the store: one row more than the limit.
      const list = (afterId: number) => () => {
        store.list({ afterId: BigInt(afterId), status: status as PetStatus | undefined, limit: limit + 1 });
      };
      const [firstStore, lastStore] = await alternate(samples * 4, (which) => timeCall(which === 0 ? list(0) : list(lastAfter)));
      cases.push({
        label: status ? `status=${status}` : 'all pets',
        firstPath,
        lastPath,
        http: { firstUs: firstHttp, lastUs: lastHttp, ratio: lastHttp / firstHttp },
        store: { firstUs: firstStore, lastUs: lastStore, ratio: lastStore / firstStore },
      });
    }
    return { pets, limit, samples, cases };
  } finally {
    agent.destroy();
    db.close();
  }
}

/** Runs `measure(0)` and `measure(1)` alternately, a tenth of `samples` as warm-up; medians. */
async function alternate(samples: number, measure: (which: 0 | 1) => number | Promise<number>): Promise<[number, number]> {
  const times: [number[], number[]] = [[], []];
  const warmup = Math.ceil(samples / 10);
  for (let i = 0; i < warmup + samples; i++) {
    for (const which of [0, 1] as const) {
      const us = await measure(which);
      if (i >= warmup) times[which].push(us);
    }
  }
  return [median(times[0]), median(times[1])];
}

function timeCall(call: () => void): number {
  const started = performance.now();
  call();
  return (performance.now() - started) * 1000;
}

function timeRequest(agent: Agent, url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = httpRequest(url, { agent, headers, timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => {
        if (res.statusCode !== 200) reject(new Error(`GET ${url} answered ${res.statusCode}`));
        else resolve((performance.now() - started) * 1000);
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} in time`)));
    req.on('error', reject);
    req.end();
  });
}

if (import.meta.main) {
  const pets = Number(process.argv[2] ?? 10_000);
  const dir = mkdtempSync(join(tmpdir(), 'pets-keyset-'));
  const databasePath = join(dir, 'pets.db');
  const { key } = seedDatabase(databasePath, pets);
  const service = await startServer({
    name: 'service',
    args: [join(import.meta.dirname, '..', '..', 'src', 'main.ts')],
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', APP_ENV: 'production', LOG_LEVEL: 'info', DATABASE_PATH: databasePath },
    timeoutMs: 10_000,
  });
  try {
    for (const keysetCase of (await checkKeyset({ url: service.url, key, databasePath, pets })).cases) {
      process.stdout.write(`${keysetCase.label}: last page / first page ${keysetCase.http.ratio.toFixed(2)} over HTTP, ${keysetCase.store.ratio.toFixed(2)} in the store\n`);
    }
  } finally {
    await service.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
