/**
 * The error codes: each in one registry, with one status and one wording. The HTTP-level codes
 * are in src/http/api-error.ts, the API's own (with their messages) in src/api/errors.ts; an
 * ApiError is made by those two only, and http/ names none of the API's codes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { apiError, ERROR_STATUS, type ApiErrorCode } from '../../src/api/errors.ts';
import { HTTP_ERROR_STATUS } from '../../src/http/api-error.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const sources = readdirSync(join(ROOT, 'src'), { recursive: true, withFileTypes: true })
  .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
  .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)));

const API_CODES = Object.keys(ERROR_STATUS).filter((code) => !Object.hasOwn(HTTP_ERROR_STATUS, code)) as ApiErrorCode[];

test('every code is in one registry, with its status, ordered by status', () => {
  assert.ok(API_CODES.includes('pet_not_found') && API_CODES.includes('invalid_transition'));
  for (const [code, status] of Object.entries(HTTP_ERROR_STATUS)) assert.equal(ERROR_STATUS[code as keyof typeof HTTP_ERROR_STATUS], status, code);
  const statuses = Object.values(ERROR_STATUS);
  assert.deepEqual(statuses, [...statuses].sort((a, b) => a - b));
});

test('an API error carries its registry\'s status, its one message and its headers', () => {
  const notFound = apiError('pet_not_found', 7n);
  assert.deepEqual([notFound.code, notFound.status, notFound.message], ['pet_not_found', 404, 'No pet has id 7.']);
  assert.equal(apiError('precondition_failed', 'order').message, "If-Match does not match the order's current ETag: it was changed since. Nothing was changed.");
  assert.deepEqual(apiError('idempotency_key_in_flight').headers, { 'Retry-After': '1' });
  assert.equal(apiError('invalid_transition', 'completed', 'placed', []).message, 'An order cannot go from completed to placed: a completed order cannot change any more.');
  for (const code of API_CODES) assert.equal(ERROR_STATUS[code] >= 400 && ERROR_STATUS[code] <= 599, true, code);
});

test('an ApiError is made by the two registries only, and http/ names none of the API\'s codes', () => {
  const makers = sources.filter((file) => readFileSync(join(ROOT, file), 'utf8').includes('new ApiError('));
  assert.deepEqual(makers.sort(), ['src/api/errors.ts', 'src/http/api-error.ts']);
  for (const file of sources.filter((path) => path.startsWith('src/http/'))) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    for (const code of API_CODES) assert.ok(!text.includes(`'${code}'`), `${file} names ${code}`);
  }
});
