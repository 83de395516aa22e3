/**
 * What each operation's Idempotency-Key record remembers: its 201, built once what was made has
 * its id. The create and order paths give theirs with each write; SQLite's writer thread
 * (src/writer.ts), which builds the record in its own transaction and cannot be sent a
 * function, is given this map of the same functions at its start.
 */
import { rememberedPlacement } from '../api/orders/json.ts';
import { rememberedCreation } from '../api/pets/json.ts';
import type { StoredResponse } from '../storage/idempotency.ts';
import type { Responders } from '../storage/stores.ts';
import type { CreatedWebhook } from '../storage/webhooks.ts';

/**
 * createWebhook's 201 until the webhooks' operations render their own: the webhook's fields in
 * the interface's order, the secret last, and its Location.
 */
function rememberedWebhook({ webhook, secret }: CreatedWebhook): StoredResponse {
  const { id, url, types, orders, status, createdAt } = webhook;
  return {
    status: 201,
    headers: { Location: `/v1/webhooks/${id}` },
    body: JSON.stringify({ id, url, types, orders, status, createdAt: new Date(createdAt).toISOString(), secret }),
  };
}

export const REMEMBERED: Responders = {
  createPet: rememberedCreation,
  placeOrder: rememberedPlacement,
  createWebhook: rememberedWebhook,
};
