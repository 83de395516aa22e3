/**
 * Webhooks serialised by hand, in the interface's field order (id, url, types, orders, status,
 * createdAt; a creation's answer adds `secret` last), with instants as RFC 3339 UTC with
 * milliseconds. Also the answers built from them (a creation's, built again for the replay of
 * its Idempotency-Key from what the record keeps), and the delivery log.
 */
import type { Reply } from '../../http/reply.ts';
import type { CreatedWebhook, DeliveryAttempt, Webhook } from '../../storage/webhooks.ts';
import { locationOf } from '../operation.ts';
import { OPERATIONS } from '../operations.ts';

/** The fields of a webhook, without the closing brace: a creation's answer appends its secret. */
function webhookFields(webhook: Webhook): string {
  return `{"id":${webhook.id},"url":${JSON.stringify(webhook.url)},"types":${JSON.stringify(webhook.types)},` +
    `"orders":"${webhook.orders}","status":"${webhook.status}","createdAt":"${new Date(webhook.createdAt).toISOString()}"`;
}

/** `{"id":..,"url":..,"types":[..],"orders":..,"status":..,"createdAt":..}`: never the secret. */
export function webhookJson(webhook: Webhook): string {
  return `${webhookFields(webhook)}}`;
}

/** A JSON array of webhooks. */
export function webhooksJson(webhooks: readonly Webhook[]): string {
  return `[${webhooks.map(webhookJson).join(',')}]`;
}

/** A 200 answer with the webhook. */
export function webhookReply(webhook: Webhook): Reply {
  return { status: 200, body: webhookJson(webhook) };
}

/** The 201 answer of a webhook created: the webhook, then its secret, the only answer that shows it. */
export function createdWebhook({ webhook, secret }: CreatedWebhook): Reply {
  return {
    status: 201,
    body: `${webhookFields(webhook)},"secret":${JSON.stringify(secret)}}`,
    headers: { Location: locationOf(OPERATIONS.createWebhook, webhook.id) },
  };
}

/** One attempt of the delivery log: `{"eventId":..,"attempt":..,"attemptedAt":..,"status":..,"error":..,"durationMs":..}`. */
export function deliveryAttemptJson(attempt: DeliveryAttempt): string {
  return `{"eventId":${attempt.eventId},"attempt":${attempt.attempt},"attemptedAt":"${new Date(attempt.attemptedAt).toISOString()}",` +
    `"status":${attempt.status ?? 'null'},"error":${attempt.error === null ? 'null' : `"${attempt.error}"`},"durationMs":${Math.max(0, Math.round(attempt.durationMs))}}`;
}

/** A JSON array of attempts, in the order given (newest first). */
export function deliveryAttemptsJson(attempts: readonly DeliveryAttempt[]): string {
  return `[${attempts.map(deliveryAttemptJson).join(',')}]`;
}
