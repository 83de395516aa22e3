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

test('the longest error messages, naming every unknown property or parameter, stay under the documented maxLength', async (t) => {
  const server = await startTestServer(t);
  // A body of 16 KiB of unknown properties (8 bytes each): the message names every one.
  const unknown = names(2_047);
  const body = `{${unknown.map((name) => `"${name}":0`).join(',')}}`;
  assert.ok(Buffer.byteLength(body) <= 16 * 1024);
  const bodyAnswer = await server.post('/v1/pets', body);
  assert.equal(bodyAnswer.status, 400);
  const bodyMessage = (await errorBody(bodyAnswer)).message;
  assert.ok(bodyMessage.includes(`"${unknown.at(-1)}" is not a known property`));

  // A query of 12 KiB of unknown parameters (3 bytes each), within the 16 KiB of request headers.
  const queryAnswer = await server.request(`/v1/pets?${names(4_096).join('&')}`);
  assert.equal(queryAnswer.status, 400);
  const queryMessage = (await errorBody(queryAnswer)).message;
  assert.ok(queryMessage.includes('"__" is not a known parameter'));

  for (const message of [bodyMessage, queryMessage]) assert.ok([...message].length <= MAX_ERROR_MESSAGE_LENGTH, `${[...message].length} characters`);
  t.diagnostic(`longest messages: body ${bodyMessage.length}, query ${queryMessage.length} characters (bound ${MAX_ERROR_MESSAGE_LENGTH})`);
});
