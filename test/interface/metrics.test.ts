/**
 * The metrics listener (docs/operations.md, "Metrics"), over a real service:
 * traffic sent to the API is read back from GET /metrics and checked series by series.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { createHttpServer } from '../../src/http/server.ts';
import { createLogger } from '../../src/http/access-log.ts';
import { createMetrics, EXPOSITION_CONTENT_TYPE, type Metrics } from '../../src/ops/metrics.ts';
import { createMetricsApp } from '../../src/ops/metrics-app.ts';
import { startProcessProbe } from '../../src/ops/process-probe.ts';
import { errorBody, json, startTestServer } from '../support/test-server.ts';
import { parseExposition, samplesOf, valueOf, type Exposition } from '../support/prometheus-text.ts';
import { promtoolCheckMetrics } from '../support/promtool.ts';

/** The metrics listener on 127.0.0.1 port 0, closed when the test ends. */
async function startMetricsListener(t: TestContext, metrics: Metrics): Promise<string> {
  const logger = createLogger({ level: 'silent', clock: Date.now, write: () => {} });
  const server = createHttpServer(createMetricsApp({ metrics, log: () => {} }), logger);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function realMetrics(t: TestContext): Metrics {
  const probe = startProcessProbe();
  t.after(() => probe.stop());
  return createMetrics(probe);
}

async function scrape(metricsUrl: string): Promise<{ text: string; exposition: Exposition }> {
  const response = await fetch(`${metricsUrl}/metrics`);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), EXPOSITION_CONTENT_TYPE);
  const text = await response.text();
  return { text, exposition: parseExposition(text) };
}

test('GET /metrics serves the exposition; any other path is 404 not_found, another method 405, in the Error shape', async (t) => {
  const metricsUrl = await startMetricsListener(t, realMetrics(t));
  const response = await fetch(`${metricsUrl}/metrics?x=1`);
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  assert.equal(response.headers.get('cache-control'), 'no-store');
  assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
  assert.match(await response.text(), /^# HELP http_requests_total /);

  const head = await fetch(`${metricsUrl}/metrics`, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(await head.text(), '');

  for (const path of ['/', '/v1/pets', '/metrics/', '/healthz', '/METRICS']) {
    const notFound = await fetch(metricsUrl + path);
    assert.equal(notFound.status, 404, path);
    assert.equal((await errorBody(notFound)).code, 'not_found');
    assert.ok(notFound.headers.get('x-request-id'));
  }
  const post = await fetch(`${metricsUrl}/metrics`, { method: 'POST', body: '' });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get('allow'), 'GET, HEAD');
  assert.equal((await errorBody(post)).code, 'method_not_allowed');
});

test('the metrics count the traffic sent: by route template and status, the histogram, refusals, creates, replays', async (t) => {
  const metrics = realMetrics(t);
  const server = await startTestServer(t, { observer: metrics });
  const metricsUrl = await startMetricsListener(t, metrics);

  for (let i = 0; i < 3; i++) assert.equal((await server.request('/v1/pets')).status, 200);
  assert.equal((await server.request('/v1/pets', { method: 'HEAD' })).status, 200);
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 1 })).status, 201);
  const once = { headers: { 'idempotency-key': 'metrics-1' } };
  assert.equal((await server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, once)).status, 201);
  const replay = await server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, once);
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.equal((await server.request('/v1/pets/1')).status, 200);
  assert.equal((await server.request('/v1/pets/987654')).status, 404);
  assert.equal((await server.request('/v1/pets/not-a-number')).status, 400);
  assert.equal((await server.request('/v1/nothing-here')).status, 404);
  assert.equal((await server.request('/v1/pets', { method: 'DELETE' })).status, 405);
  // Routes other operations add are labelled by their template too: nothing here lists them.
  const patch = { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"status":"sold"}' };
  assert.equal((await server.request('/v1/pets/1', patch)).status, 200);
  assert.equal((await server.request('/v1/pets/2', { method: 'DELETE' })).status, 204);
  assert.equal((await server.request('/v1/pets', { key: null })).status, 401);
  assert.equal((await server.request('/v1/pets/1', { key: 'pk_test_not-a-key' })).status, 401);
  assert.equal((await server.request('/healthz')).status, 200);
  assert.equal((await server.request('/v1/openapi.json')).status, 200);
  // The free key has 60 requests a minute; the clock does not move, so the 61st is refused.
  for (let i = 0; i < 60; i++) assert.equal((await server.request('/v1/store/orders', { key: server.freeKey })).status, 200);
  const refused = await server.request('/v1/store/orders', { key: server.freeKey });
  assert.equal(refused.status, 429);

  const { text, exposition } = await scrape(metricsUrl);
  const requests = (method: string, route: string, status: number) => valueOf(exposition, 'http_requests_total', { method, route, status: String(status) });
  assert.equal(requests('GET', '/v1/pets', 200), 3);
  assert.equal(requests('HEAD', '/v1/pets', 200), 1);
  assert.equal(requests('POST', '/v1/pets', 201), 3, 'two creates and a replay');
  assert.equal(requests('GET', '/v1/pets/{petId}', 200), 1);
  assert.equal(requests('GET', '/v1/pets/{petId}', 404), 1);
  assert.equal(requests('GET', '/v1/pets/{petId}', 400), 1);
  assert.equal(requests('GET', 'other', 404), 1, 'a path no route has is "other"');
  assert.equal(requests('DELETE', '/v1/pets', 405), 1, 'a 405 has its route');
  assert.equal(requests('PATCH', '/v1/pets/{petId}', 200), 1);
  assert.equal(requests('DELETE', '/v1/pets/{petId}', 204), 1);
  assert.equal(requests('GET', '/v1/pets', 401), 1, 'refused before routing, still counted under its route');
  assert.equal(requests('GET', '/v1/pets/{petId}', 401), 1);
  assert.equal(requests('GET', '/healthz', 200), 1);
  assert.equal(requests('GET', '/v1/openapi.json', 200), 1);
  assert.equal(requests('GET', '/v1/store/orders', 200), 60);
  assert.equal(requests('GET', '/v1/store/orders', 429), 1);
  const total = samplesOf(exposition, 'http_requests_total').reduce((sum, sample) => sum + sample.value, 0);
  assert.equal(total, 79, 'every request once, nothing else');

  assert.equal(valueOf(exposition, 'rate_limit_rejections_total', { code: 'rate_limited' }), 1);
  assert.equal(valueOf(exposition, 'rate_limit_rejections_total', { code: 'temporarily_banned' }), 0);
  assert.equal(valueOf(exposition, 'api_key_rejections_total', { code: 'missing_api_key' }), 1);
  assert.equal(valueOf(exposition, 'api_key_rejections_total', { code: 'invalid_api_key' }), 1);
  assert.equal(valueOf(exposition, 'pets_created_total'), 2);
  assert.equal(valueOf(exposition, 'idempotent_replays_total'), 1);
  assert.equal(valueOf(exposition, 'database_errors_total'), 0);

  // The histogram: per route, cumulative buckets ending in +Inf = count = the requests sent there.
  const perRoute = new Map<string, number>();
  for (const sample of samplesOf(exposition, 'http_requests_total')) perRoute.set(sample.labels.route!, (perRoute.get(sample.labels.route!) ?? 0) + sample.value);
  for (const [route, count] of perRoute) {
    const buckets = samplesOf(exposition, 'http_request_duration_seconds_bucket', { route }).map((sample) => sample.value);
    assert.deepEqual(buckets, [...buckets].sort((a, b) => a - b), `${route}: cumulative`);
    assert.equal(buckets.at(-1), count, route);
    assert.equal(valueOf(exposition, 'http_request_duration_seconds_count', { route }), count, route);
    assert.ok(valueOf(exposition, 'http_request_duration_seconds_sum', { route }) > 0, route);
  }
  assert.ok(valueOf(exposition, 'process_resident_memory_bytes') > 1_000_000);
  assert.ok(valueOf(exposition, 'process_cpu_seconds_total') > 0);

  // Labels are bounded: never a raw path, a parameter or a key.
  for (const secret of ['987654', 'not-a-number', 'nothing-here', server.key, server.freeKey, 'pk_test_not-a-key']) {
    assert.ok(!text.includes(secret), `the exposition shows ${secret}`);
  }
});

test('promtool check metrics accepts what a server that served traffic exposes', async (t) => {
  const metrics = realMetrics(t);
  const server = await startTestServer(t, { observer: metrics });
  const metricsUrl = await startMetricsListener(t, metrics);
  await server.request('/v1/pets');
  await server.post('/v1/pets', { name: 'Rex', categoryId: 1 });
  await server.request('/v1/pets', { key: null });
  await new Promise((resolve) => setTimeout(resolve, 30)); // a few event-loop delay samples
  const { text } = await scrape(metricsUrl);
  const verdict = promtoolCheckMetrics(t, text);
  if (verdict === null) return;
  assert.deepEqual(verdict, { status: 0, output: '' });
});

test('a create that fails on the database counts a database error', async (t) => {
  const metrics = realMetrics(t);
  const server = await startTestServer(t, { observer: metrics });
  const metricsUrl = await startMetricsListener(t, metrics);
  // max_page_count makes SQLite fail with SQLITE_FULL exactly as a full disk does; VACUUM first,
  // so that no free page is left for the creates to fill (a migration that rebuilds a table
  // leaves some).
  server.db.exec('VACUUM');
  const { page_count: pages } = server.db.prepare('PRAGMA page_count').get() as { page_count: number };
  server.db.exec(`PRAGMA max_page_count = ${pages}`);
  const responses = await Promise.all(Array.from({ length: 40 }, (_, i) => server.post('/v1/pets', { name: `${i} `.padEnd(100, 'x'), categoryId: 1 })));
  const failed = responses.filter((response) => response.status === 503).length;
  assert.ok(failed > 0, 'the database filled up');
  const { exposition } = await scrape(metricsUrl);
  assert.equal(valueOf(exposition, 'database_errors_total'), failed);
  assert.equal(valueOf(exposition, 'http_requests_total', { method: 'POST', route: '/v1/pets', status: '503' }), failed);
  assert.equal(valueOf(exposition, 'pets_created_total'), 40 - failed);
});

test('orders_total counts orders reaching each status; a refused step, a replay and a no-change count nothing', async (t) => {
  const metrics = realMetrics(t);
  const server = await startTestServer(t, { observer: metrics });
  const metricsUrl = await startMetricsListener(t, metrics);
  const petIds: number[] = [];
  for (let i = 0; i < 3; i++) petIds.push((await json(await server.post('/v1/pets', { name: `Rex${i}`, categoryId: 1 }))).id);
  const place = (petId: number) => server.post('/v1/store/orders', { petId }, { headers: { 'idempotency-key': `place-${petId}` } });
  const step = (id: number, status: string) =>
    server.request(`/v1/store/orders/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ status }) });
  for (const petId of petIds) assert.equal((await place(petId)).status, 201);
  assert.equal((await place(petIds[0]!)).headers.get('idempotent-replayed'), 'true');
  assert.equal((await step(1, 'approved')).status, 200);
  assert.equal((await step(1, 'approved')).status, 200, 'no change');
  assert.equal((await step(1, 'completed')).status, 200);
  assert.equal((await step(2, 'cancelled')).status, 200);
  assert.equal((await step(3, 'completed')).status, 409);
  const { exposition } = await scrape(metricsUrl);
  const reached = (status: string) => valueOf(exposition, 'orders_total', { status });
  assert.deepEqual(['placed', 'approved', 'completed', 'cancelled'].map(reached), [3, 1, 1, 1]);
  assert.equal(valueOf(exposition, 'idempotent_replays_total'), 1);
  assert.equal(valueOf(exposition, 'http_requests_total', { method: 'PATCH', route: '/v1/store/orders/{orderId}', status: '409' }), 1);
});
