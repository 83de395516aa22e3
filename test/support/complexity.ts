/**
 * Timing a worst case at two sizes, robustly enough for a slow machine shared with other work:
 * each request on a fresh connection, timed from its first byte sent to its answer's last byte
 * received; the sizes interleaved so that a burst of load hits both; warmed up first; the best of
 * several runs kept, since load only ever adds time. What is compared is the growth over the same
 * request with no units at all, so that the fixed cost of a request does not hide it.
 */
import assert from 'node:assert/strict';
import type { ListedOperation } from './worst-cases.ts';
import { openRaw, type RawResponse } from './raw-http.ts';
import { assertContractAnswer, roomyLimiter, type Allowed } from './hostile-http.ts';
import { CONTRACT_ERRORS, MAX_ERROR_BODY_BYTES } from './property.ts';
import type { TestServer } from './test-server.ts';
import type { Fixtures, WorstCase } from './worst-cases.ts';

/** Linear growth from n to 4n bytes is at most 4 times: twice that leaves room for a loaded machine. */
export const GROWTH_BOUND = 8;
/** Milliseconds that load may still add to the best of several runs. */
export const NOISE_MS = 3;
/**
 * Longest a /healthz may wait behind a worst case: an event loop held this long is held up. It
 * waits about 1 ms behind any of them now, up to 70 ms on a machine with 30 processes to a core;
 * it waited 590 to 990 ms behind the query that repeated 2,000 names.
 */
export const HEALTHZ_WAIT_MS = 200;
/** Runs of each size after the warm-up. */
const ROUNDS = 7;

/** One request on a fresh connection: its answer and the milliseconds from sending to the full answer. */
export async function timed(url: string, request: Buffer): Promise<{ ms: number; response: RawResponse }> {
  const connection = await openRaw(url);
  try {
    const started = performance.now();
    connection.write(request);
    const response = await connection.response;
    return { ms: performance.now() - started, response };
  } finally {
    connection.socket.destroy();
  }
}

export interface Growth {
  /** Best times, in milliseconds: with no units, at n, at 4n. */
  empty: number;
  small: number;
  large: number;
  /** The answers at each size (the last run's). */
  answers: { empty: RawResponse; small: RawResponse; large: RawResponse };
}

/** The best times of `empty`, `small` (n) and `large` (4n), interleaved. */
export async function growth(url: string, empty: Buffer, small: Buffer, large: Buffer): Promise<Growth> {
  const requests = { empty, small, large };
  const best = { empty: Infinity, small: Infinity, large: Infinity };
  const answers = {} as Growth['answers'];
  for (let round = -2; round < ROUNDS; round++) {
    for (const size of ['empty', 'small', 'large'] as const) {
      const { ms, response } = await timed(url, requests[size]);
      answers[size] = response;
      if (round >= 0) best[size] = Math.min(best[size], ms);
    }
  }
  return { ...best, answers };
}

/** Whether the time grew at most about linearly from n to 4n (see GROWTH_BOUND and NOISE_MS). */
export function isAboutLinear({ empty, small, large }: Growth): boolean {
  return large - empty <= GROWTH_BOUND * Math.max(small - empty, 0) + NOISE_MS;
}

/**
 * How long a GET /healthz sent right behind `request`, on another connection, waits for its
 * answer: the median of three, so that one burst of load does not decide.
 */
export async function healthzBehind(url: string, request: Buffer): Promise<number> {
  const waits: number[] = [];
  for (let i = 0; i < 3; i++) {
    const [hostile, probe] = await Promise.all([openRaw(url), openRaw(url)]);
    try {
      hostile.write(request);
      const started = performance.now();
      probe.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
      const answer = await probe.response;
      waits.push(performance.now() - started);
      if (answer.status !== 200) throw new Error(`/healthz answered ${answer.status}`);
      await hostile.response;
    } finally {
      hostile.socket.destroy();
      probe.socket.destroy();
    }
  }
  return waits.sort((a, b) => a - b)[1]!;
}

/** The answers an operation documents, with the ones every operation may give; any contract answer without one. */
export function answersOf(operation: ListedOperation | null): Allowed {
  if (operation === null) {
    const any: Record<number, string[]> = { 200: [], 201: [], 204: [] };
    for (const [code, status] of Object.entries(CONTRACT_ERRORS)) (any[status] ??= []).push(code);
    return any;
  }
  const answers: Record<number, string[]> = { 401: ['missing_api_key', 'invalid_api_key'], 404: ['not_found'] };
  for (const [status, spec] of Object.entries(operation.responses)) answers[Number(status)] = [...(answers[Number(status)] ?? []), ...(spec.codes ?? [])];
  return answers;
}

/** The test server's options: every header the service can read is read (TRUST_PROXY, CORS, ALLOWED_HOSTS). */
export const COMPLEXITY_SERVER = {
  overrides: { limiter: roomyLimiter() },
  config: {
    trustProxy: ['127.0.0.0/8', '10.0.0.0/8', 'fd00::/8'],
    corsAllowedOrigins: ['https://app.example'],
    allowedHosts: ['pets.example'],
  },
} as const;

/** The server's fixtures: a pet, an order and a webhook the test key may change, the served document, the allowed origin and host. */
export async function complexityFixtures(server: TestServer): Promise<Fixtures> {
  const pet = await server.post('/v1/pets', { name: 'Rex', categoryId: 1 });
  const ordered = await server.post('/v1/pets', { name: 'Tom', categoryId: 1 });
  const order = await server.post('/v1/store/orders', { petId: ((await ordered.json()) as { id: number }).id });
  assert.equal(order.status, 201);
  // An address, not a name: no lookup is made for it.
  const webhook = await server.post('/v1/webhooks', { url: 'https://93.184.215.14/hooks' });
  assert.equal(webhook.status, 201);
  return {
    key: server.key,
    document: JSON.parse(await server.service.openapi()),
    pathValues: {
      petId: String(((await pet.json()) as { id: number }).id),
      orderId: String(((await order.json()) as { id: number }).id),
      webhookId: String(((await webhook.json()) as { id: number }).id),
    },
    origin: 'https://app.example',
    host: 'pets.example',
  };
}

/** A worst case's answer is one its operation documents, in the Error shape, and small. */
export function checkAnswer(worst: WorstCase, response: RawResponse, context: string): void {
  assertContractAnswer(response, answersOf(worst.surface.operation), context);
  if (response.status >= 400) assert.ok(Buffer.byteLength(response.body) <= MAX_ERROR_BODY_BYTES, `${context}: ${Buffer.byteLength(response.body)} bytes`);
}

