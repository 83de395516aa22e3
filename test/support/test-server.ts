/**
 * A real server on port 0 over an in-memory database, with a fake clock and captured logs, for
 * HTTP tests with fetch. Every response of the suite goes through `request`, so checks that
 * apply to all of them live in one place.
 */
import type { TestContext } from 'node:test';
import type { AddressInfo } from 'node:net';
import type { DatabaseSync } from 'node:sqlite';
import { openDatabase } from '../../src/database.ts';
import { createPetsStore } from '../../src/pets-store.ts';
import { createApp, noLimits, type ApiKeyIdentity, type AppDeps } from '../../src/app.ts';
import { createLogger } from '../../src/access-log.ts';
import { createHttpServer } from '../../src/server.ts';

export const FREE_KEY = 'test-free-key';
export const FREE_KEY_ID = 'key_free';

export interface FakeClock {
  (): number;
  now: number;
  advance(ms: number): void;
}

/** A clock that only moves when told. */
export function fakeClock(start = Date.UTC(2026, 0, 1)): FakeClock {
  const clock = (() => clock.now) as FakeClock;
  clock.now = start;
  clock.advance = (ms) => {
    clock.now += ms;
  };
  return clock;
}

export interface TestServer {
  url: string;
  db: DatabaseSync;
  clock: FakeClock;
  /** Every line the server logged. */
  logs: string[];
  /** fetch against the server; sends the free key unless `headers.authorization` is given (null: none). */
  request(path: string, init?: RequestInit & { key?: string | null }): Promise<Response>;
  /** POST a JSON body (a string is sent as is). */
  post(path: string, body: unknown, init?: RequestInit & { key?: string | null }): Promise<Response>;
}

export interface TestServerOptions extends Partial<AppDeps> {
  clock?: FakeClock;
  db?: DatabaseSync;
  keys?: Record<string, ApiKeyIdentity>;
}

/** Starts the app on 127.0.0.1 port 0 and closes it when the test ends. */
export async function startTestServer(t: TestContext, options: TestServerOptions = {}): Promise<TestServer> {
  const db = options.db ?? openDatabase(':memory:');
  const clock = options.clock ?? fakeClock();
  const logs: string[] = [];
  const logger = createLogger({ level: 'debug', clock, write: (text) => logs.push(...text.trimEnd().split('\n')) });
  const keys: Record<string, ApiKeyIdentity> = options.keys ?? { [FREE_KEY]: { id: FREE_KEY_ID, perMinute: 60, perDay: 1000 } };
  const app = createApp({
    clock,
    logger,
    authenticate: (token) => (Object.hasOwn(keys, token) ? keys[token]! : null),
    limiter: noLimits,
    pets: createPetsStore(db),
    ...options,
  });
  const server = createHttpServer(app, logger);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    logger.flush();
    if (!options.db) db.close();
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const request = (path: string, init: RequestInit & { key?: string | null } = {}) => {
    const { key = FREE_KEY, ...rest } = init;
    const headers = new Headers(rest.headers);
    if (key !== null && !headers.has('authorization')) headers.set('authorization', `Bearer ${key}`);
    return fetch(url + path, { ...rest, headers });
  };
  const post = (path: string, body: unknown, init: RequestInit & { key?: string | null } = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has('content-type')) headers.set('content-type', 'application/json');
    return request(path, { ...init, method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
  };
  return { url, db, clock, logs, request, post };
}

/** Reads an Error body and checks its shape: exactly code, message, status. */
export async function errorBody(response: Response): Promise<{ code: string; message: string; status: number }> {
  const body = (await response.json()) as { code: string; message: string; status: number };
  if (Object.keys(body).join() !== 'code,message,status' || body.status !== response.status) {
    throw new Error(`not an Error body for ${response.status}: ${JSON.stringify(body)}`);
  }
  return body;
}

/** A response body as JSON, typed loosely for assertions. */
export function json(response: Response): Promise<any> {
  return response.json();
}
