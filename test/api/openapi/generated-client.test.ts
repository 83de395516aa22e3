import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';
import openapiTS, { astToString, COMMENT_HEADER, type OpenAPI3 } from 'openapi-typescript';
import { conformanceChecker } from '../../support/openapi-conformance.ts';
import { startTestServer } from '../../support/test-server.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** Git-ignored, inside the repository so that the client resolves node_modules. */
const TYPES_FILE = join(ROOT, 'test/.generated/pets-api.ts');
const CLIENT_FILE = join(ROOT, 'test/generated-client/pets-client.ts');

/** Type-checks files with the project's compiler options; returns the formatted diagnostics. */
function typeCheck(files: string[]): string {
  const { config, error } = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  assert.equal(error, undefined);
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT);
  const diagnostics = ts.getPreEmitDiagnostics(ts.createProgram({ rootNames: files, options }));
  return ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (name) => name,
    getCurrentDirectory: () => ROOT,
    getNewLine: () => '\n',
  });
}

/** The runtime surface of pets-client.ts (its types are checked by `typeCheck`, not here). */
interface PetsClientModule {
  createPetsClient(baseUrl: string, apiKey: string, fetch?: (request: Request) => Promise<Response>): {
    listPets(query?: object): Promise<{ pets: { id: number; status: string }[]; next: Record<string, unknown> | null; remaining: number }>;
    listAllPets(query?: object): Promise<{ id: number; status: string }[]>;
    createPet(pet: object, idempotencyKey?: string): Promise<{ pet: { id: number; name: string; categoryId: number; status: string }; location: string }>;
    getPet(petId: number): Promise<{ pet: { id: number }; sunset: string | null }>;
    updatePet(petId: number, patch: object, ifMatch?: string): Promise<{ pet: { id: number; name: string; categoryId: number; status: string }; etag: string }>;
    deletePet(petId: number, ifMatch?: string): Promise<void>;
    createUnchecked(body: object): Promise<{ status: number; error: { code: string; message: string; status: number } } | null>;
    placeOrder(petId: number, idempotencyKey?: string): Promise<{ order: { id: number; petId: number; status: string }; location: string }>;
    listOrders(query?: object): Promise<{ id: number; status: string }[]>;
    updateOrder(orderId: number, status: string): Promise<{ id: number; status: string }>;
    inventory(): Promise<{ available: number; pending: number; sold: number }>;
  };
  PetsApiError: new (...args: never[]) => Error & { status: number; body: { code: string } };
}

test('a client generated from the served document type-checks and works against a live server', async (t) => {
  const server = await startTestServer(t);

  // The type check below blocks the event loop for seconds, longer than the server keeps an idle
  // connection open: no request goes out before it, so no pooled connection can be closed under a
  // later request (that race answered the first list with ECONNRESET on a loaded machine).
  await t.test('openapi-typescript generates types from the served document, deprecation included', async () => {
    const document = JSON.parse(await server.service.openapi()) as OpenAPI3;
    const source = COMMENT_HEADER + astToString(await openapiTS(document, { silent: true }));
    mkdirSync(dirname(TYPES_FILE), { recursive: true });
    writeFileSync(TYPES_FILE, source);
    assert.match(source, /Get a pet \(deprecated\)\n\s*\* @deprecated/);
    assert.match(source, /get: operations\["getPet"\]/);
    assert.match(source, /patch: operations\["updatePet"\]/);
    assert.match(source, /delete: operations\["deletePet"\]/);
    for (const id of ['placeOrder', 'listOrders', 'getOrder', 'updateOrder', 'getInventory']) assert.match(source, new RegExp(`operations\\["${id}"\\]`));
  });

  await t.test('the client type-checks against the generated types, and misuses do not', () => {
    assert.equal(typeCheck([CLIENT_FILE]), '');
  });

  for (let i = 0; i < 5; i++) await server.post('/v1/pets', { name: `pet ${i}`, categoryId: i + 1, status: i % 2 === 0 ? 'available' : 'sold' });

  // The client's own fetch, checked against the document like every response of the suite.
  const conformance = conformanceChecker(await server.service.openapi());
  const watched = async (request: Request) => {
    const response = await fetch(request);
    await conformance.check({ method: request.method, url: request.url }, response.clone());
    return response;
  };
  const { createPetsClient, PetsApiError } = (await import(pathToFileURL(CLIENT_FILE).href)) as PetsClientModule;
  const client = createPetsClient(`${server.url}/v1`, server.key, watched);

  await t.test('lists with a filter and follows the next link', async () => {
    const first = await client.listPets({ status: 'available', limit: 2 });
    assert.deepEqual(first.pets.map((pet) => pet.id), [1, 3]);
    assert.deepEqual(first.next && { limit: first.next.limit, status: first.next.status }, { limit: 2, status: 'available' });
    const second = await client.listPets(first.next!);
    assert.deepEqual(second.pets.map((pet) => pet.id), [5]);
    assert.equal(second.next, null);
    assert.deepEqual((await client.listAllPets({ limit: 1 })).map((pet) => pet.id), [1, 2, 3, 4, 5]);
  });

  await t.test('creates a pet and reads it back through the deprecated operation', async () => {
    const { pet, location } = await client.createPet({ name: 'Rex', categoryId: 42 }, 'create-rex-1');
    assert.deepEqual(pet, { id: 6, name: 'Rex', categoryId: 42, status: 'available' });
    assert.equal(location, '/v1/pets/6');
    const read = await client.getPet(pet.id);
    assert.deepEqual(read.pet, pet);
    assert.equal(read.sunset, 'Thu, 05 Dec 2030 00:00:00 GMT');
  });

  await t.test('changes a pet with If-Match, and a change with a stale ETag is a typed 412 that changes nothing', async () => {
    const { etag } = await client.updatePet(6, {});
    const { pet, etag: newTag } = await client.updatePet(6, { status: 'sold', name: 'Rex the sold' }, etag);
    assert.deepEqual(pet, { id: 6, name: 'Rex the sold', categoryId: 42, status: 'sold' });
    assert.notEqual(newTag, etag);
    const stale = await client.updatePet(6, { status: 'available' }, etag).then(() => null, (error: unknown) => error);
    assert.ok(stale instanceof PetsApiError);
    assert.equal(stale.status, 412);
    assert.equal(stale.body.code, 'precondition_failed');
    assert.equal((await client.getPet(6)).pet.id, 6);
    assert.deepEqual((await client.listPets({ status: 'sold' })).pets.map((listed) => listed.id), [2, 4, 6]);
  });

  await t.test('deletes a pet with If-Match; it is then a typed 404', async () => {
    const { etag } = await client.updatePet(6, {});
    await client.deletePet(6, etag);
    const gone = await client.deletePet(6).then(() => null, (error: unknown) => error);
    assert.ok(gone instanceof PetsApiError);
    assert.equal(gone.status, 404);
    assert.equal(gone.body.code, 'pet_not_found');
    assert.deepEqual((await client.listAllPets()).map((listed) => listed.id), [1, 2, 3, 4, 5]);
  });

  await t.test('sees a typed 400 naming the field', async () => {
    const failure = await client.createUnchecked({ name: '   ', categoryId: 1 });
    assert.equal(failure?.status, 400);
    assert.equal(failure?.error.code, 'invalid_body');
    assert.equal(failure?.error.status, 400);
    assert.match(failure?.error.message ?? '', /name/);
  });

  await t.test('adopts a pet: places an order, approves and completes it; a second order for the pet is a typed 409', async () => {
    assert.deepEqual(await client.inventory(), { available: 3, pending: 0, sold: 2 });
    const { order, location } = await client.placeOrder(1, 'adopt-1');
    assert.deepEqual([order.petId, order.status, location], [1, 'placed', `/v1/store/orders/${order.id}`]);
    const taken = await client.placeOrder(1).then(() => null, (error: unknown) => error);
    assert.ok(taken instanceof PetsApiError);
    assert.deepEqual([taken.status, taken.body.code], [409, 'pet_not_available']);
    assert.equal((await client.updateOrder(order.id, 'approved')).status, 'approved');
    assert.equal((await client.updateOrder(order.id, 'completed')).status, 'completed');
    assert.deepEqual((await client.listOrders({ status: 'completed' })).map((listed) => listed.id), [order.id]);
    assert.deepEqual(await client.inventory(), { available: 2, pending: 0, sold: 3 });
  });

  await t.test('sees a 401 with an unknown key', async () => {
    const stranger = createPetsClient(`${server.url}/v1`, 'pk_test_not-a-real-key', watched);
    const refused = await stranger.listPets().then(() => null, (error: unknown) => error);
    assert.ok(refused instanceof PetsApiError);
    assert.equal(refused.status, 401);
    assert.equal(refused.body.code, 'invalid_api_key');
  });
});
