/**
 * Adoption over HTTP, rule by rule, against a real server: placing an order reserves its pet in
 * the same transaction, each step of an order moves the pet, another account's order does not
 * exist, at most one order per pet is open, and while it is open the pet's status and existence
 * belong to it. Each test checks the status, the code, the headers, the body and the rows after:
 * pet and order together, never one without the other.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Scope } from '../../src/keys/scopes.ts';
import type { IncomingMessage } from 'node:http';
import { errorBody, json, startTestServer, startWriterTestServer, storedPet, type TestServer } from '../support/test-server.ts';

const ADOPTER: Scope[] = ['pets:read', 'orders:write'];
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

async function adopter(server: TestServer, scopes: Scope[] = ADOPTER): Promise<{ key: string; account: string }> {
  const issued = await server.service.stores.keys.create({ plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000, scopes, now: server.clock() });
  return { key: issued.key, account: issued.record.account };
}

/** What the helpers below need of a test server: either kind (in memory, or on a file with its writer thread). */
type AnyServer = Pick<TestServer, 'post' | 'request' | 'db'>;

async function pet(server: AnyServer, status = 'available', name = 'Rex'): Promise<number> {
  return (await json(await server.post('/v1/pets', { name, categoryId: 1, status }))).id;
}

const order = (server: AnyServer, petId: number | string, key?: string, headers: Record<string, string> = {}) =>
  server.post('/v1/store/orders', typeof petId === 'string' ? petId : { petId }, { ...(key ? { key } : {}), headers });

const step = (server: AnyServer, orderId: number | string, status: string | null | object, key?: string, headers: Record<string, string> = {}) =>
  server.request(`/v1/store/orders/${orderId}`, {
    method: 'PATCH', ...(key ? { key } : {}),
    headers: { 'content-type': 'application/merge-patch+json', ...headers },
    body: typeof status === 'object' && status !== null ? JSON.stringify(status) : JSON.stringify({ status }),
  });

interface StoredOrder { id: number; petId: string; account: string; status: string; version: number }

function storedOrders(server: AnyServer): StoredOrder[] {
  return server.db.prepare('SELECT id, CAST(pet_id AS TEXT) AS petId, account, status, version FROM orders ORDER BY id').all().map((row) => ({ ...row })) as unknown as StoredOrder[];
}

async function expectError(response: Response, status: number, code: string): Promise<string> {
  assert.equal(response.status, status);
  const body = await errorBody(response);
  assert.equal(body.code, code);
  return body.message;
}

test('placing an order: 201 with the order, Location and ETag; in the same transaction the pet becomes pending and its ETag changes', async (t) => {
  const server = await startTestServer(t);
  const petId = await pet(server);
  const before = (await server.request(`/v1/pets/${petId}`)).headers.get('etag');
  const { key, account } = await adopter(server);
  server.clock.advance(1234);
  const response = await order(server, petId, key);
  assert.equal(response.status, 201);
  const body = await json(response);
  assert.deepEqual(Object.keys(body), ['id', 'petId', 'account', 'status', 'placedAt', 'updatedAt', 'expiresAt']);
  assert.deepEqual({ ...body, placedAt: undefined, updatedAt: undefined, expiresAt: undefined }, { id: 1, petId, account, status: 'placed', placedAt: undefined, updatedAt: undefined, expiresAt: undefined });
  assert.equal(body.expiresAt, new Date(server.clock() + 172_800_000).toISOString(), 'held for ORDER_HOLD_SECONDS, 48 h by default');
  assert.match(body.placedAt, INSTANT);
  assert.equal(body.placedAt, new Date(server.clock()).toISOString());
  assert.equal(body.updatedAt, body.placedAt);
  assert.equal(response.headers.get('location'), '/v1/store/orders/1');
  assert.equal(response.headers.get('etag'), '"1.1"');
  const reread = await server.request(`/v1/pets/${petId}`);
  assert.equal((await json(reread)).status, 'pending');
  assert.notEqual(reread.headers.get('etag'), before);
  assert.deepEqual(storedOrders(server), [{ id: 1, petId: String(petId), account, status: 'placed', version: 1 }]);
  assert.equal(storedPet(server, petId)?.status, 'pending');
});

test('a placement body is {"petId": <id>} and nothing else: every other body is refused, named, and nothing is stored', async (t) => {
  const server = await startTestServer(t);
  const petId = await pet(server);
  const bodies: [string, string, RegExp?][] = [
    ['{}', 'invalid_body', /petId is required/],
    [`{"petId":${petId},"note":"x"}`, 'invalid_body', /"note" is not a known property/],
    ['{"petId":null}', 'invalid_body', /petId/],
    ['{"petId":"1"}', 'invalid_body', /petId/],
    ['{"petId":0}', 'invalid_body', /petId/],
    ['{"petId":-1}', 'invalid_body', /petId/],
    ['{"petId":1.0}', 'invalid_body', /petId/],
    ['{"petId":1e0}', 'invalid_body', /petId/],
    ['{"petId":9223372036854775808}', 'invalid_body', /petId/],
    ['[1]', 'invalid_body'],
    ['{"petId":', 'invalid_json'],
    ['', 'invalid_body'],
  ];
  for (const [body, code, names] of bodies) {
    const message = await expectError(await order(server, body), 400, code);
    if (names) assert.match(message, names, body);
  }
  await expectError(await server.request('/v1/store/orders', { method: 'POST', headers: { 'content-type': 'text/plain' }, body: `{"petId":${petId}}` }), 415, 'unsupported_media_type');
  await expectError(await server.post('/v1/store/orders', `{"petId":${petId},"pad":"${'x'.repeat(17_000)}"}`), 413, 'payload_too_large');
  assert.deepEqual(storedOrders(server), []);
  assert.equal(storedPet(server, petId)?.status, 'available');
});

test('an order for no pet is 404 pet_not_found, for a pet that is not available 409 pet_not_available naming its status', async (t) => {
  const server = await startTestServer(t);
  const pending = await pet(server, 'pending');
  const sold = await pet(server, 'sold');
  const gone = await pet(server);
  assert.equal((await server.request(`/v1/pets/${gone}`, { method: 'DELETE' })).status, 204);
  await expectError(await order(server, 999), 404, 'pet_not_found');
  await expectError(await order(server, gone), 404, 'pet_not_found');
  assert.match(await expectError(await order(server, pending), 409, 'pet_not_available'), /pending/);
  assert.match(await expectError(await order(server, sold), 409, 'pet_not_available'), /sold/);
  assert.deepEqual(storedOrders(server), []);
});

test('at most one open order per pet: of 20 concurrent orders for it, exactly one is placed, the others 409 pet_not_available', async (t) => {
  const server = await startTestServer(t);
  const petId = await pet(server);
  const keys = await Promise.all(Array.from({ length: 4 }, () => adopter(server)));
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => order(server, petId, keys[i % 4]!.key)));
  const statuses = answers.map((answer) => answer.status).sort();
  assert.deepEqual(statuses, [201, ...Array(19).fill(409)]);
  for (const answer of answers.filter((each) => each.status === 409)) assert.equal((await errorBody(answer)).code, 'pet_not_available');
  assert.equal(storedOrders(server).length, 1);
  assert.equal(storedPet(server, petId)?.status, 'pending');
});

test('Idempotency-Key: a retry replays the 201; another body is 422; a 404 or 409 is not remembered; keys are per operation', async (t) => {
  const server = await startTestServer(t);
  const first = await pet(server);
  const second = await pet(server, 'pending');
  const { key } = await adopter(server);
  const placed = await order(server, first, key, { 'idempotency-key': 'adopt-1' });
  assert.equal(placed.status, 201);
  const replay = await order(server, first, key, { 'idempotency-key': 'adopt-1' });
  assert.equal(replay.status, 201);
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.equal(await replay.text(), await placed.text());
  await expectError(await order(server, second, key, { 'idempotency-key': 'adopt-1' }), 422, 'idempotency_key_reused');
  // A 409 is not remembered: once the pet is available the same key places the order.
  await expectError(await order(server, second, key, { 'idempotency-key': 'adopt-2' }), 409, 'pet_not_available');
  const patch = { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"status":"available"}' };
  assert.equal((await server.request(`/v1/pets/${second}`, patch)).status, 200);
  assert.equal((await order(server, second, key, { 'idempotency-key': 'adopt-2' })).status, 201);
  // The same key on createPet names another request.
  const created = await server.post('/v1/pets', { name: 'Tom', categoryId: 2 }, { key: server.key, headers: { 'idempotency-key': 'shared' } });
  const adopted = await order(server, (await json(created)).id, server.key, { 'idempotency-key': 'shared' });
  assert.equal(adopted.status, 201);
  assert.equal(adopted.headers.get('idempotent-replayed'), null);
  assert.equal(storedOrders(server).length, 3);
});

test('the replay of a placement after the order was cancelled is the first 201, stale: placed, the first ETag, and nothing placed again', async (t) => {
  const server = await startTestServer(t);
  const petId = await pet(server);
  const { key } = await adopter(server);
  const placed = await order(server, petId, key, { 'idempotency-key': 'adopt-1' });
  assert.equal(placed.status, 201);
  const first = { body: await placed.text(), etag: placed.headers.get('etag'), location: placed.headers.get('location') };
  assert.equal((await step(server, JSON.parse(first.body).id, 'cancelled', key)).status, 200);
  assert.equal(storedPet(server, petId)?.status, 'available');

  const replay = await order(server, petId, key, { 'idempotency-key': 'adopt-1' });
  assert.equal(replay.status, 201);
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.equal(replay.headers.get('etag'), first.etag);
  assert.equal(replay.headers.get('location'), first.location);
  assert.equal(await replay.text(), first.body);
  assert.equal(JSON.parse(first.body).status, 'placed');
  // Where the order stands now is what its Location answers; the stale ETag no longer matches.
  const now = await server.request(first.location!, { key });
  assert.equal((await json(now)).status, 'cancelled');
  assert.notEqual(now.headers.get('etag'), first.etag);
  await expectError(await step(server, JSON.parse(first.body).id, 'cancelled', key, { 'if-match': first.etag! }), 412, 'precondition_failed');
  assert.deepEqual(storedOrders(server).map((row) => row.status), ['cancelled']);
  assert.equal(storedPet(server, petId)?.status, 'available');
});

test('listing orders: a key sees its own account\'s, orders:manage every account\'s; sorted by id, paginated and filtered like pets', async (t) => {
  const server = await startTestServer(t);
  const alice = await adopter(server);
  const bob = await adopter(server);
  for (let i = 0; i < 5; i++) assert.equal((await order(server, await pet(server), i < 3 ? alice.key : bob.key)).status, 201);
  const own = await json(await server.request('/v1/store/orders', { key: alice.key }));
  assert.deepEqual(own.map((each: { id: number }) => each.id), [1, 2, 3]);
  assert.ok(own.every((each: { account: string }) => each.account === alice.account));
  const all = await json(await server.request('/v1/store/orders'));
  assert.deepEqual(all.map((each: { id: number }) => each.id), [1, 2, 3, 4, 5]);
  const first = await server.request('/v1/store/orders?limit=2');
  assert.equal((await json(first)).length, 2);
  const next = /<([^>]+)>; rel="next"/.exec(first.headers.get('link') ?? '')?.[1];
  assert.match(next ?? '', /^\/v1\/store\/orders\?limit=2&cursor=/);
  const rest = await json(await server.request(`${next}`));
  assert.deepEqual(rest.map((each: { id: number }) => each.id), [3, 4]);
  assert.equal((await step(server, 2, 'cancelled')).status, 200);
  assert.deepEqual((await json(await server.request('/v1/store/orders?status=cancelled'))).map((each: { id: number }) => each.id), [2]);
  assert.deepEqual((await json(await server.request('/v1/store/orders?status=placed', { key: alice.key }))).map((each: { id: number }) => each.id), [1, 3]);
  for (const query of ['limit=0', 'limit=101', 'status=sold', 'cursor=nope', 'limit=1&limit=2', 'account=x']) {
    await expectError(await server.request(`/v1/store/orders?${query}`), 400, 'invalid_query');
  }
});

test('reading an order: 200 with its ETag; another account\'s order is 404 order_not_found unless the key has orders:manage', async (t) => {
  const server = await startTestServer(t);
  const alice = await adopter(server);
  const bob = await adopter(server);
  const placed = await json(await order(server, await pet(server), alice.key));
  const own = await server.request(`/v1/store/orders/${placed.id}`, { key: alice.key });
  assert.equal(own.status, 200);
  assert.equal(own.headers.get('etag'), '"1.1"');
  assert.equal(own.headers.get('deprecation'), null, 'not deprecated');
  assert.deepEqual(await json(own), placed);
  const foreign = await server.request(`/v1/store/orders/${placed.id}`, { key: bob.key });
  const missing = await server.request('/v1/store/orders/999', { key: bob.key });
  assert.match(await expectError(foreign, 404, 'order_not_found'), new RegExp(`${placed.id}`));
  await expectError(missing, 404, 'order_not_found');
  assert.equal((await server.request(`/v1/store/orders/${placed.id}`)).status, 200, 'orders:manage sees every order');
  await expectError(await server.request('/v1/store/orders/abc'), 400, 'invalid_path');
  await expectError(await server.request('/v1/store/orders/99999999999999999999'), 400, 'invalid_path');
});

test('the steps of an order move its pet in the same transaction: approved keeps it pending, completed sells it, cancelled frees it', async (t) => {
  const server = await startTestServer(t);
  const { key } = await adopter(server);
  const kept = await pet(server);
  const freed = await pet(server);
  const first = (await json(await order(server, kept, key))).id;
  const second = (await json(await order(server, freed, key))).id;
  const petETag = async (id: number) => (await server.request(`/v1/pets/${id}`)).headers.get('etag');
  const pendingTag = await petETag(kept);
  server.clock.advance(1000);
  const approved = await step(server, first, 'approved');
  assert.equal(approved.status, 200);
  assert.equal(approved.headers.get('etag'), '"1.2"');
  const approvedBody = await json(approved);
  assert.equal(approvedBody.status, 'approved');
  assert.equal(approvedBody.updatedAt, new Date(server.clock()).toISOString());
  assert.notEqual(approvedBody.updatedAt, approvedBody.placedAt);
  assert.equal(await petETag(kept), pendingTag, 'approving leaves the pet as it is');
  assert.equal((await step(server, first, 'completed')).status, 200);
  assert.equal(storedPet(server, kept)?.status, 'sold');
  assert.equal((await step(server, second, 'cancelled', key)).status, 200, 'the order\'s own account may cancel it');
  assert.equal(storedPet(server, freed)?.status, 'available');
  assert.deepEqual(storedOrders(server).map((each) => [each.status, each.version]), [['completed', 3], ['cancelled', 2]]);
});

test('a transition the table does not have is 409 invalid_transition naming the allowed ones; one reserved to orders:manage is 403', async (t) => {
  const server = await startTestServer(t);
  const { key } = await adopter(server);
  const id = (await json(await order(server, await pet(server), key))).id;
  assert.match(await expectError(await step(server, id, 'completed'), 409, 'invalid_transition'), /approved or cancelled/);
  const refused = await step(server, id, 'approved', key);
  assert.equal(refused.status, 403);
  assert.equal((await errorBody(refused)).code, 'insufficient_scope');
  assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="pets", error="insufficient_scope", scope="orders:manage"');
  assert.equal((await step(server, id, 'cancelled', key)).status, 200);
  assert.match(await expectError(await step(server, id, 'approved'), 409, 'invalid_transition'), /cannot change any more/);
  assert.match(await expectError(await step(server, id, 'placed'), 409, 'invalid_transition'), /cannot change any more/);
  assert.deepEqual(storedOrders(server).map((each) => each.status), ['cancelled']);
});

test('{} or the current status changes nothing (same ETag and updatedAt); null, another field or an unknown status is 400', async (t) => {
  const server = await startTestServer(t);
  const id = (await json(await order(server, await pet(server)))).id;
  const before = await server.request(`/v1/store/orders/${id}`);
  const body = await json(before);
  server.clock.advance(5000);
  for (const patch of [{}, { status: 'placed' }]) {
    const same = await step(server, id, patch);
    assert.equal(same.status, 200);
    assert.equal(same.headers.get('etag'), before.headers.get('etag'));
    assert.deepEqual(await json(same), body);
  }
  for (const patch of [{ status: null }, { petId: 2 }, { status: 'shipped' }, { status: 'approved', note: 'x' }]) {
    await expectError(await step(server, id, patch), 400, 'invalid_body');
  }
  assert.deepEqual(storedOrders(server).map((each) => [each.status, each.version]), [['placed', 1]]);
});

test('the checks of an order step come in order: path, existence, If-Match, body, transition, scope', async (t) => {
  const server = await startTestServer(t);
  const { key } = await adopter(server);
  const id = (await json(await order(server, await pet(server), key))).id;
  const stale = { 'if-match': '"1.9"' };
  await expectError(await step(server, 'x', 'approved', key, stale), 400, 'invalid_path');
  await expectError(await step(server, 999, 'approved', key, stale), 404, 'order_not_found');
  await expectError(await step(server, id, { status: 'nope' }, key, stale), 412, 'precondition_failed');
  await expectError(await step(server, id, { status: 'nope' }, key, { 'if-match': '"1.1"' }), 400, 'invalid_body');
  await expectError(await step(server, id, 'completed', key, { 'if-match': '"1.1"' }), 409, 'invalid_transition');
  await expectError(await step(server, id, 'approved', key, { 'if-match': '"1.1"' }), 403, 'insufficient_scope');
  await expectError(await step(server, id, 'approved', undefined, { 'if-match': 'W/"1.1"' }), 412, 'precondition_failed');
  assert.equal((await step(server, id, 'approved', undefined, { 'if-match': '"1.1"' })).status, 200);
  assert.deepEqual(storedOrders(server).map((each) => each.status), ['approved']);
});

test('of two concurrent steps with the same ETag exactly one is made; a cancel racing a complete: one wins, and the pet agrees with it', async (t) => {
  const server = await startTestServer(t);
  const a = (await json(await order(server, await pet(server)))).id;
  const conditional = await Promise.all(['approved', 'cancelled'].map((status) => step(server, a, status, undefined, { 'if-match': '"1.1"' })));
  assert.deepEqual(conditional.map((answer) => answer.status).sort(), [200, 412]);
  const b = (await json(await order(server, await pet(server)))).id;
  assert.equal((await step(server, b, 'approved')).status, 200);
  const racing = await Promise.all(['completed', 'cancelled'].map((status) => step(server, b, status)));
  assert.deepEqual(racing.map((answer) => answer.status).sort(), [200, 409]);
  const winner = await json(racing.find((answer) => answer.status === 200)!);
  const [, bOrder] = storedOrders(server);
  assert.equal(bOrder!.status, winner.status);
  assert.equal(storedPet(server, Number(bOrder!.petId))?.status, winner.status === 'completed' ? 'sold' : 'available');
});

test('two steps with the same If-Match, both read on a file before the writer thread commits either: exactly one is made, the other 412, and the pet agrees', async (t) => {
  // In memory the first step commits before the second reads; on a file the writer thread commits
  // later, so a step can read the order that another step is changing. Only the store's own check
  // of the version, in the transaction, can then refuse the second.
  const server = await startWriterTestServer(t);
  const received: string[] = [];
  server.service.server.on('request', (req: IncomingMessage) => received.push(req.method!));
  for (const [round, pair] of [['approved', 'cancelled'], ['cancelled', 'approved'], ['approved', 'cancelled']].entries()) {
    const petId = await pet(server, 'available', `Race ${round}`);
    const placed = await order(server, petId);
    const { id } = await json(placed);
    const etag = placed.headers.get('etag')!;
    const release = await server.pauseWriter();
    const before = received.filter((method) => method === 'PATCH').length;
    const answers = pair.map((status) => step(server, id, status, undefined, { 'if-match': etag }));
    // Both requests have been read, and so has the order (a synchronous read as each arrives),
    // while the writer thread is held: neither step can have committed.
    while (received.filter((method) => method === 'PATCH').length < before + 2) await new Promise((resolve) => setImmediate(resolve));
    release();
    const settled = await Promise.all(answers);
    const statuses = settled.map((answer) => answer.status);
    assert.deepEqual([...statuses].sort(), [200, 412], `round ${round}: ${pair.join(' / ')} gave ${statuses.join(' / ')}`);
    const winner = await json(settled.find((answer) => answer.status === 200)!);
    assert.equal((await errorBody(settled.find((answer) => answer.status === 412)!)).code, 'precondition_failed');
    const [row] = storedOrders(server).filter((each) => each.id === id);
    assert.deepEqual([row!.status, row!.version], [winner.status, 2], 'one step made, one version more');
    assert.equal(storedPet(server, petId)?.status, winner.status === 'cancelled' ? 'available' : 'pending', 'the pet agrees with the winner');
  }
});

test('an Idempotency-Key belongs to the API key, not to its account: two keys of one account each get their own answer', async (t) => {
  const server = await startTestServer(t);
  const first = await pet(server);
  const second = await pet(server, 'available', 'Tom');
  const alice = await adopter(server);
  const issued = await server.service.stores.keys.create({
    plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000, scopes: ADOPTER, account: alice.account, now: server.clock(),
  });
  const sibling = { key: issued.key, account: issued.record.account };
  assert.equal(sibling.account, alice.account, 'two keys of one account');
  const placed = await order(server, first, alice.key, { 'idempotency-key': 'adopt' });
  assert.equal(placed.status, 201);
  const placedBody = await placed.text();
  // The same key and the same body from the other key of the account: its own request, for a pet
  // that is now pending, never a replay of the first key's order.
  const same = await order(server, first, sibling.key, { 'idempotency-key': 'adopt' });
  assert.equal(same.headers.get('idempotent-replayed'), null);
  await expectError(same, 409, 'pet_not_available');
  // The same key with another body: not "reused", a placement of its own.
  const other = await order(server, second, sibling.key, { 'idempotency-key': 'adopt' });
  assert.equal(other.status, 201);
  assert.equal(other.headers.get('idempotent-replayed'), null);
  const otherBody = await other.text();
  assert.equal(JSON.parse(otherBody).petId, second);
  // Each key's retry replays its own answer.
  const replayed = [await order(server, first, alice.key, { 'idempotency-key': 'adopt' }), await order(server, second, sibling.key, { 'idempotency-key': 'adopt' })];
  assert.deepEqual(replayed.map((answer) => [answer.status, answer.headers.get('idempotent-replayed')]), [[201, 'true'], [201, 'true']]);
  assert.deepEqual([await replayed[0]!.text(), await replayed[1]!.text()], [placedBody, otherBody]);
  assert.deepEqual(storedOrders(server).map((each) => [each.petId, each.account]), [[String(first), alice.account], [String(second), alice.account]]);
  assert.equal((server.db.prepare('SELECT count(DISTINCT api_key_id) AS n FROM order_idempotency_keys').get() as { n: number }).n, 2, 'one record per API key');
});

test('an adopter may not complete its own approved order: 403 naming orders:manage, and the order and its pet stay as they were', async (t) => {
  const server = await startTestServer(t);
  const { key } = await adopter(server);
  const petId = await pet(server);
  const id = (await json(await order(server, petId, key))).id;
  assert.equal((await step(server, id, 'approved')).status, 200);
  for (const headers of [{}, { 'if-match': '"1.2"' }] as Record<string, string>[]) {
    const refused = await step(server, id, 'completed', key, headers);
    await expectError(refused, 403, 'insufficient_scope');
    assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="pets", error="insufficient_scope", scope="orders:manage"');
  }
  assert.deepEqual(storedOrders(server).map((each) => [each.status, each.version]), [['approved', 2]]);
  assert.equal(storedPet(server, petId)?.status, 'pending', 'not sold');
  assert.equal((await step(server, id, 'cancelled', key)).status, 200, 'cancelling stays its own to do');
});

test('while an order holds a pet, its status and its existence belong to the order: 409 pet_has_open_order, after the checks of a change', async (t) => {
  const server = await startTestServer(t);
  const petId = await pet(server);
  const id = (await json(await order(server, petId))).id;
  const patch = (body: string, headers: Record<string, string> = {}) =>
    server.request(`/v1/pets/${petId}`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json', ...headers }, body });
  const renamed = await patch('{"name":"Rexie","categoryId":3}');
  assert.equal(renamed.status, 200, 'name and category may change');
  for (const body of ['{"status":"available"}', '{"status":"pending"}', '{"name":"X","status":"pending"}']) {
    await expectError(await patch(body), 409, 'pet_has_open_order');
  }
  await expectError(await server.request(`/v1/pets/${petId}`, { method: 'DELETE' }), 409, 'pet_has_open_order');
  // The checks of a change come first: If-Match, then the body.
  await expectError(await patch('{"status":"sold"}', { 'if-match': '"1.1"' }), 412, 'precondition_failed');
  await expectError(await patch('{"status":null}'), 400, 'invalid_body');
  await expectError(await server.request(`/v1/pets/${petId}`, { method: 'DELETE', headers: { 'if-match': '"1.1"' } }), 412, 'precondition_failed');
  assert.deepEqual([storedPet(server, petId)?.name, storedPet(server, petId)?.status], ['Rexie', 'pending']);
  // Once the order is closed the pet is free again.
  assert.equal((await step(server, id, 'cancelled')).status, 200);
  assert.equal((await patch('{"status":"sold"}')).status, 200);
});

test('orders outlive their pet: once closed, the pet can be deleted and its orders stay readable', async (t) => {
  const server = await startTestServer(t);
  const petId = await pet(server);
  const id = (await json(await order(server, petId))).id;
  assert.equal((await step(server, id, 'approved')).status, 200);
  assert.equal((await step(server, id, 'completed')).status, 200);
  assert.equal((await server.request(`/v1/pets/${petId}`, { method: 'DELETE' })).status, 204);
  const kept = await server.request(`/v1/store/orders/${id}`);
  assert.equal(kept.status, 200);
  assert.deepEqual([(await json(kept)).petId, (await json(await server.request('/v1/store/orders'))).length], [petId, 1]);
});

test('the inventory counts pets by status, exactly, after every kind of change; it takes no parameter and needs pets:read', async (t) => {
  const server = await startTestServer(t);
  const inventory = async () => json(await server.request('/v1/store/inventory'));
  assert.deepEqual(await inventory(), { available: 0, pending: 0, sold: 0 });
  const ids = [await pet(server), await pet(server), await pet(server, 'sold'), await pet(server, 'pending')];
  assert.deepEqual(await inventory(), { available: 2, pending: 1, sold: 1 });
  const placed = (await json(await order(server, ids[0]!))).id;
  assert.deepEqual(await inventory(), { available: 1, pending: 2, sold: 1 });
  assert.equal((await step(server, placed, 'approved')).status, 200);
  assert.equal((await step(server, placed, 'completed')).status, 200);
  assert.deepEqual(await inventory(), { available: 1, pending: 1, sold: 2 });
  assert.equal((await server.request(`/v1/pets/${ids[2]}`, { method: 'DELETE' })).status, 204);
  const patch = { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"status":"available"}' };
  assert.equal((await server.request(`/v1/pets/${ids[3]}`, patch)).status, 200);
  const answer = await server.request('/v1/store/inventory');
  assert.deepEqual(await json(answer), { available: 2, pending: 0, sold: 1 });
  assert.deepEqual(Object.keys(await json(await server.request('/v1/store/inventory'))), ['available', 'pending', 'sold']);
  await expectError(await server.request('/v1/store/inventory?status=sold'), 400, 'invalid_query');
  const writer = await adopter(server, ['orders:write']);
  await expectError(await server.request('/v1/store/inventory', { key: writer.key }), 403, 'insufficient_scope');
});
