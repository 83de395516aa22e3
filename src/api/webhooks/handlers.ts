/**
 * The handlers of the webhook operations, by the operationId of their entry in ../operations.ts.
 * Every one acts on the key's own account: another account's webhook is, to it, a webhook that
 * does not exist. A URL is held to the address policy (webhooks/address-policy.ts) at creation
 * and at every change of it, its host resolved then and there; `orders: "all"` needs
 * `orders:manage`, decided once the body is valid.
 */
import { insufficientScopeError } from '../../http/bearer.ts';
import { httpError } from '../../http/api-error.ts';
import type { Resolver } from '../../http/outbound-resolution.ts';
import type { Reply } from '../../http/reply.ts';
import type { Caller } from '../../keys/caller.ts';
import type { RandomBytes } from '../../keys/api-keys.ts';
import { allows } from '../../keys/scopes.ts';
import { EVENT_TYPES } from '../../storage/events.ts';
import { MAX_WEBHOOKS_PER_ACCOUNT, type CreatedWebhook, type WebhookCreation, type WebhookCreationResult, type WebhookOrders, type WebhooksStore } from '../../storage/webhooks.ts';
import type { IdempotencyConflict } from '../../storage/idempotency.ts';
import { vetWebhookUrl, type AddressPolicy } from '../../webhooks/address-policy.ts';
import { generateSecret } from '../../webhooks/signature.ts';
import { cutPage, decodeCursor } from '../cursor.ts';
import { apiError } from '../errors.ts';
import { fingerprintBody, parseIdempotencyKey } from '../idempotency.ts';
import { createIdempotentWrites } from '../idempotent-writes.ts';
import type { Handlers } from '../operations.ts';
import { createdWebhook, deliveryAttemptsJson, webhookReply, webhooksJson } from './json.ts';

/** The store's operations that the API uses (the delivery worker uses the rest). */
export type WebhooksApiStore = Pick<WebhooksStore, 'create' | 'list' | 'get' | 'change' | 'remove' | 'attempts' | 'findIdempotencyRecord'>;

export interface WebhooksHandlersDeps {
  webhooks: WebhooksApiStore;
  clock: () => number;
  /** The rules of WEBHOOK_ALLOWED_NETWORKS. */
  policy: AddressPolicy;
  /** Resolves a URL's host, to check every address it has: the system's, or a test's own names. */
  resolve: Resolver;
  /** The source of secrets' bytes; crypto's by default. */
  randomBytes?: RandomBytes;
  /** Told of every creation answered from its Idempotency-Key record. */
  replayed?: () => void;
}

/** The longest a URL's host may take to resolve before the request is refused, in ms. */
export const RESOLVE_TIMEOUT_MS = 5_000;

const webhookNotFound = (webhookId: bigint) => apiError('webhook_not_found', webhookId);

/** The 403 of `orders: "all"` from a key without `orders:manage`. */
const needsManage = () => insufficientScopeError('orders:manage', 'have a webhook deliver every account\'s order events');

/** A path's id as the store's number, or null for one no webhook can have (below 1, or past 2^53). */
function storeId(webhookId: bigint): number | null {
  return webhookId >= 1n && webhookId <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(webhookId) : null;
}

function isConflict(result: WebhookCreationResult): result is IdempotencyConflict<CreatedWebhook> {
  return 'conflict' in result;
}

/** Builds the webhook handlers. */
export function createWebhooksHandlers({ webhooks, clock, policy, resolve, randomBytes, replayed = () => {} }: WebhooksHandlersDeps): Pick<
  Handlers,
  'listWebhooks' | 'createWebhook' | 'getWebhook' | 'updateWebhook' | 'deleteWebhook' | 'listWebhookDeliveries'
> {
  const write = createIdempotentWrites({ clock, replayed });

  /** The URL as it is stored and called (normalised by the URL parser), or `400 invalid_body` saying why not. */
  async function vetted(url: string): Promise<string> {
    const checked = await vetWebhookUrl(url, policy, resolve, AbortSignal.timeout(RESOLVE_TIMEOUT_MS));
    if (!checked.ok) throw httpError('invalid_body', `Invalid body: ${checked.reason}.`);
    return checked.value.url.href;
  }

  /** The answer to a creation the store made, or why it did not. */
  function answer(result: Exclude<WebhookCreationResult, IdempotencyConflict<CreatedWebhook>>): Reply {
    if (result.kind === 'too_many_webhooks') throw apiError('too_many_webhooks', result.limit);
    return createdWebhook(result);
  }

  /** The checks of a body's values after its schema's, in order: the URL (400), then the scope of `orders` (403). */
  async function checkedValues(caller: Caller, url: string | undefined, orders: WebhookOrders | undefined): Promise<string | undefined> {
    const href = url === undefined ? undefined : await vetted(url);
    if (orders === 'all' && !allows(caller.scopes, 'orders:manage')) throw needsManage();
    return href;
  }

  /** The path's webhook of the caller's account (400 for a bad path, 404 for none). */
  async function target(context: { path(): { webhookId: bigint }; caller: Caller }) {
    const { webhookId } = context.path();
    const id = storeId(webhookId);
    const webhook = id === null ? null : await webhooks.get(context.caller.account, id);
    if (webhook === null) throw webhookNotFound(webhookId);
    return { webhookId, id: webhook.id, webhook };
  }

  return {
    async listWebhooks(context) {
      const { limit, cursor } = context.query();
      const after = cursor === undefined ? 0n : decodeCursor(cursor);
      // No webhook has an id past 2^53: the page after such a cursor is empty.
      const afterId = after > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(after);
      // One row more than asked tells whether a next page exists without a COUNT.
      const page = await webhooks.list({ account: context.caller.account, afterId, limit: limit + 1 });
      const headers = cutPage(context.operation, page, { limit, status: undefined });
      return { status: 200, body: webhooksJson(page), headers };
    },

    async createWebhook(context) {
      // The Idempotency-Key header is the first check of step 5, before the body is looked at.
      const key = parseIdempotencyKey(context.req.headers['idempotency-key']);
      const { value, sent } = await context.body();
      const { caller } = context;
      const creation = async (now: number): Promise<WebhookCreation> => ({
        account: caller.account,
        url: (await checkedValues(caller, value.url, value.orders))!,
        types: value.types ?? EVENT_TYPES,
        orders: value.orders,
        secret: generateSecret(randomBytes),
        now,
        maxPerAccount: MAX_WEBHOOKS_PER_ACCOUNT,
      });
      if (key === null) {
        const result = await webhooks.create(await creation(clock()));
        // Without a key, the store meets no key's conflict.
        if (isConflict(result)) throw new Error('a creation without an Idempotency-Key met a conflict');
        return answer(result);
      }
      // A key that may not ask for `all` (any more) is refused as a first request would be, and
      // never shown the secret of a replay.
      if (value.orders === 'all' && !allows(caller.scopes, 'orders:manage')) await checkedValues(caller, value.url, value.orders);
      // A retry is answered from the record before its URL is resolved again: the same answer,
      // whatever the host resolves to now. Fingerprinted as sent, before defaults.
      const fingerprint = fingerprintBody(sent);
      return write(`createWebhook ${caller.id} ${key}`, fingerprint, {
        lookup: (now) => webhooks.findIdempotencyRecord(caller.id, key, now),
        submit: async (now) => webhooks.create({ ...(await creation(now)), idempotency: { apiKeyId: caller.id, key, fingerprint, createdAt: now } }),
        answer,
        // The record keeps the webhook and its secret: the replay is the first 201, secret included.
        again: createdWebhook,
      });
    },

    async getWebhook(context) {
      return webhookReply((await target(context)).webhook);
    },

    async updateWebhook(context) {
      const { webhookId, id, webhook } = await target(context);
      const { value: patch } = await context.body();
      const { caller } = context;
      if (Object.keys(patch).length === 0) return webhookReply(webhook);
      // A change to a webhook that stays `all` (its URL, its types, its status) directs every
      // account's order events as much as setting `all` does: it needs `orders:manage` too.
      const url = await checkedValues(caller, patch.url, patch.orders ?? webhook.orders);
      const changed = await webhooks.change({
        id, account: caller.account, now: clock(),
        ...(url !== undefined ? { url } : {}),
        ...(patch.types !== undefined ? { types: patch.types } : {}),
        ...(patch.orders !== undefined ? { orders: patch.orders } : {}),
        ...(patch.status !== undefined ? { status: patch.status } : {}),
      });
      if (changed === null) throw webhookNotFound(webhookId);
      return webhookReply(changed);
    },

    async deleteWebhook(context) {
      const { webhookId } = context.path();
      const id = storeId(webhookId);
      if (id === null || !(await webhooks.remove(context.caller.account, id))) throw webhookNotFound(webhookId);
      return { status: 204, body: '' };
    },

    async listWebhookDeliveries(context) {
      const { webhookId } = context.path();
      const id = storeId(webhookId);
      const attempts = id === null ? null : await webhooks.attempts(context.caller.account, id);
      if (attempts === null) throw webhookNotFound(webhookId);
      return { status: 200, body: deliveryAttemptsJson(attempts) };
    },
  };
}
