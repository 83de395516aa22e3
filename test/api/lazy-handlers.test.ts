/**
 * The handlers of a tag loaded on the first request of one of its operations: nothing is loaded
 * before it, the first requests share one load, the later ones call the loaded handler directly
 * (synchronously, as an eagerly built one is called), and a load that failed is tried again.
 *
 * The `@ts-expect-error` lines are checked by the type check of `npm test`: each must be an error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { HandlerContext } from '../../src/api/handler.ts';
import { handlersLoadedOnFirstRequest } from '../../src/api/lazy-handlers.ts';
import { OPERATIONS, type Handlers } from '../../src/api/operations.ts';
import type { Reply } from '../../src/http/reply.ts';

/** What the handlers under test receive: they only pass it on, so any value stands for it. */
const contextOf = (name: string) => ({ name }) as unknown as HandlerContext<never>;
const nameOf = (context: unknown) => (context as { name: string }).name;

/** The webhooks' handlers, each answering with its operationId and the context it received. */
function webhooksHandlers(): Pick<Handlers, 'listWebhooks' | 'createWebhook' | 'getWebhook' | 'updateWebhook' | 'deleteWebhook' | 'listWebhookDeliveries'> {
  const reply = (id: string) => (context: unknown): Reply => ({ status: 200, body: `${id} ${nameOf(context)}` });
  return {
    listWebhooks: reply('listWebhooks'), createWebhook: reply('createWebhook'), getWebhook: reply('getWebhook'),
    updateWebhook: reply('updateWebhook'), deleteWebhook: reply('deleteWebhook'), listWebhookDeliveries: reply('listWebhookDeliveries'),
  };
}

test("a tag's handlers are every operation of that tag in the table, and nothing is loaded before the first request", () => {
  let loads = 0;
  const handlers = handlersLoadedOnFirstRequest('webhooks', async () => {
    loads++;
    return webhooksHandlers();
  });
  const tagged = Object.entries(OPERATIONS).filter(([, operation]) => operation.tag === 'webhooks').map(([id]) => id);
  assert.deepEqual(Object.keys(handlers).sort(), tagged.sort());
  assert.equal(loads, 0);
});

test('the first requests share one load and are answered by the loaded handlers; later ones are called directly', async () => {
  let loads = 0;
  const handlers = handlersLoadedOnFirstRequest('webhooks', async () => {
    loads++;
    return webhooksHandlers();
  });
  const first = await Promise.all([handlers.getWebhook(contextOf('a')), handlers.listWebhooks(contextOf('b'))]);
  assert.deepEqual(first, [{ status: 200, body: 'getWebhook a' }, { status: 200, body: 'listWebhooks b' }]);
  assert.equal(loads, 1);
  // Not a promise: once loaded, a request costs what it costs an eagerly built handler.
  assert.deepEqual(handlers.deleteWebhook(contextOf('c')), { status: 200, body: 'deleteWebhook c' });
  assert.equal(loads, 1);
});

test('a load that fails fails its requests, and the next request loads again', async () => {
  let loads = 0;
  const handlers = handlersLoadedOnFirstRequest('webhooks', async () => {
    loads++;
    if (loads === 1) throw new Error('the module could not be loaded');
    return webhooksHandlers();
  });
  await assert.rejects(async () => handlers.getWebhook(contextOf('a')), /could not be loaded/);
  assert.deepEqual(await handlers.getWebhook(contextOf('b')), { status: 200, body: 'getWebhook b' });
  assert.equal(loads, 2);
});

test('the type check refuses a load that lacks a handler of the tag, and a tag the table does not have', () => {
  const { listWebhooks: _left, ...lacking } = webhooksHandlers();
  // @ts-expect-error listWebhooks is an operation of the tag, and has no handler.
  handlersLoadedOnFirstRequest('webhooks', async () => lacking);
  // @ts-expect-error no operation has this tag.
  handlersLoadedOnFirstRequest('hooks', async () => webhooksHandlers());
});
