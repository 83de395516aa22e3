/**
 * The soak's load generator, run by bench/soak.ts as a child process: a mixed load at a fixed
 * rate with a cap on requests in flight, for a set time, against 127.0.0.1 only. Reports counts
 * by status and code, and client latency, to the parent over IPC.
 *
 * The mix: lists (with cursors), creations, deprecated gets, bad requests of every kind the
 * contract names (invalid JSON, fields, query, path, media type, 413, 405, 404, malformed HTTP),
 * 401s from many client addresses (X-Forwarded-For, trusted by the soak's server), and a free
 * key driven past its limit into 429 rate_limited and then temporarily_banned.
 */
import { connect } from 'node:net';
import { createHistogram } from 'node:perf_hooks';

export interface LoadSettings {
  url: string;
  seconds: number;
  rate: number;
  concurrency: number;
  key: string;
  freeKey: string;
}

export interface LoadReport {
  total: number;
  seconds: number;
  statuses: Record<string, number>;
  codes: Record<string, number>;
  transportErrors: number;
  /** Requests not started because `concurrency` were already in flight. */
  skipped: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
}

interface Outcome {
  status: number;
  code?: string;
}

type Scenario = (settings: LoadSettings) => Promise<Outcome>;

/** 512 client addresses from the documentation ranges (RFC 5737): header text, never dialled. */
const ADDRESSES = Array.from({ length: 512 }, (_, i) => `${i < 256 ? '198.51.100' : '203.0.113'}.${i % 256}`);
const pick = <T>(list: readonly T[]): T => list[Math.floor(Math.random() * list.length)]!;
const STATUSES = ['available', 'pending', 'sold'] as const;

let highestId = 0;
let nextLink: string | null = null;

async function call(settings: LoadSettings, path: string, init: RequestInit & { key?: string | null; from?: string } = {}): Promise<Outcome> {
  const { key = settings.key, from, ...rest } = init;
  const headers = new Headers(rest.headers);
  if (key !== null) headers.set('authorization', `Bearer ${key}`);
  if (from !== undefined) headers.set('x-forwarded-for', from);
  const response = await fetch(settings.url + path, { ...rest, headers });
  const text = await response.text();
  if (response.status >= 400) return { status: response.status, code: (JSON.parse(text) as { code: string }).code };
  if (response.status === 201) highestId = Math.max(highestId, (JSON.parse(text) as { id: number }).id);
  if (path.startsWith('/v1/pets?') || path === '/v1/pets') {
    const link = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '');
    nextLink = link ? link[1]! : null;
  }
  return { status: response.status };
}

const post = (settings: LoadSettings, body: string, contentType = 'application/json') =>
  call(settings, '/v1/pets', { method: 'POST', body, headers: { 'content-type': contentType } });

/** A request Node's parser refuses, on a raw socket: answered 400 bad_request by clientError. */
function malformed(settings: LoadSettings): Promise<Outcome> {
  const { hostname, port } = new URL(settings.url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    let text = '';
    socket.on('connect', () => socket.write('GET /v1/pets HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n'));
    socket.on('data', (chunk) => (text += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const code = /"code":"([a-z_]+)"/.exec(text)?.[1];
      resolve(code === undefined ? { status } : { status, code });
    });
  });
}

const WEIGHTED: [number, Scenario][] = [
  [20, (s) => call(s, `/v1/pets?limit=${1 + Math.floor(Math.random() * 100)}${Math.random() < 0.3 ? `&status=${pick(STATUSES)}` : ''}`)],
  [5, (s) => call(s, nextLink ?? '/v1/pets')],
  [15, (s) => post(s, JSON.stringify({ name: `soak pet ${Math.random().toString(36).slice(2)}`, categoryId: 1 + Math.floor(Math.random() * 1000), status: pick(STATUSES) }))],
  [15, (s) => call(s, `/v1/pets/${1 + Math.floor(Math.random() * (highestId + 10))}`)],
  // Bad requests, one of each kind.
  [2, (s) => post(s, '{"name": "Rex", "categoryId": 1')],
  [2, (s) => post(s, '{"name": "", "categoryId": 1.5, "id": 3}')],
  [2, (s) => call(s, '/v1/pets?limit=0&colour=red')],
  [2, (s) => call(s, '/v1/pets/abc')],
  [2, (s) => post(s, 'name=Rex', 'application/x-www-form-urlencoded')],
  [1, (s) => post(s, JSON.stringify({ name: 'x'.repeat(17 * 1024), categoryId: 1 }))],
  [1, (s) => call(s, '/v1/pets', { method: 'DELETE' })],
  [1, (s) => call(s, '/v1/nowhere')],
  [2, malformed],
  // 401s, from many addresses so that their per-address limits are not what answers.
  [7, (s) => call(s, '/v1/pets', { key: null, from: pick(ADDRESSES) })],
  [8, (s) => call(s, '/v1/pets', { key: `pk_test_${Math.random().toString(36).slice(2)}`, from: pick(ADDRESSES) })],
  // 429s: a free key (60/min) far past its limit, then banned.
  [15, (s) => call(s, '/v1/pets?limit=1', { key: s.freeKey })],
];
const TOTAL_WEIGHT = WEIGHTED.reduce((sum, [weight]) => sum + weight, 0);

function chooseScenario(): Scenario {
  let roll = Math.random() * TOTAL_WEIGHT;
  for (const [weight, scenario] of WEIGHTED) {
    roll -= weight;
    if (roll < 0) return scenario;
  }
  return WEIGHTED[0]![1];
}

async function run(settings: LoadSettings): Promise<LoadReport> {
  const statuses: Record<string, number> = {};
  const codes: Record<string, number> = {};
  const latency = createHistogram();
  let total = 0;
  let transportErrors = 0;
  let skipped = 0;
  let inFlight = 0;
  let credit = 0;
  const started = performance.now();
  const deadline = started + settings.seconds * 1000;
  const perTick = settings.rate / 100;

  const launch = () => {
    inFlight++;
    const begun = performance.now();
    chooseScenario()(settings).then(
      (outcome) => {
        statuses[outcome.status] = (statuses[outcome.status] ?? 0) + 1;
        if (outcome.code) codes[outcome.code] = (codes[outcome.code] ?? 0) + 1;
        latency.record(Math.max(1, Math.round((performance.now() - begun) * 1000)));
      },
      () => {
        transportErrors++;
      },
    ).finally(() => {
      inFlight--;
      total++;
    });
  };

  const progress = setInterval(() => process.send?.({ progress: total }), 1000);
  await new Promise<void>((resolve) => {
    const tick = setInterval(() => {
      if (performance.now() >= deadline) {
        clearInterval(tick);
        resolve();
        return;
      }
      credit += perTick;
      while (credit >= 1) {
        credit--;
        if (inFlight >= settings.concurrency) skipped++;
        else launch();
      }
    }, 10);
  });
  while (inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 10));
  clearInterval(progress);
  return {
    total,
    seconds: (performance.now() - started) / 1000,
    statuses,
    codes,
    transportErrors,
    skipped,
    latencyP50Ms: latency.percentile(50) / 1000,
    latencyP99Ms: latency.percentile(99) / 1000,
  };
}

const settings = JSON.parse(process.argv[2] ?? '{}') as LoadSettings;
if (!/^http:\/\/127\.0\.0\.1:\d+$/.test(settings.url)) throw new Error('the soak only ever targets 127.0.0.1');
const report = await run(settings);
process.send?.({ report }, () => process.exit(0));
