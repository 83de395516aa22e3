/**
 * No input costs more than linear time, on any surface that takes client input: every worst case
 * of test/support/worst-cases.ts (the query, path parameters, header parameters and body of every
 * operation of the table, and the headers every request may carry) is sent at n and at 4n bytes,
 * 4n at the service's own cap, and the time it takes must grow at most about linearly (see
 * test/support/complexity.ts for how it is measured on a loaded machine). A GET /healthz sent
 * right behind the largest must not wait for it, and no error answer is larger than 1 KiB.
 *
 * An algorithmic-complexity bug in a parser is a denial of service that no rate limit stops: a
 * query that repeated 2,000 names held the event loop for 0.4 s, and /healthz with it. A new
 * operation or parameter is measured here without a word, or fails loudly when its kind has no
 * worst case yet (worst-cases.ts).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { JSON_BODY } from '../../src/http/request-body.ts';
import { MOST_QUERY_PARAMETERS } from '../../src/api/schemas.ts';
import { startTestServer } from '../support/test-server.ts';
import {
  checkAnswer, complexityFixtures, COMPLEXITY_SERVER, growth, healthzBehind, isAboutLinear, GROWTH_BOUND, HEALTHZ_WAIT_MS, NOISE_MS,
} from '../support/complexity.ts';
import { MAX_ERROR_BODY_BYTES } from '../support/property.ts';
import { LISTED_OPERATIONS, worstCases, worstRequest, type ListedOperation, type WorstCase } from '../support/worst-cases.ts';

/** Measurements of a case before it is judged super-linear: a burst of load can spoil one. */
const ATTEMPTS = 3;

const label = (worst: WorstCase) => `${worst.surface.label}: ${worst.shape.name}`;
const ms = (value: number) => `${value.toFixed(2)} ms`;

test('every surface that takes client input costs at most linear time, and /healthz is never held up', async (t) => {
  const server = await startTestServer(t, COMPLEXITY_SERVER);
  const fixtures = await complexityFixtures(server);
  const cases = worstCases(fixtures);
  let largestError = { bytes: 0, where: '' };
  const rows: string[] = [];
  for (const worst of cases) {
    await t.test(label(worst), async () => {
      const { cap } = worst.surface;
      const [empty, small, large] = [0, cap / 4, cap].map((size) => worstRequest(worst, size));
      let measured = await growth(server.url, empty!, small!, large!);
      for (let attempt = 1; attempt < ATTEMPTS && !isAboutLinear(measured); attempt++) measured = await growth(server.url, empty!, small!, large!);
      const { answers } = measured;
      const waited = await healthzBehind(server.url, large!);
      rows.push(`${label(worst)} | ${answers.large.status} | ${ms(measured.empty)} | ${ms(measured.small)} | ${ms(measured.large)} | ${ms(waited)}`);
      for (const [size, response] of Object.entries(answers)) {
        if (response.status >= 400 && Buffer.byteLength(response.body) > largestError.bytes) {
          largestError = { bytes: Buffer.byteLength(response.body), where: `${label(worst)}: ${response.body.slice(0, 600)}` };
        }
        checkAnswer(worst, response, `${label(worst)} (${size})`);
      }
      // The largest is within the caps, so that it reached the code under test.
      assert.ok(![413, 431].includes(answers.large.status), `${label(worst)}: ${answers.large.status} at ${cap} bytes`);
      assert.ok(
        isAboutLinear(measured),
        `${label(worst)}: ${ms(measured.empty)} empty, ${ms(measured.small)} at ${cap / 4} bytes, ${ms(measured.large)} at ${cap}: ` +
          `grew more than ${GROWTH_BOUND} times (+${NOISE_MS} ms) from n to 4n`,
      );
      assert.ok(waited <= HEALTHZ_WAIT_MS, `${label(worst)}: /healthz waited ${ms(waited)} behind it`);
    });
  }
  t.diagnostic(`surface | status at 4n | empty | n | 4n | /healthz behind 4n\n${rows.join('\n')}`);
  t.diagnostic(`largest error body: ${largestError.bytes} bytes, ${largestError.where}`);
  assert.ok(largestError.bytes <= MAX_ERROR_BODY_BYTES);
});

test('every surface of every operation has worst cases: its query, its path and header parameters, its body', async (t) => {
  const server = await startTestServer(t, COMPLEXITY_SERVER);
  const cases = worstCases(await complexityFixtures(server));
  for (const operation of LISTED_OPERATIONS) {
    const labels = new Set(cases.filter((worst) => worst.surface.operation === operation).map((worst) => worst.surface.label));
    const path = `${operation.method} /v1${operation.path}`;
    assert.ok(labels.has(`query of ${path}`), path);
    for (const parameter of operation.parameters ?? []) {
      if (parameter.in !== 'query') assert.ok(labels.has(`${parameter.name} of ${path}`), `${parameter.name} of ${path}`);
    }
    if (operation.requestBody) assert.ok(labels.has(`body of ${path}`), path);
  }
});

test('no operation takes more query parameters than the early refusal allows', () => {
  for (const operation of LISTED_OPERATIONS) {
    const query = (operation.parameters ?? []).filter((parameter) => parameter.in === 'query');
    assert.ok(query.length <= MOST_QUERY_PARAMETERS, `${operation.operationId} takes ${query.length}: raise MOST_QUERY_PARAMETERS in src/api/schemas.ts`);
  }
});

test('a parameter kind, a header or a body shape without a worst case fails loudly; a new operation of known kinds is covered', async (t) => {
  const server = await startTestServer(t, COMPLEXITY_SERVER);
  const fixtures = await complexityFixtures(server);
  // As an operation may come: a query of integers and a list, a header, a body with a kind of property not met yet.
  const feed: ListedOperation = {
    operationId: 'listEvents', method: 'GET', path: '/events', tag: 'store', summary: 'Events', description: '', scope: 'pets:read',
    parameters: [
      { name: 'after', in: 'query', description: '', schema: { type: 'integer', format: 'int64', minimum: 0 } },
      { name: 'types', in: 'query', description: '', schema: { type: 'string', maxLength: 200, pattern: '^[a-z.]+(,[a-z.]+)*$' } },
    ],
    responses: { 200: { description: '' } },
  };
  const cases = worstCases(fixtures, [feed]).filter((worst) => worst.surface.operation === feed);
  assert.ok(cases.some((worst) => worst.shape.name.startsWith('types:')) && cases.some((worst) => worst.shape.name.startsWith('after:')));
  const refused: [ListedOperation, RegExp][] = [
    [{ ...feed, parameters: [{ name: 'types', in: 'query', description: '', schema: { type: 'boolean' } as never }] }, /parameter types of type boolean/],
    [{ ...feed, parameters: [{ name: 'types', in: 'query', description: '', schema: { type: 'string', pattern: '^[a-z,]+$' } }] }, /pattern without maxLength/],
    [{ ...feed, parameters: [{ name: 'Prefer', in: 'header', description: '', schema: { type: 'string' } }] }, /header Prefer/],
    [{
      ...feed, method: 'POST',
      requestBody: {
        description: '', mediaTypes: JSON_BODY,
        schema: { type: 'object', properties: { url: { type: 'string', maxLength: 2000 }, enabled: { type: 'boolean' } as never }, required: [], additionalProperties: false },
      },
    }, /body property enabled of type boolean/],
  ];
  for (const [operation, message] of refused) assert.throws(() => worstCases(fixtures, [operation]), message);
});
