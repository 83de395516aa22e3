/**
 * The router and the OpenAPI document are built from one table of operations: a route that the
 * document does not describe, or an operation of the document that no route answers, fails here.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildOpenApiDocument } from '../../src/api/openapi/document.ts';
import { BASE_PATH } from '../../src/api/operation.ts';
import { OPERATIONS, type Handlers } from '../../src/api/operations.ts';
import { createRoutes } from '../../src/pipeline/routes.ts';
import { errorBody, startTestServer } from '../support/test-server.ts';

const answer = () => ({ status: 200, body: '' });
const handlers: Handlers = Object.fromEntries(Object.keys(OPERATIONS).map((operationId) => [operationId, answer])) as Record<keyof Handlers, typeof answer>;

/** `METHOD /v1/path` of every operation the document describes. */
function documented(): string[] {
  const { paths } = buildOpenApiDocument({ appEnv: 'development', publicBaseUrl: null, stagingBaseUrl: null });
  return Object.entries(paths).flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${BASE_PATH}${path}`)).sort();
}

const outside = { healthz: answer, docs: answer };

test('the routes under the base address are exactly the operations of the document; outside it only /healthz and /docs', () => {
  const { keyed, open } = createRoutes(handlers, outside, OPERATIONS);
  const routed = [...keyed.routes(), ...open.routes()].map(({ method, pattern }) => `${method} ${pattern}`).sort();
  assert.deepEqual(routed.filter((route) => route.includes(` ${BASE_PATH}/`)), documented());
  assert.deepEqual(routed.filter((route) => !route.includes(` ${BASE_PATH}/`)), ['GET /docs', 'GET /healthz']);
  assert.ok(documented().length >= 7);
});

test('an operation without a handler, or a handler without an operation, stops the start', () => {
  const { listPets: _listPets, ...withoutOne } = handlers;
  // The type of the handlers refuses both (test/api/operations.test.ts); a start without types still stops.
  // @ts-expect-error: listPets has no handler.
  assert.throws(() => createRoutes(withoutOne, outside, OPERATIONS), /operation listPets has no handler/);
  const oneTooMany = { ...handlers, adoptEverything: answer };
  assert.throws(() => createRoutes(oneTooMany, outside, OPERATIONS), /handlers without an operation: adoptEverything/);
});

test('a live server answers every documented operation (never 404 not_found or 405), and nothing else under the base address', async (t) => {
  const server = await startTestServer(t);
  for (const line of documented()) {
    const [method, path] = line.split(' ') as [string, string];
    const response = await server.request(path.replace('{petId}', '1'), { method });
    assert.ok(response.status !== 404 || (await errorBody(response)).code !== 'not_found', line);
    assert.notEqual(response.status, 405, line);
  }
  const unknown = await server.request(`${BASE_PATH}/pets/1/photos`);
  assert.equal(unknown.status, 404);
  assert.equal((await errorBody(unknown)).code, 'not_found');
});
