/**
 * What each operation with an Idempotency-Key makes, and so what its records keep, in its stored
 * form (stored-forms.ts): the API answers a replay from it with the function that built the first
 * answer. A new such operation names its value and its form here; the type check fails until it
 * does. The value must hold everything the first answer shows (a secret shown once included),
 * since the replay is built from it alone.
 */
import type { IdempotencyOperation } from './idempotency.ts';
import type { Order } from './order-record.ts';
import type { Pet } from './pets.ts';
import { ORDER_FORM, PET_FORM, type StoredForm } from './stored-forms.ts';
import { CREATED_WEBHOOK_FORM, type CreatedWebhook } from './webhooks.ts';

export interface Made {
  createPet: Pet;
  placeOrder: Order;
  /** The webhook and its secret, which the first answer shows, and so its replay. */
  createWebhook: CreatedWebhook;
}

export const MADE_FORMS: { [Op in IdempotencyOperation]: StoredForm<Made[Op]> } = {
  createPet: PET_FORM,
  placeOrder: ORDER_FORM,
  createWebhook: CREATED_WEBHOOK_FORM,
};
