/** The metrics registry and its text exposition (format 0.0.4), without a server. */
import { EVENT_TYPES } from '../../src/storage/events.ts';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMetrics, DURATION_BUCKETS, escapeLabel, formatNumber, mergeCounts, renderCounts, requestCount, worstDelay, type ProcessProbe } from '../../src/ops/metrics.ts';
import { parseExposition, samplesOf, valueOf } from '../support/prometheus-text.ts';
import { promtoolCheckMetrics } from '../support/promtool.ts';

const fixedProbe: ProcessProbe = {
  residentMemoryBytes: () => 52_428_800,
  cpuSeconds: () => 1.25,
  startTimeSeconds: () => 1_767_225_600.5,
  eventLoopDelay: () => ({ count: 400, sumSeconds: 0.2, maxSeconds: 0.03, quantiles: [[0.5, 0.0004], [0.9, 0.001], [0.99, 0.02]] }),
};

test('an empty registry exposes every family the contract lists, each with HELP and TYPE', () => {
  const exposition = parseExposition(createMetrics(fixedProbe).render());
  assert.deepEqual(Object.fromEntries(exposition.types), {
    http_requests_total: 'counter',
    http_request_duration_seconds: 'histogram',
    rate_limit_rejections_total: 'counter',
    api_key_rejections_total: 'counter',
    pets_created_total: 'counter',
    idempotent_replays_total: 'counter',
    orders_total: 'counter',
    events_total: 'counter',
    event_streams_open: 'gauge',
    orders_expired_total: 'counter',
    database_errors_total: 'counter',
    webhook_attempts_total: 'counter',
    webhook_deliveries_pending: 'gauge',
    process_resident_memory_bytes: 'gauge',
    process_cpu_seconds_total: 'counter',
    process_start_time_seconds: 'gauge',
    nodejs_eventloop_delay_seconds: 'summary',
    nodejs_eventloop_delay_max_seconds: 'gauge',
  });
  assert.deepEqual([...exposition.helps.keys()], [...exposition.types.keys()]);
  // Families with a fixed label set start at zero, so a rate() has a first point.
  for (const code of ['rate_limited', 'temporarily_banned']) assert.equal(valueOf(exposition, 'rate_limit_rejections_total', { code }), 0);
  for (const code of ['missing_api_key', 'invalid_api_key']) assert.equal(valueOf(exposition, 'api_key_rejections_total', { code }), 0);
  for (const name of ['pets_created_total', 'idempotent_replays_total', 'database_errors_total']) assert.equal(valueOf(exposition, name), 0);
  assert.equal(samplesOf(exposition, 'http_requests_total').length, 0);
  assert.deepEqual(samplesOf(exposition, 'events_total').map((sample) => [sample.labels.type, sample.value]), EVENT_TYPES.map((type) => [type, 0]));
  assert.deepEqual(samplesOf(exposition, 'webhook_attempts_total').map((sample) => [sample.labels.outcome, sample.value]),
    ['success', 'timeout', 'connection_failed', 'address_refused', 'redirect', 'http_status'].map((outcome) => [outcome, 0]));
  assert.equal(valueOf(exposition, 'webhook_deliveries_pending'), 0);
});

test('delivery attempts are counted by outcome; the pending deliveries are the last count', () => {
  const metrics = createMetrics(fixedProbe);
  metrics.webhookAttempted(null);
  metrics.webhookAttempted(null);
  metrics.webhookAttempted('redirect');
  metrics.webhookDeliveriesPending(7);
  metrics.webhookDeliveriesPending(3);
  const exposition = parseExposition(metrics.render());
  assert.equal(valueOf(exposition, 'webhook_attempts_total', { outcome: 'success' }), 2);
  assert.equal(valueOf(exposition, 'webhook_attempts_total', { outcome: 'redirect' }), 1);
  assert.equal(valueOf(exposition, 'webhook_attempts_total', { outcome: 'timeout' }), 0);
  assert.equal(valueOf(exposition, 'webhook_deliveries_pending'), 3);
});

test('process figures come from the probe, in base units', () => {
  const exposition = parseExposition(createMetrics(fixedProbe).render());
  assert.equal(valueOf(exposition, 'process_resident_memory_bytes'), 52_428_800);
  assert.equal(valueOf(exposition, 'process_cpu_seconds_total'), 1.25);
  assert.equal(valueOf(exposition, 'process_start_time_seconds'), 1_767_225_600.5);
  assert.equal(valueOf(exposition, 'nodejs_eventloop_delay_seconds', { quantile: '0.99' }), 0.02);
  assert.equal(valueOf(exposition, 'nodejs_eventloop_delay_seconds_count'), 400);
  assert.equal(valueOf(exposition, 'nodejs_eventloop_delay_seconds_sum'), 0.2);
  assert.equal(valueOf(exposition, 'nodejs_eventloop_delay_max_seconds'), 0.03);
});

test('requests are counted by method, route template and status; no route is "other", an unknown method "other"', () => {
  const metrics = createMetrics(fixedProbe);
  metrics.responded('GET', '/v1/pets/{petId}', 200, 0.001);
  metrics.responded('GET', '/v1/pets/{petId}', 200, 0.001);
  metrics.responded('GET', '/v1/pets/{petId}', 404, 0.001);
  metrics.responded('HEAD', '/v1/pets/{petId}', 200, 0.001);
  metrics.responded('POST', '/v1/pets', 201, 0.004);
  metrics.responded('GET', null, 404, 0.0001);
  metrics.responded('PROPFIND', null, 404, 0.0001);
  const exposition = parseExposition(metrics.render());
  const count = (method: string, route: string, status: string) => valueOf(exposition, 'http_requests_total', { method, route, status });
  assert.equal(count('GET', '/v1/pets/{petId}', '200'), 2);
  assert.equal(count('GET', '/v1/pets/{petId}', '404'), 1);
  assert.equal(count('HEAD', '/v1/pets/{petId}', '200'), 1);
  assert.equal(count('POST', '/v1/pets', '201'), 1);
  assert.equal(count('GET', 'other', '404'), 1);
  assert.equal(count('other', 'other', '404'), 1);
  assert.equal(samplesOf(exposition, 'http_requests_total').length, 6, 'only series that were seen');
});

test('the duration histogram is cumulative per route: a value on a bound falls in that bucket', () => {
  const metrics = createMetrics(fixedProbe);
  const durations = [0.0005, 0.0006, 0.003, 0.003, 0.2, 11];
  for (const seconds of durations) metrics.responded('GET', '/v1/pets', 200, seconds);
  metrics.responded('GET', '/healthz', 200, 0.0001);
  const exposition = parseExposition(metrics.render());
  const bucket = (le: string) => valueOf(exposition, 'http_request_duration_seconds_bucket', { route: '/v1/pets', le });
  assert.equal(bucket('0.0005'), 1);
  assert.equal(bucket('0.001'), 2);
  assert.equal(bucket('0.0025'), 2);
  assert.equal(bucket('0.005'), 4);
  assert.equal(bucket('0.25'), 5);
  assert.equal(bucket('10'), 5);
  assert.equal(bucket('+Inf'), 6);
  const les = samplesOf(exposition, 'http_request_duration_seconds_bucket', { route: '/v1/pets' }).map((sample) => sample.labels.le);
  assert.deepEqual(les, [...DURATION_BUCKETS.map(String), '+Inf']);
  assert.equal(valueOf(exposition, 'http_request_duration_seconds_count', { route: '/v1/pets' }), 6);
  assert.ok(Math.abs(valueOf(exposition, 'http_request_duration_seconds_sum', { route: '/v1/pets' }) - durations.reduce((a, b) => a + b)) < 1e-9);
  assert.equal(valueOf(exposition, 'http_request_duration_seconds_count', { route: '/healthz' }), 1);
});

test('refusals, creates, replays and database errors are counted', () => {
  const metrics = createMetrics(fixedProbe);
  metrics.rateLimitRejected('rate_limited');
  metrics.rateLimitRejected('rate_limited');
  metrics.rateLimitRejected('temporarily_banned');
  metrics.apiKeyRejected('invalid_api_key');
  metrics.petCreated();
  metrics.petCreated();
  metrics.idempotentReplayed();
  metrics.databaseError();
  const exposition = parseExposition(metrics.render());
  assert.equal(valueOf(exposition, 'rate_limit_rejections_total', { code: 'rate_limited' }), 2);
  assert.equal(valueOf(exposition, 'rate_limit_rejections_total', { code: 'temporarily_banned' }), 1);
  assert.equal(valueOf(exposition, 'api_key_rejections_total', { code: 'missing_api_key' }), 0);
  assert.equal(valueOf(exposition, 'api_key_rejections_total', { code: 'invalid_api_key' }), 1);
  assert.equal(valueOf(exposition, 'pets_created_total'), 2);
  assert.equal(valueOf(exposition, 'idempotent_replays_total'), 1);
  assert.equal(valueOf(exposition, 'database_errors_total'), 1);
});

test('label values are escaped as the format says: backslash, double quote, line feed', () => {
  assert.equal(escapeLabel('a\\b"c\nd'), 'a\\\\b\\"c\\nd');
  const metrics = createMetrics(fixedProbe);
  const odd = '/v1/{a"b}\\\n';
  metrics.responded('GET', odd, 200, 0.001);
  const text = metrics.render();
  assert.ok(text.includes('route="/v1/{a\\"b}\\\\\\n"'), text);
  assert.equal(valueOf(parseExposition(text), 'http_requests_total', { method: 'GET', route: odd, status: '200' }), 1);
});

test('numbers are written as Go reads them', () => {
  assert.equal(formatNumber(0.0005), '0.0005');
  assert.equal(formatNumber(1e-7), '1e-7');
  assert.equal(formatNumber(Infinity), '+Inf');
  assert.equal(formatNumber(-Infinity), '-Inf');
  assert.equal(formatNumber(Number.NaN), 'NaN');
});

test('promtool check metrics accepts the exposition with every kind of series in it', (t) => {
  const metrics = createMetrics({ ...fixedProbe, eventLoopDelay: () => ({ count: 0, sumSeconds: 0, maxSeconds: 0, quantiles: [[0.5, Number.NaN]] }) });
  metrics.responded('GET', '/v1/pets', 200, 0.001);
  metrics.responded('DELETE', '/v1/pets/{petId}', 204, 0.002);
  metrics.responded('GET', null, 404, 0.0001);
  metrics.rateLimitRejected('rate_limited');
  metrics.eventStreamOpened();
  metrics.webhookAttempted('http_status');
  metrics.webhookDeliveriesPending(2);
  const verdict = promtoolCheckMetrics(t, metrics.render());
  if (verdict === null) return;
  assert.deepEqual(verdict, { status: 0, output: '' });
});

test('counts of several registries (WORKERS) merge into what one registry that saw everything would expose, plus the requests of each worker', () => {
  const one = createMetrics(fixedProbe);
  const workers = [createMetrics(fixedProbe), createMetrics(fixedProbe)];
  const feed = (index: number, observe: (metrics: ReturnType<typeof createMetrics>) => void) => {
    observe(one);
    observe(workers[index]!);
  };
  feed(0, (m) => m.responded('GET', '/v1/pets', 200, 0.002));
  feed(1, (m) => m.responded('GET', '/v1/pets', 200, 0.0004));
  feed(1, (m) => m.responded('POST', '/v1/pets', 201, 0.03));
  feed(0, (m) => m.responded('GET', null, 404, 0.001));
  feed(1, (m) => m.rateLimitRejected('temporarily_banned'));
  feed(0, (m) => m.apiKeyRejected('missing_api_key'));
  feed(1, (m) => m.petCreated());
  feed(0, (m) => m.idempotentReplayed());
  feed(1, (m) => m.databaseError());
  // A gauge adds up across workers like the counters: 2 + 1 streams open, one closed since.
  feed(0, (m) => m.eventStreamOpened());
  feed(0, (m) => m.eventStreamOpened());
  feed(1, (m) => m.eventStreamOpened());
  feed(0, (m) => m.eventStreamClosed());
  feed(0, (m) => m.webhookAttempted('timeout'));
  feed(1, (m) => m.webhookAttempted(null));
  // Through a structured clone, as the counts cross threads.
  const counts = workers.map((metrics) => structuredClone(metrics.counts()));
  const merged = renderCounts(mergeCounts(counts), fixedProbe, counts.map(requestCount));
  const expected = one.render();
  assert.equal(merged.replace(/# HELP worker_requests_total[^]*?(?=# HELP process_resident)/, ''), expected);
  const exposition = parseExposition(merged);
  assert.equal(valueOf(exposition, 'worker_requests_total', { worker: '1' }), 2);
  assert.equal(valueOf(exposition, 'worker_requests_total', { worker: '2' }), 2);
  assert.equal(valueOf(exposition, 'event_streams_open', {}), 2);
});

test('the event-loop delay of several workers is the slowest worker\'s, counts added', () => {
  const quiet = { count: 100, sumSeconds: 0.1, maxSeconds: 0.01, quantiles: [[0.5, 0.001], [0.99, 0.005]] as const };
  const busy = { count: 50, sumSeconds: 0.5, maxSeconds: 0.2, quantiles: [[0.5, 0.002], [0.99, 0.1]] as const };
  assert.deepEqual(worstDelay([quiet, busy]), { count: 150, sumSeconds: 0.6, maxSeconds: 0.2, quantiles: [[0.5, 0.002], [0.99, 0.1]] });
});
