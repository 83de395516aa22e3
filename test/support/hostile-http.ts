/**
 * What the hostile-request properties share: a limiter that refuses no one, the check that an
 * answer is one the contract allows (an error in at most 1 KiB), raw request bytes, and
 * generators of header-line bytes, If-Match values and the worst cases of worst-cases.ts at any
 * size up to the caps.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createLimiter, type RateLimiter } from '../../src/limits/limiter.ts';
import type { RawResponse } from './raw-http.ts';
import { anyCodePoint, CONTRACT_ERRORS, MAX_ERROR_BODY_BYTES } from './property.ts';
import { worstRequest, type WorstCase } from './worst-cases.ts';

/** Never refuses, but answers with a real limiter's headers. */
export function roomyLimiter(): RateLimiter {
  const limiter = createLimiter({ clock: () => 0, banThreshold: 30, banSeconds: 900 });
  return { take: (caller) => limiter.take(caller, { perMinute: 1_000_000_000, perDay: 1_000_000_000 }) };
}

/** What one operation may answer: status to the codes allowed with it (empty for success). */
export type Allowed = Readonly<Record<number, readonly string[]>>;

/** Every answer of every request here may also be a malformed-HTTP 400 or a 431 (Node's parser). */
const HTTP_LEVEL: Allowed = { 400: ['bad_request'], 431: ['headers_too_large'] };

/** Asserts that an answer is one `allowed` names, in the Error shape with the contract's code; returns the code. */
export function assertContractAnswer(response: RawResponse, allowed: Allowed, context: string): string | null {
  const codes = allowed[response.status] ?? HTTP_LEVEL[response.status];
  assert.ok(codes !== undefined, `${context}: status ${response.status} ${response.body}`);
  assert.notEqual(response.status, 500);
  if (response.status < 400) return null;
  assert.ok(Buffer.byteLength(response.body) <= MAX_ERROR_BODY_BYTES, `${context}: an error of ${Buffer.byteLength(response.body)} bytes`);
  const body = JSON.parse(response.body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body), ['code', 'message', 'status'], context);
  assert.equal(body.status, response.status);
  const code = body.code as string;
  assert.equal(CONTRACT_ERRORS[code], response.status, `${context}: ${code} is not a contract code for ${response.status}`);
  assert.ok([...codes, ...(HTTP_LEVEL[response.status] ?? [])].includes(code), `${context}: ${code} not expected here`);
  return code;
}

/** Bytes that can stand in a header value or request target without ending the line. */
export const lineBytes = (maxLength: number) =>
  fc.oneof(
    fc.uint8Array({ maxLength }).map((bytes) => Buffer.from(bytes.filter((byte) => byte !== 0x0d && byte !== 0x0a))),
    fc.string({ unit: anyCodePoint, maxLength }).map((text) => Buffer.from(text.replace(/[\r\n]/g, ''), 'utf8')),
    fc.string({ unit: 'grapheme-ascii', maxLength }).map((text) => Buffer.from(text)),
  );

/** A request's bytes: the lines of its head, `Connection: close`, then `body`. */
export function rawMessage(lines: (string | Buffer)[], body: Buffer = Buffer.alloc(0)): Buffer {
  const head = lines.flatMap((line) => [typeof line === 'string' ? Buffer.from(line, 'latin1') : line, Buffer.from('\r\n')]);
  return Buffer.concat([...head, Buffer.from('Connection: close\r\n\r\n'), body]);
}

/** If-Match values, with CURRENT standing for the resource's ETag at the time of the request. */
export const ifMatchTemplate = fc.option(
  fc.oneof(
    fc.constantFrom('CURRENT', '*', ' * ', 'W/CURRENT', '"0.0", CURRENT', 'CURRENT, W/"x"', '"x"', '', ',', '"1.1"', 'CURRENT CURRENT', '*, CURRENT', 'w/CURRENT', '"a'),
    fc.array(fc.constantFrom('CURRENT', 'W/CURRENT', '"9.9"', '*', ',', ', ', ' ', '"', 'x'), { maxLength: 5 }).map((parts) => parts.join('')),
    lineBytes(30).map((bytes) => bytes.toString('latin1')),
  ),
  { nil: null },
);


/** One of `cases` at a random size up to its surface's cap (small sizes more often), as bytes. */
export function worstCaseAt(cases: readonly WorstCase[]) {
  return fc.constantFrom(...cases).chain((worst) =>
    fc.oneof(fc.integer({ min: 0, max: 200 }), fc.integer({ min: 0, max: worst.surface.cap })).map((size) => ({
      worst, size, bytes: worstRequest(worst, size), context: `${worst.surface.label}: ${worst.shape.name} at ${size} bytes`,
    })),
  );
}
