/**
 * One attempt at delivering an event to a webhook: the URL checked again against the policy as
 * it is now, the host resolved once and every address checked, then `POST <url>` with the event's
 * JSON and the Standard Webhooks headers, to a checked address only. It succeeds on any 2xx
 * within ATTEMPT_DEADLINE_MS, counted from the start (resolving and connecting included), and
 * never follows a redirect; it reads at most MAX_RESPONSE_BYTES of the answer and keeps none.
 * The outcome is what the delivery log records.
 */
import type { Clock } from '../clock.ts';
import { resolveChecked, type Resolver } from '../http/outbound-resolution.ts';
import { postOnce } from '../http/outbound-request.ts';
import type { AddressPolicy } from './address-policy.ts';
import { deliveryHeaders } from './signature.ts';
import type { DeliveryError } from './terms.ts';

/** An attempt's time, from its start to its last byte read: the contract's 10 s. */
export const ATTEMPT_DEADLINE_MS = 10_000;
/** The most of an answer's body read (and thrown away) before the connection is dropped. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

/** What one attempt sends. */
export interface Delivery {
  /** The webhook's URL, as stored. */
  readonly url: string;
  /** The webhook's secret (`whsec_...`). */
  readonly secret: string;
  /** The event's id, sent as `webhook-id`. */
  readonly eventId: string;
  /** The event's JSON, sent as it is. */
  readonly body: string;
}

export interface AttemptOutcome {
  /** When the attempt started, by the injected clock (ms); its second is `webhook-timestamp`. */
  readonly attemptedAt: number;
  /** The endpoint's HTTP status (a 3xx included), or null when none came. */
  readonly status: number | null;
  readonly error: DeliveryError | null;
  readonly durationMs: number;
  /** For the operator's log, never for the delivery log's readers: the refusal's reason, or the system's error code. */
  readonly detail: string | null;
}

export interface AttemptDeps {
  policy: AddressPolicy;
  resolve: Resolver;
  clock: Clock;
  /** A monotonic clock for durations, in ms: `performance.now` unless a test passes its own. */
  elapsed?: () => number;
  /** ATTEMPT_DEADLINE_MS unless a test shortens it. */
  deadlineMs?: number;
  maxResponseBytes?: number;
  /** Certificates to trust instead of Node's roots: a test's own authority. */
  ca?: string;
}

export type Attempt = (delivery: Delivery) => Promise<AttemptOutcome>;

/** The attempt function, with its dependencies bound. Never rejects: every failure is an outcome. */
export function createAttempt(deps: AttemptDeps): Attempt {
  const { clock, elapsed = () => performance.now(), deadlineMs = ATTEMPT_DEADLINE_MS } = deps;
  return async (delivery) => {
    const attemptedAt = clock();
    const started = elapsed();
    const deadline = new AbortController();
    const timer = setTimeout(() => deadline.abort(), deadlineMs);
    try {
      const result = await reach(deps, delivery, Math.floor(attemptedAt / 1000), deadline.signal);
      return { attemptedAt, ...result, durationMs: Math.max(0, Math.round(elapsed() - started)) };
    } finally {
      clearTimeout(timer);
    }
  };
}

type Result = Pick<AttemptOutcome, 'status' | 'error' | 'detail'>;

async function reach(deps: AttemptDeps, delivery: Delivery, timestamp: number, signal: AbortSignal): Promise<Result> {
  const { policy, resolve } = deps;
  const failed = (code: string): Result => ({ status: null, error: signal.aborted ? 'timeout' : 'connection_failed', detail: code });
  const checked = policy.checkUrl(delivery.url);
  if (!checked.ok) return { status: null, error: 'address_refused', detail: checked.reason };
  const target = checked.value;
  const resolution = await resolveChecked(target.hostname, { resolve, refusal: (address) => policy.refusal(target, address), signal });
  if ('refused' in resolution) return { status: null, error: 'address_refused', detail: resolution.refused };
  if ('failed' in resolution) return failed(resolution.failed);
  const answer = await postOnce({
    url: target.url,
    addresses: resolution.addresses,
    headers: deliveryHeaders(delivery.secret, delivery.eventId, timestamp, delivery.body),
    body: delivery.body,
    maxResponseBytes: deps.maxResponseBytes ?? MAX_RESPONSE_BYTES,
    signal,
    ...(deps.ca === undefined ? {} : { ca: deps.ca }),
  });
  if ('failed' in answer) return failed(answer.failed);
  return { status: answer.status, error: errorOf(answer.status), detail: null };
}

/** A status as the delivery log classes it: any 2xx succeeds, a 3xx is a redirect not followed. */
export function errorOf(status: number): DeliveryError | null {
  if (status >= 200 && status <= 299) return null;
  return status >= 300 && status <= 399 ? 'redirect' : 'http_status';
}
