/**
 * One service, two engines: the same requests at the same (fake) times get the same answers
 * from SQLite and from PostgreSQL, byte for byte, rate-limit headers, bans, ETags and
 * idempotent replays and the whole of an adoption included; only X-Request-Id differs, and the
 * account of each server's key, which is random. Every answer is also checked against
 * the OpenAPI document by the test servers.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fakeClock, startPostgresTestServer, startTestServer, type PostgresTestServer, type TestServer } from '../support/test-server.ts';
import { describeWithPostgres, openTestDatabase } from '../support/postgres.ts';

type Server = TestServer | PostgresTestServer;

interface Step {
  /** What to send; `key` picks the server's own roomy or free key, or none. */
  path: string;
  method?: string;
  body?: string;
  headers?: Record<string, string>;
  key?: 'roomy' | 'free' | 'none';
  /** Milliseconds to move both clocks before the request. */
  advance?: number;
  /** Send the ETag of the previous answer as If-Match. */
  ifMatchPrevious?: boolean;
  /** Send this step `times` times. */
  times?: number;
}

const json = { 'content-type': 'application/json' };
const STEPS: Step[] = [
  { path: '/v1/pets', method: 'POST', headers: json, body: '{"name":"Rex","categoryId":9223372036854775807}' },
  { path: '/v1/pets', method: 'POST', headers: json, body: '{"status":"sold","categoryId":2,"name":"Tom"}' },
  { path: '/v1/pets', method: 'POST', headers: { ...json, 'idempotency-key': 'k1' }, body: '{"name":"Kit","categoryId":3,"status":"pending"}' },
  { path: '/v1/pets', method: 'POST', headers: { ...json, 'idempotency-key': 'k1' }, body: '{"categoryId":3,"status":"pending","name":"Kit"}' },
  { path: '/v1/pets', method: 'POST', headers: { ...json, 'idempotency-key': 'k1' }, body: '{"name":"Other","categoryId":3}' },
  { path: '/v1/pets', method: 'POST', headers: json, body: '{"name":"","categoryId":0,"id":4}' },
  { path: '/v1/pets?limit=2' },
  { path: '/v1/pets?limit=2&cursor=YWZ0ZXI6Mg' },
  { path: '/v1/pets?status=sold' },
  { path: '/v1/pets?limit=0' },
  { path: '/v1/pets/1' },
  { path: '/v1/pets/2', method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"status":"available"}' },
  { path: '/v1/pets/2', method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json', 'if-match': '"not-it"' }, body: '{"name":"Tim"}' },
  { path: '/v1/pets/2' },
  { path: '/v1/pets/2', method: 'PATCH', ifMatchPrevious: true, headers: { 'content-type': 'application/json' }, body: '{"name":"Tim"}' },
  { path: '/v1/pets/2', method: 'DELETE', ifMatchPrevious: true },
  { path: '/v1/pets/2' },
  { path: '/v1/pets/2', method: 'DELETE' },
  { path: '/v1/pets/abc' },
  { path: '/v1/pets', method: 'PUT' },
  { path: '/v1/nothing' },
  { path: '/v1/store/orders' },
  // Adoption: Rex (1) is available, Kit (3) pending, Tom (2) deleted.
  { path: '/v1/store/orders', method: 'POST', headers: { ...json, 'idempotency-key': 'o1' }, body: '{"petId":1}' },
  { path: '/v1/store/orders', method: 'POST', headers: { ...json, 'idempotency-key': 'o1' }, body: '{"petId":1}' },
  { path: '/v1/store/orders', method: 'POST', headers: json, body: '{"petId":1}' },
  { path: '/v1/store/orders', method: 'POST', headers: json, body: '{"petId":3}' },
  { path: '/v1/store/orders', method: 'POST', headers: json, body: '{"petId":2}' },
  { path: '/v1/store/orders', method: 'POST', headers: json, body: '{"petId":0}' },
  { path: '/v1/pets/1' },
  { path: '/v1/pets/1', method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"status":"sold"}' },
  { path: '/v1/pets/1', method: 'DELETE' },
  { path: '/v1/store/orders/1', advance: 1000 },
  { path: '/v1/store/orders/1', method: 'PATCH', ifMatchPrevious: true, headers: { 'content-type': 'application/merge-patch+json' }, body: '{"status":"approved"}' },
  { path: '/v1/store/orders/1', method: 'PATCH', headers: json, body: '{"status":"placed"}' },
  { path: '/v1/store/orders/1', method: 'PATCH', headers: { ...json, 'if-match': '"1.1"' }, body: '{"status":"completed"}' },
  { path: '/v1/store/orders/1', method: 'PATCH', headers: json, body: '{"status":"completed"}' },
  { path: '/v1/store/orders/9' },
  { path: '/v1/store/orders?status=completed' },
  { path: '/v1/store/orders?limit=1&status=placed' },
  { path: '/v1/store/inventory' },
  { path: '/v1/store/inventory?x=1' },
  { path: '/v1/pets', key: 'none' },
  { path: '/v1/pets?limit=1', key: 'free', times: 62, advance: 10 },
  { path: '/v1/pets?limit=1', key: 'free', times: 30 },
  { path: '/v1/pets?limit=1', key: 'free', advance: 61_000 },
  { path: '/v1/pets?limit=1', key: 'free', advance: 900_000 },
  { path: '/healthz', key: 'none' },
];

/** The account the server's own key belongs to: random on each engine, so compared as "ACCOUNT". */
async function accountOf(server: Server): Promise<string> {
  return (await server.service.stores.keys.findByKey(server.key, server.clock()))!.account;
}

async function run(server: Server, account: string, step: Step, previousEtag: string | null) {
  const headers: Record<string, string> = { ...step.headers };
  if (step.ifMatchPrevious && previousEtag) headers['if-match'] = previousEtag;
  const key = step.key === 'none' ? null : step.key === 'free' ? server.freeKey : server.key;
  const response = await server.request(step.path, { method: step.method ?? 'GET', headers, key, ...(step.body ? { body: step.body } : {}) });
  const kept = [...response.headers].filter(([name]) => !['x-request-id', 'date', 'keep-alive', 'connection'].includes(name));
  return { status: response.status, headers: Object.fromEntries(kept), body: (await response.text()).replaceAll(account, 'ACCOUNT') };
}

describeWithPostgres('SQLite and PostgreSQL answer alike', (cluster) => {
  test('the same requests at the same times get the same answers from both engines', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    const start = Date.UTC(2026, 0, 1);
    const sqlite = await startTestServer(t, { clock: fakeClock(start), config: { rateLimitBanThreshold: 5 } });
    const postgres = await startPostgresTestServer(t, sql, { clock: fakeClock(start), config: { rateLimitBanThreshold: 5 } });
    const accounts = [await accountOf(sqlite), await accountOf(postgres)] as const;
    let etags: [string | null, string | null] = [null, null];
    let compared = 0;
    const seen = new Set<string>();
    for (const [index, step] of STEPS.entries()) {
      for (let time = 0; time < (step.times ?? 1); time++) {
        for (const server of [sqlite, postgres]) server.clock.advance(step.advance ?? 0);
        const [a, b] = [await run(sqlite, accounts[0], step, etags[0]), await run(postgres, accounts[1], step, etags[1])];
        assert.deepEqual(b, a, `step ${index} (${step.method ?? 'GET'} ${step.path}), time ${time}`);
        etags = [a.headers.etag ?? etags[0], b.headers.etag ?? etags[1]];
        seen.add(a.status >= 400 ? (JSON.parse(a.body) as { code: string }).code : String(a.status));
        compared++;
      }
    }
    t.diagnostic(`${compared} answers compared`);
    for (const outcome of ['200', '201', '204', 'rate_limited', 'temporarily_banned', 'precondition_failed', 'idempotency_key_reused', 'invalid_body', 'pet_not_found', 'missing_api_key',
      'pet_not_available', 'pet_has_open_order', 'invalid_transition', 'order_not_found', 'invalid_query']) {
      assert.ok(seen.has(outcome), `the script reached ${outcome}`);
    }
  });
});
