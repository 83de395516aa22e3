/**
 * What each operation's Idempotency-Key record remembers: its 201, built once what was made has
 * its id. The create and order paths give theirs with each write; SQLite's writer thread
 * (src/writer.ts), which builds the record in its own transaction and cannot be sent a
 * function, is given this map of the same functions at its start.
 */
import { rememberedPlacement } from '../api/orders/json.ts';
import { rememberedCreation } from '../api/pets/json.ts';
import { rememberedWebhook } from '../api/webhooks/json.ts';
import type { Responders } from '../storage/stores.ts';

export const REMEMBERED: Responders = {
  createPet: rememberedCreation,
  placeOrder: rememberedPlacement,
  createWebhook: rememberedWebhook,
};
