/**
 * The service's metrics and their Prometheus text exposition (format 0.0.4), written by hand:
 * the format is a few lines of text per series, not worth a runtime package.
 *
 * The pipeline and the create path report what happens through their observer interfaces
 * (pipeline/observer.ts, api/pets/creations.ts) and know nothing of Prometheus; this registry implements both.
 * Counting is on the hot path, so a request costs a few array increments: label strings are
 * built when the metrics are scraped, never per request, and every label is bounded (the route
 * is the router's template or `other`, the method one of a fixed list or `other`).
 */
import type { PipelineObserver } from '../pipeline/observer.ts';
import type { CreationsObserver } from '../api/pets/creations.ts';
import type { OrdersObserver } from '../api/orders/placements.ts';
import { ORDER_STATUSES } from '../storage/orders.ts';
import { EVENT_TYPES } from '../storage/events.ts';
import type { EventsObserver } from '../api/events/observer.ts';
import type { StreamsObserver } from '../api/events/streams.ts';
import { DELIVERY_ERRORS, type DeliveryError } from '../webhooks/terms.ts';

/** The Content-Type of the text exposition format, version 0.0.4. */
export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * Upper bounds, in seconds, of the request-duration histogram's buckets. The service answers in
 * well under a millisecond to a few milliseconds (a create waits for its fsync), so the fine
 * buckets are at the low end; the last ones catch the 10 s shutdown grace.
 */
export const DURATION_BUCKETS: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Methods counted by name; any other method is counted as `other`. */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;
const METHOD_LABELS: readonly string[] = [...METHODS, 'other'];
const METHOD_INDEX: ReadonlyMap<string, number> = new Map(METHODS.map((method, index) => [method, index]));
const OTHER_METHOD = METHODS.length;

/** The route label of a request that matched no route of the router. */
export const OTHER_ROUTE = 'other';

/** node:http accepts statuses 100 to 999; one slot per status keeps counting an array index. */
const STATUS_SLOTS = 1000;

const RATE_LIMIT_CODES = ['rate_limited', 'temporarily_banned'] as const;
const API_KEY_CODES = ['missing_api_key', 'invalid_api_key', 'insufficient_scope'] as const;
const ORDER_STATUS_LABELS = ORDER_STATUSES;
/** The outcomes of a delivery attempt: a success, or the delivery log's error. */
const ATTEMPT_OUTCOMES = ['success', ...DELIVERY_ERRORS] as const;

/** What the process itself reports: read at each scrape, never on a request. */
export interface ProcessProbe {
  residentMemoryBytes(): number;
  cpuSeconds(): number;
  startTimeSeconds(): number;
  eventLoopDelay(): EventLoopDelay;
}

/** Event-loop delay since start, in seconds. */
export interface EventLoopDelay {
  count: number;
  sumSeconds: number;
  maxSeconds: number;
  /** [quantile, seconds] pairs, quantiles ascending. */
  quantiles: readonly (readonly [number, number])[];
}

/** What the delivery worker reports (service/deliveries.ts). */
export interface DeliveriesObserver {
  /** One attempt made, by its outcome (null: a success). */
  webhookAttempted(error: DeliveryError | null): void;
  /** The deliveries that wait, as the store counted them just now. */
  webhookDeliveriesPending(count: number): void;
}

/** The counters, fed through the observer interfaces, and their exposition. */
export interface Metrics extends PipelineObserver, CreationsObserver, OrdersObserver, EventsObserver, DeliveriesObserver, StreamsObserver {
  /** The whole exposition, families in a fixed order, ending with a newline. */
  render(): string;
  /**
   * What has been counted, as plain data that can cross threads and be summed (WORKERS: each
   * worker counts its own requests, and the primary thread renders the sum).
   */
  counts(): MetricsCounts;
}

/** Every counter of a registry; `mergeCounts` adds several up, `renderCounts` exposes them. */
export interface MetricsCounts {
  /** One entry per route seen, and the `other` route; any order. */
  routes: RouteSeries[];
  rateLimitRejections: Float64Array;
  apiKeyRejections: Float64Array;
  /** Orders that reached each status, in the order of ORDER_STATUSES. */
  ordersReached: Float64Array;
  /** Orders cancelled by the service because their holds ended (counted in ordersReached too). */
  ordersExpired: number;
  /** Events written, by type, in the order of EVENT_TYPES. */
  eventsWritten: Float64Array;
  /** Event streams open now (a gauge: summed across workers like the counters). */
  eventStreamsOpen: number;
  petsCreated: number;
  idempotentReplays: number;
  databaseErrors: number;
  /** Delivery attempts, by outcome, in the order of ATTEMPT_OUTCOMES. */
  webhookAttempts: Float64Array;
  /** The deliveries waiting, as last counted by this thread's delivery worker (0 where none runs). */
  webhookDeliveriesPending: number;
}

/** The series of one route: requests by method and status, and the duration histogram. */
interface RouteSeries {
  label: string;
  /** Per method index: counts indexed by status, allocated at the method's first request. */
  byMethod: (Float64Array | undefined)[];
  /** Requests per bucket (not cumulative; the last one is +Inf), cumulated when rendered. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

function routeSeries(label: string): RouteSeries {
  return { label, byMethod: [], buckets: new Float64Array(DURATION_BUCKETS.length + 1), sum: 0, count: 0 };
}

/** Creates an empty registry; `probe` supplies the process figures at each scrape. */
export function createMetrics(probe: ProcessProbe): Metrics {
  const routes = new Map<string, RouteSeries>();
  const other = routeSeries(OTHER_ROUTE);
  const rateLimitRejections = new Float64Array(RATE_LIMIT_CODES.length);
  const apiKeyRejections = new Float64Array(API_KEY_CODES.length);
  const ordersReached = new Float64Array(ORDER_STATUS_LABELS.length);
  let ordersExpired = 0;
  const eventsWritten = new Float64Array(EVENT_TYPES.length);
  let eventStreamsOpen = 0;
  let petsCreated = 0;
  let idempotentReplays = 0;
  let databaseErrors = 0;
  const webhookAttempts = new Float64Array(ATTEMPT_OUTCOMES.length);
  let webhookDeliveriesPending = 0;

  function seriesOf(route: string | null): RouteSeries {
    if (route === null) return other;
    let series = routes.get(route);
    // Routes come from the router's templates, so this map is as bounded as the router.
    if (series === undefined) routes.set(route, (series = routeSeries(route)));
    return series;
  }

  const counts = (): MetricsCounts => ({
    routes: [...routes.values(), other], rateLimitRejections, apiKeyRejections, ordersReached, ordersExpired, eventsWritten, eventStreamsOpen, petsCreated, idempotentReplays, databaseErrors,
    webhookAttempts, webhookDeliveriesPending,
  });

  return {
    responded(method, route, status, seconds) {
      const series = seriesOf(route);
      const methodIndex = METHOD_INDEX.get(method) ?? OTHER_METHOD;
      const counts = series.byMethod[methodIndex] ?? (series.byMethod[methodIndex] = new Float64Array(STATUS_SLOTS));
      counts[status < STATUS_SLOTS ? status : 0]!++;
      let bucket = 0;
      while (bucket < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[bucket]!) bucket++;
      series.buckets[bucket]!++;
      series.sum += seconds;
      series.count++;
    },
    rateLimitRejected(code) {
      rateLimitRejections[code === 'temporarily_banned' ? 1 : 0]!++;
    },
    apiKeyRejected(code) {
      apiKeyRejections[API_KEY_CODES.indexOf(code)]!++;
    },
    databaseError() {
      databaseErrors++;
    },
    petCreated() {
      petsCreated++;
    },
    orderReached(status) {
      ordersReached[ORDER_STATUS_LABELS.indexOf(status)]!++;
    },
    idempotentReplayed() {
      idempotentReplays++;
    },
    ordersExpired(count) {
      // An expiry is a cancellation, made by the service.
      ordersReached[ORDER_STATUS_LABELS.indexOf('cancelled')]! += count;
      ordersExpired += count;
    },
    eventsWritten(events) {
      for (const { type } of events) eventsWritten[EVENT_TYPES.indexOf(type)]!++;
    },
    eventsCounted(type, count) {
      eventsWritten[EVENT_TYPES.indexOf(type)]! += count;
    },
    eventStreamOpened() {
      eventStreamsOpen++;
    },
    eventStreamClosed() {
      eventStreamsOpen--;
    },
    webhookAttempted(error) {
      webhookAttempts[error === null ? 0 : ATTEMPT_OUTCOMES.indexOf(error)]!++;
    },
    webhookDeliveriesPending(count) {
      webhookDeliveriesPending = count;
    },
    render: () => renderCounts(counts(), probe),
    counts,
  };
}

/** The sum of several registries' counts (the workers' and the primary thread's). */
export function mergeCounts(all: readonly MetricsCounts[]): MetricsCounts {
  const routes = new Map<string, RouteSeries>();
  const total: MetricsCounts = {
    routes: [], rateLimitRejections: new Float64Array(RATE_LIMIT_CODES.length), apiKeyRejections: new Float64Array(API_KEY_CODES.length),
    ordersReached: new Float64Array(ORDER_STATUS_LABELS.length), ordersExpired: 0, eventsWritten: new Float64Array(EVENT_TYPES.length), eventStreamsOpen: 0, petsCreated: 0, idempotentReplays: 0, databaseErrors: 0,
    webhookAttempts: new Float64Array(ATTEMPT_OUTCOMES.length), webhookDeliveriesPending: 0,
  };
  for (const counts of all) {
    for (const series of counts.routes) {
      let sum = routes.get(series.label);
      if (sum === undefined) routes.set(series.label, (sum = routeSeries(series.label)));
      series.byMethod.forEach((byStatus, method) => {
        if (byStatus === undefined || byStatus === null) return;
        addInto(sum.byMethod[method] ?? (sum.byMethod[method] = new Float64Array(STATUS_SLOTS)), byStatus);
      });
      addInto(sum.buckets, series.buckets);
      sum.sum += series.sum;
      sum.count += series.count;
    }
    addInto(total.rateLimitRejections, counts.rateLimitRejections);
    addInto(total.apiKeyRejections, counts.apiKeyRejections);
    addInto(total.ordersReached, counts.ordersReached);
    total.ordersExpired += counts.ordersExpired;
    addInto(total.eventsWritten, counts.eventsWritten);
    total.eventStreamsOpen += counts.eventStreamsOpen;
    total.petsCreated += counts.petsCreated;
    total.idempotentReplays += counts.idempotentReplays;
    total.databaseErrors += counts.databaseErrors;
    addInto(total.webhookAttempts, counts.webhookAttempts);
    total.webhookDeliveriesPending += counts.webhookDeliveriesPending;
  }
  total.routes = [...routes.values()];
  return total;
}

function addInto(target: Float64Array, source: Float64Array): void {
  for (let i = 0; i < source.length; i++) target[i]! += source[i]!;
}

/** Requests answered by `counts`, all routes. */
export function requestCount(counts: MetricsCounts): number {
  return counts.routes.reduce((total, series) => total + series.count, 0);
}

/**
 * The exposition of `counts`: families in a fixed order, ending with a newline. `workers`, when
 * given, adds how many requests each worker thread answered (WORKERS), labelled 1 to N.
 */
export function renderCounts(counts: MetricsCounts, probe: ProcessProbe, workers?: readonly number[]): string {
  const out: string[] = [];
  const other = counts.routes.find((series) => series.label === OTHER_ROUTE);
  const all = counts.routes.filter((series) => series.label !== OTHER_ROUTE).sort((a, b) => (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
  if (other !== undefined && other.count > 0) all.push(other);

  family(out, 'http_requests_total', 'counter', 'Requests answered, by method, route template (or other) and status.');
  for (const series of all) {
    const route = escapeLabel(series.label);
    series.byMethod.forEach((byStatus, method) => {
      if (byStatus === undefined || byStatus === null) return;
      for (let status = 0; status < STATUS_SLOTS; status++) {
        if (byStatus[status]! > 0) out.push(`http_requests_total{method="${METHOD_LABELS[method]}",route="${route}",status="${status}"} ${byStatus[status]}`);
      }
    });
  }

  family(out, 'http_request_duration_seconds', 'histogram', 'Time from the request arriving to its answer being written, by route template (or other).');
  for (const series of all) {
    const route = escapeLabel(series.label);
    let cumulative = 0;
    DURATION_BUCKETS.forEach((bound, index) => {
      cumulative += series.buckets[index]!;
      out.push(`http_request_duration_seconds_bucket{route="${route}",le="${formatNumber(bound)}"} ${cumulative}`);
    });
    out.push(`http_request_duration_seconds_bucket{route="${route}",le="+Inf"} ${series.count}`);
    out.push(`http_request_duration_seconds_sum{route="${route}"} ${formatNumber(series.sum)}`);
    out.push(`http_request_duration_seconds_count{route="${route}"} ${series.count}`);
  }

  family(out, 'rate_limit_rejections_total', 'counter', 'Requests refused with 429 by the rate limiter, by error code.');
  RATE_LIMIT_CODES.forEach((code, index) => out.push(`rate_limit_rejections_total{code="${code}"} ${counts.rateLimitRejections[index]}`));
  family(out, 'api_key_rejections_total', 'counter', 'Requests refused for their API key (401) or its scopes (403), by error code.');
  API_KEY_CODES.forEach((code, index) => out.push(`api_key_rejections_total{code="${code}"} ${counts.apiKeyRejections[index]}`));
  single(out, 'pets_created_total', 'counter', 'Pets stored (a replayed create is not counted).', counts.petsCreated);
  single(out, 'idempotent_replays_total', 'counter', 'Creates and order placements answered from their Idempotency-Key record, making nothing.', counts.idempotentReplays);
  family(out, 'orders_total', 'counter', 'Orders that reached each status: placed, approved, completed, cancelled (expiries included).');
  ORDER_STATUS_LABELS.forEach((status, index) => out.push(`orders_total{status="${status}"} ${counts.ordersReached[index]}`));
  family(out, 'events_total', 'counter', 'Events written to the log, by type.');
  EVENT_TYPES.forEach((type, index) => out.push(`events_total{type="${type}"} ${counts.eventsWritten[index]}`));
  single(out, 'event_streams_open', 'gauge', 'Event streams (GET /v1/events as text/event-stream) open now.', counts.eventStreamsOpen);
  single(out, 'orders_expired_total', 'counter', 'Placed orders cancelled by the service because their hold ended (also counted in orders_total{status="cancelled"}).', counts.ordersExpired);
  single(out, 'database_errors_total', 'counter', 'Requests answered 503 or 500 because of a database error, and failed background saves.', counts.databaseErrors);
  family(out, 'webhook_attempts_total', 'counter', 'Webhook delivery attempts made by this instance, by outcome: success, or why the attempt failed.');
  ATTEMPT_OUTCOMES.forEach((outcome, index) => out.push(`webhook_attempts_total{outcome="${outcome}"} ${counts.webhookAttempts[index]}`));
  single(out, 'webhook_deliveries_pending', 'gauge', 'Webhook deliveries waiting (due or not, claimed or not), in the whole database, as last counted.', counts.webhookDeliveriesPending);
  if (workers !== undefined) {
    family(out, 'worker_requests_total', 'counter', 'Requests answered by each worker thread (WORKERS), numbered from 1.');
    workers.forEach((requests, index) => out.push(`worker_requests_total{worker="${index + 1}"} ${requests}`));
  }
  renderProcess(out, probe);
  return `${out.join('\n')}\n`;
}

/**
 * The event-loop delay of several threads as one summary: counts and sums added, the maximum and
 * each quantile the highest of any thread (quantiles cannot be merged exactly; the slowest
 * worker is the one a request may wait on).
 */
export function worstDelay(delays: readonly EventLoopDelay[]): EventLoopDelay {
  const seen = delays.filter((delay) => delay.count > 0);
  if (seen.length === 0) return delays[0] ?? { count: 0, sumSeconds: 0, maxSeconds: 0, quantiles: [] };
  return {
    count: seen.reduce((total, delay) => total + delay.count, 0),
    sumSeconds: seen.reduce((total, delay) => total + delay.sumSeconds, 0),
    maxSeconds: Math.max(...seen.map((delay) => delay.maxSeconds)),
    quantiles: seen[0]!.quantiles.map(([quantile], index) => [quantile, Math.max(...seen.map((delay) => delay.quantiles[index]![1]))] as const),
  };
}

function renderProcess(out: string[], probe: ProcessProbe): void {
  single(out, 'process_resident_memory_bytes', 'gauge', 'Resident memory size in bytes.', probe.residentMemoryBytes());
  single(out, 'process_cpu_seconds_total', 'counter', 'Total user and system CPU time spent in seconds.', probe.cpuSeconds());
  single(out, 'process_start_time_seconds', 'gauge', 'Start time of the process since unix epoch in seconds.', probe.startTimeSeconds());
  const delay = probe.eventLoopDelay();
  family(out, 'nodejs_eventloop_delay_seconds', 'summary', 'How late the event loop ran a timer, sampled every 10 ms since start.');
  for (const [quantile, seconds] of delay.quantiles) out.push(`nodejs_eventloop_delay_seconds{quantile="${formatNumber(quantile)}"} ${formatNumber(seconds)}`);
  out.push(`nodejs_eventloop_delay_seconds_sum ${formatNumber(delay.sumSeconds)}`);
  out.push(`nodejs_eventloop_delay_seconds_count ${delay.count}`);
  single(out, 'nodejs_eventloop_delay_max_seconds', 'gauge', 'The longest event-loop delay since start.', delay.maxSeconds);
}

function family(out: string[], name: string, type: 'counter' | 'gauge' | 'histogram' | 'summary', help: string): void {
  out.push(`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`);
}

function single(out: string[], name: string, type: 'counter' | 'gauge', help: string, value: number): void {
  family(out, name, type, help);
  out.push(`${name} ${formatNumber(value)}`);
}

/** A label value: backslash, double quote and line feed escaped (format 0.0.4). */
export function escapeLabel(value: string): string {
  return value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
}

/** HELP text: backslash and line feed escaped (format 0.0.4). */
function escapeHelp(text: string): string {
  return text.replaceAll('\\', '\\\\').replaceAll('\n', '\\n');
}

/** A sample value as Go's ParseFloat reads it: `+Inf`, `-Inf` and `NaN` spelled its way. */
export function formatNumber(value: number): string {
  if (Number.isFinite(value)) return String(value);
  if (Number.isNaN(value)) return 'NaN';
  return value > 0 ? '+Inf' : '-Inf';
}
