/**
 * Webhooks as every storage engine keeps them: an account's endpoints, the deliveries of the
 * events each endpoint sees, and the log of attempts. The rules that do not depend on the engine
 * live here, so that SQLite and PostgreSQL cannot drift apart.
 *
 * A delivery is written in the same transaction as its event: an engine inserts one for every
 * enabled webhook that sees the event (`sees`), where it appends the event. The delivery worker
 * then claims due deliveries for a lease (`claimDue`): a claim is held by one holder until the
 * lease ends, so at most one instance attempts a delivery at a time, and a holder that died
 * leaves its deliveries to the next claim once the lease has run out. Each attempt is recorded
 * (`recordAttempt`): the delivery is then done, due again later, or abandoned, and the
 * endpoint's failing time decides whether it is disabled (webhooks/retries.ts).
 */
import type { MaybePromise } from '../lib/maybe-promise.ts';
import type { DeliveryError } from '../webhooks/terms.ts';
import type { EventType, StoredEvent } from './events.ts';
import type { IdempotencyConflict, IdempotencyRecord, IdempotencyWrite } from './idempotency.ts';
import type { StoredForm } from './stored-forms.ts';
import { rowId } from './row-ids.ts';

/** Whose order events a webhook gets: its account's orders', or every order's (`orders:manage`). */
export const WEBHOOK_ORDERS = ['own', 'all'] as const;
export type WebhookOrders = (typeof WEBHOOK_ORDERS)[number];

export const WEBHOOK_STATUSES = ['enabled', 'disabled'] as const;
export type WebhookStatus = (typeof WEBHOOK_STATUSES)[number];

/** The most webhooks one account may have. */
export const MAX_WEBHOOKS_PER_ACCOUNT = 10;
/** The attempts of a webhook kept for its delivery log: the newest ones. */
export const ATTEMPTS_KEPT = 100;

/** A webhook as the API shows it (never its secret, which only its creation answers with). */
export interface Webhook {
  id: number;
  account: string;
  url: string;
  types: readonly EventType[];
  orders: WebhookOrders;
  status: WebhookStatus;
  /** ms since the epoch. */
  createdAt: number;
}

/** A webhook made, with the secret that signs its deliveries. */
export interface CreatedWebhook {
  webhook: Webhook;
  /** `whsec_` and the base64 of 32 random bytes (webhooks/signature.ts). */
  secret: string;
}

export interface WebhookCreation {
  account: string;
  url: string;
  types: readonly EventType[];
  orders: WebhookOrders;
  secret: string;
  now: number;
  /** MAX_WEBHOOKS_PER_ACCOUNT, counted in the creation's transaction. */
  maxPerAccount: number;
  idempotency?: IdempotencyWrite;
}

export type WebhookCreationResult =
  | ({ kind: 'created' } & CreatedWebhook)
  | { kind: 'too_many_webhooks'; limit: number }
  | IdempotencyConflict<CreatedWebhook>;

/** A merge patch of a webhook of `account`: the fields present are set. */
export interface WebhookChange {
  id: number;
  account: string;
  url?: string;
  types?: readonly EventType[];
  orders?: WebhookOrders;
  status?: WebhookStatus;
  now: number;
}

export interface WebhookListOptions {
  account: string;
  afterId: number;
  limit: number;
}

/** One attempt, as the delivery log shows it. */
export interface DeliveryAttempt {
  eventId: number;
  /** 1 for the first attempt at this event, then 2, 3 ... */
  attempt: number;
  attemptedAt: number;
  /** The endpoint's HTTP status (a 3xx included), or null when none came. */
  status: number | null;
  error: DeliveryError | null;
  durationMs: number;
}

/** A delivery claimed for an attempt: what the worker sends, and where. */
export interface ClaimedDelivery {
  webhookId: number;
  account: string;
  orders: WebhookOrders;
  url: string;
  secret: string;
  /** The event, as stored; the worker renders it as the webhook's account sees it. */
  event: StoredEvent;
  /** The number of the attempt about to be made (1 for the first). */
  attempt: number;
}

/** What the worker records of one attempt at a claimed delivery. */
export interface AttemptRecord {
  delivery: ClaimedDelivery;
  /** Who claimed it: a record by a holder whose lease was taken over is ignored. */
  holder: string;
  outcome: DeliveryAttempt;
  /** After a failure: when the next attempt is due, or null when none is left (abandoned). Ignored on success. */
  retryAt: number | null;
  /** The endpoint is disabled if every attempt failed since this long (webhooks/retries.ts). */
  disableAfterMs: number;
}

/** The webhooks store of either engine. Every write is durable when it returns. */
export interface WebhooksStore {
  create(creation: WebhookCreation): MaybePromise<WebhookCreationResult>;
  list(options: WebhookListOptions): MaybePromise<Webhook[]>;
  /** The account's webhook, or null (none, or another account's). */
  get(account: string, id: number): MaybePromise<Webhook | null>;
  /** Applies the merge patch; null when the account has no such webhook. Enabling again resets its failing time. */
  change(change: WebhookChange): MaybePromise<Webhook | null>;
  /** Deletes the webhook and its pending deliveries and log; false when the account has no such webhook. */
  remove(account: string, id: number): MaybePromise<boolean>;
  /** Its newest ATTEMPTS_KEPT attempts, newest first; null when the account has no such webhook. */
  attempts(account: string, id: number): MaybePromise<DeliveryAttempt[] | null>;
  /** The live record of an API key's Idempotency-Key for createWebhook, or null. */
  findIdempotencyRecord(apiKeyId: string, key: string, now: number): MaybePromise<IdempotencyRecord<CreatedWebhook> | null>;

  /**
   * Claims up to `limit` deliveries due at `now` whose lease is free (never claimed, or ended),
   * for `holder` until `now + leaseMs`; on PostgreSQL with `FOR UPDATE SKIP LOCKED`, so that
   * concurrent claims by other instances take other deliveries. `skip`: webhooks not to claim for
   * now (their endpoint already has all the attempts it may run).
   */
  claimDue(holder: string, now: number, leaseMs: number, limit: number, skip: ReadonlySet<number>): MaybePromise<ClaimedDelivery[]>;
  /** Records an attempt and what follows it (done, due again, abandoned; the endpoint disabled). */
  recordAttempt(record: AttemptRecord): MaybePromise<void>;
  /** Gives back claims that were never attempted (the worker stopping), due at once again. */
  release(holder: string, deliveries: readonly ClaimedDelivery[]): MaybePromise<void>;
  /** How many deliveries wait (due or not, claimed or not): `webhook_deliveries_pending`. */
  pending(): MaybePromise<number>;
}

/** A created webhook in the stored form an Idempotency-Key record keeps (stored-forms.ts): the secret included, for the replay. */
export const CREATED_WEBHOOK_FORM: StoredForm<CreatedWebhook> = {
  toStored: ({ webhook, secret }) => ({ ...webhook, types: [...webhook.types], secret }),
  fromStored: (stored) => {
    const { secret, ...webhook } = stored as unknown as Webhook & { secret: string };
    return { webhook, secret };
  },
};

/** A webhook's row as both engines select it (`types` as an array: SQLite's are split from their text). */
export interface WebhookRow {
  id: number | string;
  account: string;
  url: string;
  types: readonly EventType[];
  orders: WebhookOrders;
  status: WebhookStatus;
  created_at: number | string;
}

export function toWebhook(row: WebhookRow): Webhook {
  return { id: rowId(row.id), account: row.account, url: row.url, types: row.types, orders: row.orders, status: row.status, createdAt: Number(row.created_at) };
}

/** An attempt's row as both engines select it. */
export interface AttemptRow {
  event_id: number | string;
  attempt: number;
  attempted_at: number | string;
  status: number | null;
  error: DeliveryError | null;
  duration_ms: number;
}

export function toDeliveryAttempt(row: AttemptRow): DeliveryAttempt {
  return { eventId: Number(row.event_id), attempt: row.attempt, attemptedAt: Number(row.attempted_at), status: row.status, error: row.error, durationMs: row.duration_ms };
}

/** Whether a webhook with `types` and `orders`, of `account`, gets `event`. */
export function sees(webhook: Pick<Webhook, 'account' | 'types' | 'orders'>, event: Pick<StoredEvent, 'type' | 'subject'>): boolean {
  if (!webhook.types.includes(event.type)) return false;
  if (event.subject.kind !== 'order' || webhook.orders === 'all') return true;
  return event.subject.order.account === webhook.account;
}
