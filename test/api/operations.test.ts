/**
 * The table of operations is the only declaration of an operation: one entry, and its handler,
 * are all it takes for the route, the OpenAPI document and the handler's types to follow
 * (docs/architecture.md, "Adding an operation"). Here a copy of the table gets throwaway
 * operations, shaped like the ones planned next (a new method on an order's path; a list of
 * events with a comma-separated filter, answered as JSON or as a stream), and nothing else is
 * written for them.
 *
 * The `@ts-expect-error` lines are checked by the type check of `npm test`: each must be an error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { buildOpenApiDocument } from '../../src/api/openapi/document.ts';
import type { HandlerContext, HandlersOf } from '../../src/api/handler.ts';
import { BASE_PATH, type OperationSpec } from '../../src/api/operation.ts';
import { OPERATIONS, type Handlers, type Tag } from '../../src/api/operations.ts';
import { getOrderParameters, orderSchema, type ListSchema } from '../../src/api/schemas.ts';
import { ApiError } from '../../src/http/api-error.ts';
import type { Reply } from '../../src/http/reply.ts';
import type { Caller } from '../../src/keys/caller.ts';
import { createRoutes } from '../../src/pipeline/routes.ts';
import type { PetStatus } from '../../src/storage/pets.ts';

/** Compile-time equality of two types. */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const expectType = <T extends true>(): T | undefined => undefined;

const EVENT_TYPES = ['pet.created', 'order.placed'] as const;
const eventTypes = {
  type: 'array',
  items: { type: 'string', enum: EVENT_TYPES },
  maxItems: 2,
} as const satisfies ListSchema;

/** The service's table and two operations that are not in it. */
const TABLE = {
  ...OPERATIONS,
  replaceOrder: {
    method: 'PUT',
    path: '/store/orders/{orderId}',
    tag: 'store',
    summary: 'Replace an order',
    description: 'A throwaway operation of this test.',
    scope: 'orders:manage',
    parameters: getOrderParameters,
    responses: {
      204: { description: 'Replaced.' },
      404: { description: 'No such order.', codes: ['order_not_found'] },
    },
  },
  listEvents: {
    method: 'GET',
    path: '/events',
    tag: 'store',
    summary: 'List events',
    description: 'A throwaway operation of this test: JSON, or a stream of events.',
    scope: 'orders:write',
    parameters: [{ name: 'types', in: 'query', description: 'Only events of these types.', schema: eventTypes }],
    responses: {
      200: { description: 'The events.', content: { 'application/json': orderSchema, 'text/event-stream': { type: 'string' } }, headers: ['NextLink'] },
      400: { description: 'A bad query.', codes: ['invalid_query'] },
    },
  },
} as const satisfies Readonly<Record<string, OperationSpec<Tag>>>;

const noContent = (): Reply => ({ status: 204, body: '' });
const stubs = Object.fromEntries(Object.keys(OPERATIONS).map((operationId) => [operationId, noContent])) as Record<keyof Handlers, typeof noContent>;
/** What each new handler saw, for the assertions below. */
const seen: Record<string, unknown> = {};

const handlers: HandlersOf<typeof TABLE> = {
  ...stubs,
  replaceOrder(context) {
    const { orderId } = context.path();
    expectType<Equal<typeof orderId, bigint>>();
    expectType<Equal<typeof context.caller, Caller>>();
    seen.replaceOrder = orderId;
    return noContent();
  },
  listEvents(context) {
    const { types } = context.query();
    expectType<Equal<typeof types, ('pet.created' | 'order.placed')[] | undefined>>();
    seen.listEvents = types;
    return noContent();
  },
};

test('a new entry gets its route, with its method beside the others of its path', () => {
  const { keyed } = createRoutes(handlers, { healthz: noContent }, TABLE);
  const routed = keyed.routes().map(({ method, pattern }) => `${method} ${pattern}`);
  assert.ok(routed.includes(`PUT ${BASE_PATH}/store/orders/{orderId}`));
  assert.ok(routed.includes(`GET ${BASE_PATH}/events`));
  assert.equal(keyed.allowed(`${BASE_PATH}/store/orders/7`), 'GET, HEAD, PATCH, PUT');
});

test('its handler validates its input against its own entry', () => {
  const { keyed } = createRoutes(handlers, { healthz: noContent }, TABLE);
  const caller: Caller = { id: 'key_1', account: 'acct_1', scopes: ['orders:manage'], perMinute: 60, perDay: 1000 };
  const run = (method: string, path: string, search = '') => {
    const match = keyed.find(method, path);
    assert.ok(match?.kind === 'found' && match.handler.bound !== null, `${method} ${path} is routed`);
    return match.handler.run(match.handler.bound.context({} as IncomingMessage, match.params, search, caller));
  };
  run('PUT', `${BASE_PATH}/store/orders/42`);
  assert.equal(seen.replaceOrder, 42n);
  assert.throws(() => run('PUT', `${BASE_PATH}/store/orders/abc`), (error: ApiError) => error.code === 'invalid_path');
  run('GET', `${BASE_PATH}/events`, 'types=order.placed,pet.created');
  assert.deepEqual(seen.listEvents, ['order.placed', 'pet.created']);
  for (const search of ['types=order.shipped', 'types=pet.created,pet.created,order.placed', 'types=', 'since=1']) {
    assert.throws(() => run('GET', `${BASE_PATH}/events`, search), (error: ApiError) => error.code === 'invalid_query', search);
  }
});

test('a new entry is in the OpenAPI document, its schemas referenced, its list and its two media types described', () => {
  const document = buildOpenApiDocument({ appEnv: 'development', publicBaseUrl: null, stagingBaseUrl: null }, TABLE);
  const replace = document.paths['/store/orders/{orderId}']!.put as Record<string, any>;
  assert.equal(replace.operationId, 'replaceOrder');
  assert.deepEqual(replace.security, [{ bearerAuth: ['orders:manage'] }]);
  assert.deepEqual(replace.parameters.map((parameter: { name: string }) => parameter.name), ['orderId']);
  assert.deepEqual(Object.keys(replace.responses).sort(), ['204', '401', '403', '404', '429', '500', '503', 'default']);
  const events = document.paths['/events']!.get as Record<string, any>;
  assert.deepEqual(events.parameters[0], {
    name: 'types',
    in: 'query',
    description: 'Only events of these types.',
    style: 'form',
    explode: false,
    schema: { type: 'array', items: { type: 'string', enum: [...EVENT_TYPES] }, maxItems: 2 },
  });
  const answer = events.responses['200'];
  assert.deepEqual(answer.content, { 'application/json': { schema: { $ref: '#/components/schemas/Order' } }, 'text/event-stream': { schema: { type: 'string' } } });
  // Its next-page link is described on its own path.
  assert.match(answer.headers.Link.schema.pattern, /^\^<\/v1\/events\\\?/);
});

test('the handlers are typed from the table: a missing, misspelt or wrongly typed handler fails the type check', () => {
  // @ts-expect-error: the new operations have no handler.
  const missing: HandlersOf<typeof TABLE> = stubs;
  // @ts-expect-error: listPets is misspelt.
  const misspelt: Handlers = { ...stubs, lisPets: noContent };
  const typed: Pick<Handlers, 'listPets' | 'createPet' | 'getInventory' | 'getOpenApiDocument'> = {
    listPets(context) {
      const query = context.query();
      expectType<Equal<typeof query, { limit: number; status?: PetStatus; cursor?: string }>>();
      return noContent();
    },
    async createPet(context) {
      const { value } = await context.body();
      expectType<Equal<typeof value, { name: string; categoryId: bigint; status: PetStatus }>>();
      // @ts-expect-error: a new pet has no id.
      void value.id;
      return noContent();
    },
    getInventory(context) {
      // @ts-expect-error: getInventory takes no body.
      void context.body;
      return noContent();
    },
    getOpenApiDocument(context) {
      // The document needs no key: the caller may be anonymous.
      expectType<Equal<typeof context.caller, Caller | null>>();
      return noContent();
    },
  };
  const context = {} as HandlerContext<(typeof OPERATIONS)['updateOrder']>;
  expectType<Equal<Awaited<ReturnType<typeof context.body>>['value'], { status?: 'placed' | 'approved' | 'completed' | 'cancelled' }>>();
  assert.ok(missing && misspelt && typed);
});
