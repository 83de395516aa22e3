/**
 * The Standard Webhooks signature (https://www.standardwebhooks.com/, the specification's
 * "Signature scheme"): the receiver recomputes HMAC-SHA256, keyed with the secret's decoded
 * bytes, over `<webhook-id>.<webhook-timestamp>.<body>` and compares it with `webhook-signature`.
 * The id lets it drop a repeated delivery; the timestamp, signed too, lets it refuse an old one
 * replayed. Secrets are `whsec_` and the standard base64 of 32 random bytes, the form the
 * specification's libraries (and Svix's) take as they are.
 */
import { createHmac, randomBytes as cryptoRandomBytes } from 'node:crypto';
import type { RandomBytes } from '../keys/api-keys.ts';

export const SECRET_PREFIX = 'whsec_';
/** 256 bits: the size of HMAC-SHA256's block-sized key that nothing can guess. */
export const SECRET_BYTES = 32;
/** `whsec_` and 44 characters of standard base64 (32 bytes, one `=` of padding). */
const SECRET_FORM = /^whsec_[A-Za-z0-9+/]{43}=$/;

/** A new webhook secret. The caller shows it once, in the creation's answer. */
export function generateSecret(randomBytes: RandomBytes = cryptoRandomBytes): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/** Whether `secret` has the form generateSecret gives. */
export function isSecret(secret: string): boolean {
  return SECRET_FORM.test(secret);
}

/** Any `whsec_` secret the specification's libraries take: standard base64 of at least one byte. */
const ANY_SECRET = /^whsec_(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$/;

/**
 * `v1,` and the base64 HMAC-SHA256 of `<id>.<timestamp>.<body>` keyed with the secret's bytes.
 * Secrets of other sizes than ours sign too, as the specification's libraries sign them.
 */
export function signatureOf(secret: string, id: string, timestamp: number, body: string): string {
  if (!ANY_SECRET.test(secret)) throw new Error('not a webhook secret');
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The headers of a delivery of `body` (an event's JSON) with id `id`, signed at `timestamp` (Unix seconds). */
export function deliveryHeaders(secret: string, id: string, timestamp: number, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signatureOf(secret, id, timestamp, body),
  };
}
