/**
 * What the interface states of webhooks, in its schemas: the longest URL, and why an attempt
 * failed. Here rather than beside the policy (address-policy.ts) and the attempt (attempt.ts)
 * that apply them: the schemas are loaded by every start, and those two would bring the outbound
 * HTTP, the signature and the special-purpose address ranges with them, six modules that a start
 * does not need before its first webhook request or delivery (each about 0.3 ms of a start).
 */

/** The longest webhook URL, as written and once normalised. */
export const MAX_URL_LENGTH = 2048;

/** Why an attempt failed, as the delivery log says it; null is a success. */
export const DELIVERY_ERRORS = ['timeout', 'connection_failed', 'address_refused', 'redirect', 'http_status'] as const;
export type DeliveryError = (typeof DELIVERY_ERRORS)[number];
