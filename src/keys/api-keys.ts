/**
 * The API key format: `pk_live_` (production) or `pk_test_` (staging, development), then 43
 * base64url characters encoding 32 random bytes, then 6 base64url characters encoding the CRC-32
 * of those 43 characters (big-endian, unpadded). 57 characters in all, for example
 * `pk_test_3q2-7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAbhbdYw`.
 *
 * The checksum is for typos (a mistyped key is refused without touching the database) and for
 * secret scanners (a leaked key is recognised with few false alarms). It is no defence: anyone can
 * compute a CRC-32, so a made-up key with a valid one is looked up like a real key. The
 * environment prefix keeps a production key from working on staging (and shows which is which
 * when one leaks). Only `hashApiKey(key)` is ever stored.
 */
import type { AppEnv } from '../config.ts';
import { crc32 } from '../lib/crc32.ts';

const { hash, randomBytes: cryptoRandomBytes } = process.getBuiltinModule('node:crypto');

/** A source of random bytes with the shape of `crypto.randomBytes`; tests pass a fixed one. */
export type RandomBytes = (size: number) => Buffer;

const RANDOM_BYTES = 32;
/** base64url of 32 bytes, unpadded. */
const RANDOM_CHARS = 43;
/** base64url of a 4-byte CRC-32, unpadded. */
const CHECKSUM_CHARS = 6;
const PREFIX_CHARS = 8;

/** Length of every well-formed key. */
export const API_KEY_LENGTH = PREFIX_CHARS + RANDOM_CHARS + CHECKSUM_CHARS;

/** The prefix of the keys of `env`. */
export function apiKeyPrefix(env: AppEnv): 'pk_live_' | 'pk_test_' {
  return env === 'production' ? 'pk_live_' : 'pk_test_';
}

/** A new random key for `env`. The caller shows it once and stores only its hash. */
export function generateApiKey(env: AppEnv, randomBytes: RandomBytes = cryptoRandomBytes): string {
  const random = randomBytes(RANDOM_BYTES).toString('base64url');
  return apiKeyPrefix(env) + random + checksumOf(random);
}

function checksumOf(random: string): string {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(crc32(random));
  return bytes.toString('base64url');
}

/**
 * Whether `key` has the shape of a key of `env`: its prefix, length, alphabet and checksum.
 * Runs on every request before any database work, so it decodes the checksum arithmetically
 * instead of building strings or buffers.
 */
export function isWellFormedApiKey(key: string, env: AppEnv): boolean {
  if (key.length !== API_KEY_LENGTH || !key.startsWith(apiKeyPrefix(env))) return false;
  for (let i = PREFIX_CHARS; i < PREFIX_CHARS + RANDOM_CHARS; i++) {
    if (sextet(key.charCodeAt(i)) < 0) return false;
  }
  // 6 sextets = 36 bits: the 32-bit CRC followed by 4 zero padding bits. Floats hold 2^36 exactly.
  let checksum = 0;
  for (let i = PREFIX_CHARS + RANDOM_CHARS; i < API_KEY_LENGTH; i++) {
    const value = sextet(key.charCodeAt(i));
    if (value < 0) return false;
    checksum = checksum * 64 + value;
  }
  if (checksum % 16 !== 0) return false;
  return checksum / 16 === crc32(key.slice(PREFIX_CHARS, PREFIX_CHARS + RANDOM_CHARS));
}

/** The value of a base64url character, or -1. */
function sextet(code: number): number {
  if (code >= 65 && code <= 90) return code - 65; // A-Z
  if (code >= 97 && code <= 122) return code - 71; // a-z
  if (code >= 48 && code <= 57) return code + 4; // 0-9
  if (code === 45) return 62; // -
  if (code === 95) return 63; // _
  return -1;
}

/**
 * The stored form of a key: SHA-256, lowercase hex. A plain hash suffices (no salt, no slow KDF)
 * because the key carries 256 random bits; nothing is left to brute-force.
 */
export function hashApiKey(key: string): string {
  // The one-shot hash is about 3x cheaper than createHash() for a key this short (measured).
  return hash('sha256', key, 'hex');
}

/**
 * `hashApiKey` of a well-formed key of `env`, null for any other token: the format check comes
 * first, so a mistyped key costs no hashing and no database read (a made-up key with a valid
 * checksum does get both; the per-address limit is what slows guessing).
 */
export function wellFormedKeyHash(token: string, env: AppEnv): string | null {
  return isWellFormedApiKey(token, env) ? hashApiKey(token) : null;
}

/**
 * `wellFormedKeyHash`, worked out once per
 * connection: a keep-alive client sends the same key with every request, and the format check
 * and the SHA-256 cost about 2 us of each request's CPU.
 *
 * Only a connection's last token is remembered, for as long as the connection lives (a WeakMap
 * lets it go with the socket). A token is compared only with one sent on the same connection,
 * so how long the comparison takes tells a client nothing about anybody else's key.
 */
export function createConnectionKeyHasher(env: AppEnv): (token: string, connection: object) => string | null {
  const last = new WeakMap<object, { token: string; keyHash: string | null }>();
  return (token, connection) => {
    const seen = last.get(connection);
    if (seen !== undefined && seen.token === token) return seen.keyHash;
    const keyHash = wellFormedKeyHash(token, env);
    last.set(connection, { token, keyHash });
    return keyHash;
  };
}
