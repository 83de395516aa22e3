/**
 * Holds that expire and the cap of open orders per account, over HTTP, with an injected clock:
 * an order placed holds its pet until `expiresAt` to the millisecond; from then on every write
 * treats it as cancelled, reading the order shows it at once, and the service's sweep makes the
 * pets, their lists and the inventory show it (on a file, through the writer thread, whose
 * journal drops the readers' cached answers). An account at its cap is refused after the pet's
 * checks; staff never are. On PostgreSQL, two services on one database: a hold placed on one ends
 * on the other. The metrics count each expiry once.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { Scope } from '../../src/keys/scopes.ts';
import type { KeysStore } from '../../src/storage/keys.ts';
import { createMetrics } from '../../src/ops/metrics.ts';
import { startProcessProbe } from '../../src/ops/process-probe.ts';
import { createKeysStore } from '../../src/storage/postgres/keys-store.ts';
import { parseExposition, valueOf } from '../support/prometheus-text.ts';
import { promtoolCheckMetrics } from '../support/promtool.ts';
import { describeWithPostgres, openTestDatabase } from '../support/postgres.ts';
import {
  errorBody, fakeClock, json, startPostgresTestServer, startTestServer, startWriterTestServer, type TestServer,
} from '../support/test-server.ts';

const ADOPTER: Scope[] = ['pets:read', 'orders:write'];
const HOLD_SECONDS = 60;
const HOLD_MS = HOLD_SECONDS * 1000;

/** What the helpers need of a server of any engine. */
type AnyServer = Pick<TestServer, 'post' | 'request' | 'clock'> & { service: { stores: { keys: KeysStore } } };

async function adopter(server: AnyServer, scopes: Scope[] = ADOPTER, account?: string): Promise<{ key: string; account: string }> {
  const issued = await server.service.stores.keys.create({
    plan: 'enterprise', perMinute: 100_000, perDay: 1_000_000, scopes, now: server.clock(), ...(account ? { account } : {}),
  });
  return { key: issued.key, account: issued.record.account };
}

const pet = async (server: AnyServer, name = 'Rex') => (await json(await server.post('/v1/pets', { name, categoryId: 1 }))).id as number;
const order = (server: AnyServer, petId: number, key?: string) => server.post('/v1/store/orders', { petId }, key ? { key } : {});
const step = (server: AnyServer, orderId: number, body: object, key?: string, headers: Record<string, string> = {}) =>
  server.request(`/v1/store/orders/${orderId}`, {
    method: 'PATCH', ...(key ? { key } : {}), headers: { 'content-type': 'application/merge-patch+json', ...headers }, body: JSON.stringify(body),
  });

/** One row, as a plain object. */
const stored = (server: Pick<TestServer, 'db'>, sql: string, ...parameters: number[]) => ({ ...server.db.prepare(sql).get(...parameters) });

interface OrderBody { id: number; status: string; placedAt: string; updatedAt: string; expiresAt: string | null }

test('a placed order holds its pet until expiresAt to the millisecond; at expiresAt reading it shows it cancelled at once, as at expiresAt, one ETag on', async (t) => {
  const server = await startTestServer(t, { config: { orderHoldSeconds: HOLD_SECONDS } });
  const { key } = await adopter(server);
  const petId = await pet(server);
  const placed = await order(server, petId, key);
  assert.equal(placed.status, 201);
  const body = (await placed.json()) as OrderBody;
  const end = server.clock() + HOLD_MS;
  assert.equal(body.expiresAt, new Date(end).toISOString(), 'placedAt plus ORDER_HOLD_SECONDS');
  assert.equal(placed.headers.get('etag'), `"${body.id}.1"`);

  server.clock.now = end - 1;
  const before = await server.request(`/v1/store/orders/${body.id}`, { key });
  assert.deepEqual([before.headers.get('etag'), ((await before.json()) as OrderBody).status], [`"${body.id}.1"`, 'placed']);

  server.clock.now = end;
  const after = await server.request(`/v1/store/orders/${body.id}`, { key });
  assert.equal(after.headers.get('etag'), `"${body.id}.2"`);
  assert.deepEqual(await after.json(), { ...body, status: 'cancelled', updatedAt: new Date(end).toISOString(), expiresAt: null });
  // Nothing was written yet: the read applied the rule, and the sweep records the very same.
  assert.equal(stored(server, 'SELECT status FROM orders').status, 'placed');
  assert.equal(await server.service.stores.upkeep.expireOrders(end + 400, 100), 1);
  assert.deepEqual(stored(server, 'SELECT status, updated_at, expires_at, version FROM orders'), { status: 'cancelled', updated_at: end, expires_at: null, version: 2 });
  assert.deepEqual(stored(server, 'SELECT status, version FROM pets WHERE id = ?', petId), { status: 'available', version: 3 });
  const read = await server.request(`/v1/store/orders/${body.id}`, { key });
  assert.equal(read.headers.get('etag'), `"${body.id}.2"`, 'the same ETag as the read before the sweep');
});

test('every write at expiresAt treats the order as cancelled: PATCH {} and cancelled are 200 unchanged, approved is 409, a new order for the pet is 201', async (t) => {
  const server = await startTestServer(t, { config: { orderHoldSeconds: HOLD_SECONDS } });
  const first = await adopter(server);
  const second = await adopter(server);
  const petId = await pet(server);
  const { id } = (await json(await order(server, petId, first.key))) as OrderBody;
  server.clock.advance(HOLD_MS);
  const cancelled = { id, status: 'cancelled', expiresAt: null, updatedAt: new Date(server.clock()).toISOString() };

  for (const patch of [{}, { status: 'cancelled' }]) {
    const unchanged = await step(server, id, patch, first.key);
    assert.equal(unchanged.status, 200, JSON.stringify(patch));
    assert.equal(unchanged.headers.get('etag'), `"${id}.2"`);
    assert.deepEqual({ ...((await unchanged.json()) as OrderBody), petId: undefined, account: undefined, placedAt: undefined }, { ...cancelled, petId: undefined, account: undefined, placedAt: undefined });
  }
  const approved = await step(server, id, { status: 'approved' });
  assert.equal(approved.status, 409);
  const refusal = await errorBody(approved);
  assert.equal(refusal.code, 'invalid_transition');
  assert.match(refusal.message, /a cancelled order cannot change any more/);
  // The old If-Match names the placed order, which has changed since: 412.
  assert.equal((await step(server, id, { status: 'cancelled' }, first.key, { 'if-match': `"${id}.1"` })).status, 412);

  const again = await order(server, petId, second.key);
  assert.equal(again.status, 201, 'the pet was free from expiresAt on');
  assert.deepEqual(server.db.prepare('SELECT id, status, updated_at, version FROM orders ORDER BY id').all().map((row) => ({ ...row })), [
    { id, status: 'cancelled', updated_at: server.clock(), version: 2 },
    { id: id + 1, status: 'placed', updated_at: server.clock(), version: 1 },
  ]);
  assert.deepEqual(stored(server, 'SELECT status, version FROM pets WHERE id = ?', petId), { status: 'pending', version: 4 });
});

test('at expiresAt the pet may change status or be deleted; 1 ms before it is still held', async (t) => {
  const server = await startTestServer(t, { config: { orderHoldSeconds: HOLD_SECONDS } });
  const { key } = await adopter(server);
  const [rex, tom] = [await pet(server, 'Rex'), await pet(server, 'Tom')];
  await order(server, rex, key);
  await order(server, tom, key);
  const patchPet = (id: number, body: object) =>
    server.request(`/v1/pets/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify(body) });
  server.clock.advance(HOLD_MS - 1);
  assert.equal((await errorBody(await patchPet(rex, { status: 'sold' }))).code, 'pet_has_open_order');
  assert.equal((await errorBody(await server.request(`/v1/pets/${tom}`, { method: 'DELETE' }))).code, 'pet_has_open_order');
  server.clock.advance(1);
  const sold = await patchPet(rex, { status: 'sold' });
  assert.equal(sold.status, 200);
  assert.deepEqual(await sold.json(), { id: rex, name: 'Rex', categoryId: 1, status: 'sold' });
  assert.equal((await server.request(`/v1/pets/${tom}`, { method: 'DELETE' })).status, 204);
  assert.deepEqual(server.db.prepare('SELECT status, updated_at FROM orders ORDER BY id').all().map((row) => ({ ...row })), [
    { status: 'cancelled', updated_at: server.clock() }, { status: 'cancelled', updated_at: server.clock() },
  ]);
});

test('on a file, the sweep goes through the writer thread and the readers\' cached pet lists, pet and inventory show the expiry at once', async (t) => {
  const server = await startWriterTestServer(t, { config: { orderHoldSeconds: HOLD_SECONDS } });
  // The server's own key (this connection only reads: keys are made before it starts).
  const petId = await pet(server);
  assert.equal((await order(server, petId)).status, 201);
  const lists = async () => [
    await json(await server.request('/v1/pets?status=pending')),
    await json(await server.request('/v1/pets?status=available')),
    await json(await server.request('/v1/store/inventory')),
  ];
  // Read twice, so that the answers are cached.
  await lists();
  assert.deepEqual((await lists()).map((answer) => (Array.isArray(answer) ? answer.length : answer)), [1, 0, { available: 0, pending: 1, sold: 0 }]);
  server.clock.advance(HOLD_MS);
  assert.equal(await server.service.stores.upkeep.expireOrders(server.clock(), 100), 1);
  assert.deepEqual((await lists()).map((answer) => (Array.isArray(answer) ? answer.length : answer)), [0, 1, { available: 1, pending: 0, sold: 0 }]);
  assert.equal((await json(await server.request(`/v1/pets/${petId}`))).status, 'available');
  assert.equal(await server.service.stores.upkeep.expireOrders(server.clock(), 100), 0, 'once');
});

test('an account at its cap is 409 too_many_open_orders naming the limit, after 404 and 409 pet_not_available; nothing changes; staff are never capped and count', async (t) => {
  const server = await startTestServer(t, { config: { maxOpenOrdersPerAccount: 2 } });
  const { key, account } = await adopter(server);
  const staff = await adopter(server, ['pets:read', 'orders:write', 'orders:manage'], account);
  const pets = [await pet(server, 'a'), await pet(server, 'b'), await pet(server, 'c'), await pet(server, 'd')];
  assert.deepEqual([(await order(server, pets[0]!, key)).status, (await order(server, pets[1]!, key)).status], [201, 201]);
  const refused = await order(server, pets[2]!, key);
  assert.equal(refused.status, 409);
  const body = await errorBody(refused);
  assert.equal(body.code, 'too_many_open_orders');
  assert.match(body.message, /\b2 open orders\b/, 'the message names the limit');
  assert.equal((await errorBody(await order(server, 999_999, key))).code, 'pet_not_found', '404 first');
  assert.equal((await errorBody(await order(server, pets[0]!, key))).code, 'pet_not_available', 'then the pet\'s 409');
  assert.deepEqual(stored(server, 'SELECT status, version FROM pets WHERE id = ?', pets[2]!), { status: 'available', version: 1 });
  assert.equal(await json(await server.request('/v1/store/orders?limit=100', { key })).then((list: unknown[]) => list.length), 2);
  // The account's staff key is not capped, and its order counts for the account.
  assert.equal((await order(server, pets[2]!, staff.key)).status, 201);
  const { id } = (await json(await server.request('/v1/store/orders?status=placed&limit=1', { key })))[0] as { id: number };
  assert.equal((await step(server, id, { status: 'cancelled' }, key)).status, 200);
  assert.equal((await errorBody(await order(server, pets[3]!, key))).code, 'too_many_open_orders', 'still two open after one cancelled');
  // A hold that ended frees a place in the placement's own write.
  server.clock.advance(172_800_000);
  assert.equal((await order(server, pets[3]!, key)).status, 201);
});

test('the metrics count each expiry once as a cancellation and in orders_expired_total, by the sweep and by a write; promtool accepts them', async (t) => {
  const probe = startProcessProbe();
  t.after(() => probe.stop());
  const metrics = createMetrics(probe);
  const server = await startTestServer(t, { observer: metrics, config: { orderHoldSeconds: HOLD_SECONDS } });
  const { key } = await adopter(server);
  const [a, b, c] = [await pet(server, 'a'), await pet(server, 'b'), await pet(server, 'c')];
  for (const id of [a, b, c]) assert.equal((await order(server, id, key)).status, 201);
  server.clock.advance(HOLD_MS);
  // A write expires one (the new order for its pet), the sweep the other two.
  const other = await adopter(server);
  assert.equal((await order(server, a, other.key)).status, 201);
  metrics.ordersExpired(await server.service.stores.upkeep.expireOrders(server.clock(), 100));
  const text = metrics.render();
  const exposition = parseExposition(text);
  assert.equal(valueOf(exposition, 'orders_expired_total'), 3);
  assert.equal(valueOf(exposition, 'orders_total', { status: 'cancelled' }), 3);
  assert.equal(valueOf(exposition, 'orders_total', { status: 'placed' }), 4);
  const verdict = promtoolCheckMetrics(t, text);
  if (verdict !== null) assert.equal(verdict.status, 0, verdict.output);
});

describeWithPostgres('holds and the cap on two services over one PostgreSQL database', (cluster) => {
  async function twoServices(t: TestContext) {
    const url = await cluster().createDatabase();
    const clock = fakeClock();
    const config = { orderHoldSeconds: HOLD_SECONDS, maxOpenOrdersPerAccount: 3 };
    const servers = await Promise.all([0, 1].map(async () =>
      startPostgresTestServer(t, (await openTestDatabase(t, cluster(), { url, poolSize: 4 })).sql, { clock, config })));
    const { sql } = await openTestDatabase(t, cluster(), { url, poolSize: 2 });
    const keys = createKeysStore(sql, { appEnv: 'development' });
    return { servers, clock, sql, keys };
  }

  test('a hold placed on one service ends at expiresAt on the other: 1 ms before, the other refuses the pet; at expiresAt, it places a new order', async (t) => {
    const { servers: [one, two], clock, sql } = await twoServices(t);
    const first = await adopter(one!);
    const second = await adopter(two!);
    const petId = await pet(one!);
    const { id, expiresAt } = (await json(await order(one!, petId, first.key))) as OrderBody;
    clock.now = Date.parse(expiresAt!) - 1;
    assert.equal((await errorBody(await order(two!, petId, second.key))).code, 'pet_not_available');
    clock.now = Date.parse(expiresAt!);
    const placed = await order(two!, petId, second.key);
    assert.equal(placed.status, 201);
    assert.equal(((await json(await one!.request(`/v1/store/orders/${id}`, { key: first.key }))) as OrderBody).status, 'cancelled');
    const rows = await sql<{ id: string; status: string; updated_at: string }[]>`SELECT id::text, status, updated_at::text FROM orders ORDER BY id`;
    assert.deepEqual(rows.map((row) => [row.status, row.updated_at]), [['cancelled', String(clock.now)], ['placed', String(clock.now)]]);
  });

  test('the sweep of either service expires a due order once; an approval racing it: one wins, the pet agrees', async (t) => {
    const { servers: [one, two], clock, sql } = await twoServices(t);
    const staff = await adopter(one!, ['pets:read', 'orders:write', 'orders:manage']);
    const ids: number[] = [];
    for (let i = 0; i < 12; i++) ids.push(((await json(await order(one!, await pet(one!, `p${i}`), staff.key))) as OrderBody).id);
    const end = clock() + HOLD_MS;
    // Approvals asked 1 ms before the end, both sweeps at the end, all at once.
    clock.now = end - 1;
    const approvals = ids.map((id, i) => step(i % 2 === 0 ? one! : two!, id, { status: 'approved' }, staff.key));
    clock.now = end;
    const sweeps = [one!, two!].map((server) => server.service.stores.upkeep.expireOrders(end, 100));
    const [answers, swept] = await Promise.all([Promise.all(approvals), Promise.all(sweeps)]);
    const approved = answers.filter((answer) => answer.status === 200).length;
    assert.equal(approved + swept[0]! + swept[1]!, 12, `${approved} approved, ${swept.join(' + ')} expired`);
    const rows = await sql<{ order: string; pet: string; updated_at: string }[]>`
      SELECT o.status AS order, p.status AS pet, o.updated_at::text FROM orders o JOIN pets p ON p.id = o.pet_id ORDER BY o.id`;
    for (const row of rows) {
      assert.ok(row.order === 'approved' ? row.pet === 'pending' : row.order === 'cancelled' && row.pet === 'available' && row.updated_at === String(end), JSON.stringify(row));
    }
  });

  test('50 concurrent placements by one account over two services give exactly the cap, and the database agrees', async (t) => {
    const { servers, sql } = await twoServices(t);
    const { key, account } = await adopter(servers[0]!);
    const petIds: number[] = [];
    for (let i = 0; i < 50; i++) petIds.push(await pet(servers[0]!, `p${i}`));
    const answers = await Promise.all(petIds.map((petId, i) => order(servers[i % 2]!, petId, key)));
    const statuses = answers.map((answer) => answer.status);
    assert.equal(statuses.filter((status) => status === 201).length, 3);
    assert.equal(statuses.filter((status) => status === 409).length, 47);
    for (const answer of answers) if (answer.status === 409) assert.equal((await errorBody(answer)).code, 'too_many_open_orders');
    const [row] = await sql<{ open: string; pending: string }[]>`
      SELECT (SELECT count(*) FROM orders WHERE account = ${account} AND status IN ('placed', 'approved'))::text AS open,
             (SELECT count(*) FROM pets WHERE status = 'pending')::text AS pending`;
    assert.deepEqual(row, { open: '3', pending: '3' });
  });
});
