/**
 * The bounds the OpenAPI document gives must be true of the largest answers a request can
 * provoke, not only of the ones the rest of the suite happens to see.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_ERROR_MESSAGE_LENGTH } from '../../../src/api/openapi/json-schema.ts';
import { errorBody, startTestServer } from '../../support/test-server.ts';

/** Distinct two-character names from a 64-character alphabet, `count` of them. */
function names(count: number): string[] {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  return Array.from({ length: count }, (_, i) => alphabet[Math.floor(i / 64)]! + alphabet[i % 64]!);
}

test('the longest error messages stay under the documented maxLength: five problems named, the others counted', async (t) => {
  const server = await startTestServer(t);
  // A body of 16 KiB of unknown properties (8 bytes each), and every field of the schema wrong.
  const unknown = names(2_044);
  const body = `{"name":5,"categoryId":1.5,"status":null,${unknown.map((name) => `"${name}":0`).join(',')}}`;
  assert.ok(Buffer.byteLength(body) <= 16 * 1024);
  const bodyAnswer = await server.post('/v1/pets', body);
  assert.equal(bodyAnswer.status, 400);
  const bodyMessage = (await errorBody(bodyAnswer)).message;
  for (const field of ['name', 'categoryId', 'status']) assert.match(bodyMessage, new RegExp(`${field} must be`), 'every field of the schema is named first');
  assert.ok(bodyMessage.includes(`"${unknown[1]}" is not a known property; and 2042 more.`), bodyMessage);

  // A query of 12 KiB of unknown parameters (3 bytes each), within the 16 KiB of request headers.
  const queryAnswer = await server.request(`/v1/pets?${names(4_096).join('&')}`);
  assert.equal(queryAnswer.status, 400);
  const queryMessage = (await errorBody(queryAnswer)).message;
  assert.ok(queryMessage.includes('"AA" is not a known parameter'), queryMessage);

  // Names the client sent, as long as the headers allow and escaped six bytes a character in JSON.
  const long = '%01'.repeat(600);
  const longAnswer = await server.request(`/v1/pets?${[1, 2, 3, 4, 5, 6].map((i) => `${long}${i}`).join('&')}`);
  const longMessage = (await errorBody(longAnswer)).message;
  assert.match(longMessage, /"(\\u0001){5}\.\.\." is not a known parameter/);

  for (const message of [bodyMessage, queryMessage, longMessage]) assert.ok([...message].length <= MAX_ERROR_MESSAGE_LENGTH, `${[...message].length} characters`);
  t.diagnostic(`longest messages: body ${bodyMessage.length}, query ${queryMessage.length}, long names ${longMessage.length} characters (bound ${MAX_ERROR_MESSAGE_LENGTH})`);
});
