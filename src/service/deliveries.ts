/**
 * The delivery worker: every DELIVERY_INTERVAL_MS it claims the due deliveries that the runner
 * has room for (webhooks/runner.ts: at most 16 attempts at once, 4 per endpoint; an endpoint
 * holding its 4 is skipped), renders each event as the webhook's account sees it (the feed's own
 * renderer), attempts it (webhooks/attempt.ts) and records the outcome, which decides what comes
 * next (storage/webhooks.ts, webhooks/retries.ts). Attempts run beside request handling, on the
 * same event loop, and never hold a request up: an attempt is only sockets and timers.
 *
 * Where it runs: in the single process, or in the primary thread of WORKERS (like the chores);
 * on PostgreSQL in every instance, the claims keeping them apart (a lease per claim, FOR UPDATE
 * SKIP LOCKED: docs/decisions/0027). Its holder is a random id per process, so a restarted
 * process does not mistake a dead one's claims for its own: those wait until their lease ends.
 *
 * Stopping (the drain): nothing more is claimed, the attempts running finish (each within its
 * 10 s deadline) and are recorded, and the claims not started yet are given back.
 *
 * What an attempt needs (the address policy, the outbound request, the signature, the events'
 * JSON: nine modules) is loaded with the first delivery claimed, not at start: a start loads
 * only the claiming, each module costing it about 0.3 ms before its first answer.
 */
import type { Clock } from '../clock.ts';
import type { Resolver } from '../http/outbound-resolution.ts';
import type { ClaimedDelivery, WebhooksStore } from '../storage/webhooks.ts';
import type { DeliveryError } from '../webhooks/terms.ts';
import { afterFailure, DISABLE_AFTER_MS } from '../webhooks/retries.ts';
import { createRunner } from '../webhooks/runner.ts';
import { loadedOnFirstUse } from '../lib/loaded-on-first-use.ts';

const { randomUUID } = process.getBuiltinModule('node:crypto');

/**
 * How often due deliveries are claimed: an event is attempted within about this long of its
 * commit. Polled, as the feed's long poll is (api/events/commit-waiter.ts): when nothing is due a
 * tick is one index probe on SQLite (the writer is not asked) and one claim statement on
 * PostgreSQL, while a wake by every commit would need LISTEN, which a transaction pooler forbids.
 */
export const DELIVERY_INTERVAL_MS = 250;
/** How long a claim is held: above an attempt's 10 s deadline and the time to record it. */
export const LEASE_MS = 30_000;
/** How often the pending deliveries are counted for the gauge. */
export const PENDING_INTERVAL_MS = 5_000;
/**
 * After a claim failed (the database down, say), the next waits this long, doubled at each
 * failure up to MAX_CLAIM_BACKOFF_MS: an outage costs the database and the log a line every few
 * seconds, not four a second, and deliveries resume within that much of its end.
 */
export const CLAIM_BACKOFF_MS = 1_000;
export const MAX_CLAIM_BACKOFF_MS = 8_000;

/** What the worker reports: the metrics (ops/metrics.ts), when METRICS_PORT is set. */
export interface DeliveriesObserver {
  webhookAttempted(error: DeliveryError | null): void;
  webhookDeliveriesPending(count: number): void;
}

export interface DeliveryWorkerDeps {
  store: WebhooksStore;
  clock: Clock;
  /** WEBHOOK_ALLOWED_NETWORKS, as an address policy checked again at every attempt. */
  allowedNetworks: readonly string[];
  /** WEBHOOK_RETRY_SCHEDULE, in seconds. */
  schedule: readonly number[];
  /** The system's resolver unless a test passes its own. */
  resolve?: Resolver;
  /** Certificates to trust instead of Node's roots: a test's own authority. */
  ca?: string;
  /** A random id per process unless a test names it. */
  holder?: string;
  leaseMs?: number;
  intervalMs?: number;
  /** PENDING_INTERVAL_MS unless a test shortens it. */
  pendingIntervalMs?: number;
  /** DISABLE_AFTER_MS unless a test shortens it. */
  disableAfterMs?: number;
  /** The attempt's deadline, 10 s unless a test shortens it. */
  deadlineMs?: number;
  /** Read at each report: the metrics may start after the worker. */
  observer?: () => DeliveriesObserver | null | undefined;
  /** One line of the operators' log (`webhook_attempt_failed`). */
  log(fields: Record<string, unknown>): void;
  /**
   * A database operation failed: a claim, a record, a count or a release (`webhook_claim_failed`,
   * `webhook_record_failed`, `webhook_count_failed`, `webhook_release_failed`).
   */
  failed(event: string, error: unknown): void;
  /**
   * An attempt threw instead of returning its outcome (`webhook_attempt_crashed`): a fault of this
   * code, not of the database or of the endpoint. Its claim ends with its lease, then it is tried again.
   */
  crashed(event: string, error: unknown): void;
}

export interface DeliveryWorker {
  /** Claims at once rather than at the next tick (a test, or a commit that made deliveries). */
  wake(): void;
  /** Claims and starts what is due now; resolves once claimed (not once attempted). */
  tick(): Promise<void>;
  /** Resolves once every attempt started has been recorded (tests). */
  idle(): Promise<void>;
  /** Stops claiming; resolves once the running attempts are recorded and the rest given back. */
  stop(): Promise<void>;
}

/** Starts the worker on a timer (unref'd: it never keeps the process alive). */
export function startDeliveryWorker(deps: DeliveryWorkerDeps): DeliveryWorker {
  const { store, clock, schedule, leaseMs = LEASE_MS, intervalMs = DELIVERY_INTERVAL_MS, disableAfterMs = DISABLE_AFTER_MS } = deps;
  const holder = deps.holder ?? randomUUID();
  /** The attempt, and the feed's renderer of an event: loaded with the first delivery claimed, then kept. */
  const attempting = loadedOnFirstUse(async () => {
    const [{ createAttempt }, { createAddressPolicy }, { systemResolver }, { eventJson }] = await Promise.all([
      import('../webhooks/attempt.ts'), import('../webhooks/address-policy.ts'), import('../http/outbound-resolution.ts'), import('../api/events/json.ts'),
    ]);
    const attempt = createAttempt({
      policy: createAddressPolicy(deps.allowedNetworks), resolve: deps.resolve ?? systemResolver, clock,
      ...(deps.ca === undefined ? {} : { ca: deps.ca }), ...(deps.deadlineMs === undefined ? {} : { deadlineMs: deps.deadlineMs }),
    });
    return { attempt, eventJson };
  });
  const running = new Set<Promise<void>>();

  async function deliver(delivery: ClaimedDelivery): Promise<void> {
    const { event } = delivery;
    const { attempt, eventJson } = await attempting.get();
    // The actor as a key of the webhook's account would see it in the feed; every actor with orders 'all'.
    const body = eventJson(event, { account: delivery.account, manage: delivery.orders === 'all' });
    const outcome = await attempt({ url: delivery.url, secret: delivery.secret, eventId: String(event.id), body });
    const failedAt = clock();
    const next = outcome.error === null ? null : afterFailure(schedule, delivery.attempt, failedAt);
    deps.observer?.()?.webhookAttempted(outcome.error);
    if (outcome.error !== null) {
      deps.log({
        level: 'warn', event: 'webhook_attempt_failed', webhookId: delivery.webhookId, eventId: event.id, attempt: delivery.attempt,
        error: outcome.error, status: outcome.status, detail: outcome.detail, durationMs: outcome.durationMs, abandoned: next !== null && 'abandoned' in next,
      });
    }
    try {
      await store.recordAttempt({
        delivery, holder, disableAfterMs,
        outcome: { eventId: event.id, attempt: delivery.attempt, attemptedAt: outcome.attemptedAt, status: outcome.status, error: outcome.error, durationMs: outcome.durationMs },
        retryAt: next === null || 'abandoned' in next ? null : next.retryAt,
      });
    } catch (error) {
      // The claim stays until its lease ends; then the delivery is attempted again (at least once).
      deps.failed('webhook_record_failed', error);
    }
  }

  const runner = createRunner<ClaimedDelivery>({
    run: (delivery) => {
      const done = deliver(delivery);
      running.add(done);
      return done.finally(() => running.delete(done));
    },
    endpointOf: (delivery) => String(delivery.webhookId),
    clock,
    failed: (_delivery, error) => deps.crashed('webhook_attempt_crashed', error),
  });

  let stopped = false;
  let claiming: Promise<void> | null = null;
  // Backing off after failed claims: no claim before `resumeAt` (a monotonic time).
  let backoff = 0;
  let resumeAt = 0;
  const claim = async () => {
    const load = runner.load();
    const room = load.free - load.queued;
    if (stopped || room <= 0 || performance.now() < resumeAt) return;
    const skip = new Set([...load.saturated].map(Number));
    const claimed = await store.claimDue(holder, clock(), leaseMs, room, skip);
    const refused = claimed.filter((delivery) => !runner.submit(delivery));
    if (refused.length > 0) await store.release(holder, refused);
  };
  const tick = (): Promise<void> => (claiming ??= claim()
    .then(() => {
      backoff = 0;
    }, (error: unknown) => {
      backoff = Math.min(MAX_CLAIM_BACKOFF_MS, backoff === 0 ? CLAIM_BACKOFF_MS : backoff * 2);
      resumeAt = performance.now() + backoff;
      deps.failed('webhook_claim_failed', error);
    })
    .finally(() => {
      claiming = null;
    }));

  let counting = false;
  const count = async () => {
    const observer = deps.observer?.();
    if (!observer || counting) return;
    counting = true;
    try {
      observer.webhookDeliveriesPending(await store.pending());
    } catch (error) {
      deps.failed('webhook_count_failed', error);
    } finally {
      counting = false;
    }
  };

  const timers = [setInterval(() => void tick(), intervalMs), setInterval(() => void count(), deps.pendingIntervalMs ?? PENDING_INTERVAL_MS)];
  for (const timer of timers) timer.unref();
  setImmediate(() => void count());

  return {
    wake: () => void tick(),
    tick,
    async idle() {
      // Settled, not fulfilled: an attempt that crashed was reported to `crashed` already.
      while (running.size > 0 || claiming !== null) await Promise.allSettled([...running, claiming]);
    },
    async stop() {
      stopped = true;
      for (const timer of timers) clearInterval(timer);
      await claiming;
      const unstarted = await runner.stop();
      try {
        await store.release(holder, unstarted);
      } catch (error) {
        deps.failed('webhook_release_failed', error);
      }
    },
  };
}
