/**
 * Properties of adoption over hostile requests sent as raw bytes: whatever body, media type,
 * If-Match, key, path or query an order or inventory request carries, the worst cases of
 * test/support/worst-cases.ts at any size included, the answer is one the contract allows for it,
 * in its order of checks, never a 500, an error in at most 1 KiB; an order is stored only on 201
 * and changed only on 200; and after every request each pet is `pending` exactly when an open
 * order holds it.
 *
 * The expected answer is worked out from the database as it is before each request, never from
 * what earlier runs are assumed to have done, so the properties hold for any seed: each runs with
 * several (suiteSeeds), one of them new at every run, each on a fresh server.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { orderETag } from '../../src/api/orders/json.ts';
import type { OrderStatus } from '../../src/storage/orders.ts';
import { startTestServer, type TestServer } from '../support/test-server.ts';
import { rawRequest } from '../support/raw-http.ts';
import { ifMatchOutcome, INT64_MAX, settings, suiteSeeds } from '../support/property.ts';
import { assertContractAnswer, ifMatchTemplate, lineBytes, rawMessage, roomyLimiter, worstCaseAt } from '../support/hostile-http.ts';
import { checkAnswer, complexityFixtures, COMPLEXITY_SERVER } from '../support/complexity.ts';
import { worstCases } from '../support/worst-cases.ts';

interface OrderRow { id: number; account: string; status: OrderStatus; version: number; petId: number }

function orderRows(server: TestServer): OrderRow[] {
  return server.db.prepare('SELECT id, account, status, version, pet_id AS petId FROM orders ORDER BY id').all().map((row) => ({ ...row }) as unknown as OrderRow);
}

/**
 * Pets whose status disagrees with their orders: held by an open order but not pending, or
 * ordered, no order open, and still pending (a pet created pending and never ordered is fine).
 */
function disagreements(server: TestServer): number {
  return (server.db.prepare(`
    SELECT count(*) AS n FROM pets p
     WHERE EXISTS (SELECT 1 FROM orders o WHERE o.pet_id = p.id)
       AND (p.status = 'pending') <> EXISTS (SELECT 1 FROM orders o WHERE o.pet_id = p.id AND o.status IN ('placed', 'approved'))`).get() as { n: number }).n;
}

/** The pet's status as stored now, or null when there is no such pet. */
function petStatus(server: TestServer, id: bigint): string | null {
  const row = server.db.prepare('SELECT status FROM pets WHERE id = ?').get(id) as { status: string } | undefined;
  return row?.status ?? null;
}

/** Runs `property` once per seed of suiteSeeds, each as a subtest named after its seed. */
async function forEachSeed(t: TestContext, property: (t: TestContext, seed: number) => Promise<void>): Promise<void> {
  for (const seed of suiteSeeds()) await t.test(`seed ${seed} (FC_SEED=${seed} replays it)`, (sub) => property(sub, seed));
}

function addPet(server: TestServer, status: 'available' | 'pending' | 'sold' = 'available'): number {
  return Number((server.db.prepare("INSERT INTO pets (name, category_id, status) VALUES ('Rex', 1, ?) RETURNING id").get(status) as { id: number }).id);
}

async function keysFor(server: TestServer) {
  const make = async (scopes: ('pets:read' | 'orders:write' | 'orders:manage')[]) =>
    server.service.stores.keys.create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 1_000_000, scopes, now: server.clock() });
  const owner = await make(['pets:read', 'orders:write']);
  const other = await make(['orders:write']);
  const staff = await make(['orders:manage']);
  return { owner, other, staff };
}

/**
 * The contract's table of transitions, written out here rather than imported from
 * src/storage/orders.ts, so that a wrong entry in the code cannot also be the test's expectation.
 * `manage`: only a key with orders:manage may make it.
 */
const CONTRACT_TRANSITIONS: Readonly<Record<OrderStatus, readonly { to: OrderStatus; manage: boolean }[]>> = {
  placed: [{ to: 'approved', manage: true }, { to: 'cancelled', manage: false }],
  approved: [{ to: 'completed', manage: true }, { to: 'cancelled', manage: false }],
  completed: [],
  cancelled: [],
};

/** The media types a PATCH of an order accepts (RFC 7396's, or plain JSON), written out here. */
const MERGE_PATCH_TYPES = /^application\/(merge-patch\+)?json(; charset=utf-8)?$/;

const orderContentType = fc.constantFrom('application/json', 'application/json; charset=utf-8', 'application/merge-patch+json', 'text/plain', '', undefined);

test('any POST /v1/store/orders answers 201, 400, 404, 409, 413 or 415 with the contract code, and places an order only on 201', (t) => forEachSeed(t, async (t, seed) => {
  const server = await startTestServer(t, { overrides: { limiter: roomyLimiter() } });
  const { owner } = await keysFor(server);
  const petLiteral = fc.oneof(
    fc.constantFrom('FRESH', 'PENDING', 'SOLD', 'UNKNOWN'),
    fc.constantFrom('0', '-1', '1.0', '1e0', '"1"', 'null', 'true', '[]', '{}', '9223372036854775808', String(INT64_MAX)),
    fc.bigInt({ min: 1n, max: INT64_MAX }).map(String),
  );
  const body = fc.oneof(
    { weight: 4, arbitrary: fc.tuple(petLiteral, fc.option(fc.constantFrom('"note":"x"', '"petId":1', '"status":"placed"', '"__proto__":{}'), { nil: undefined }), fc.constantFrom('', ' ', '\n'))
      .map(([literal, extra, space]) => `{${space}"petId":${space}${literal}${extra ? `,${extra}` : ''}}`) },
    { weight: 1, arbitrary: fc.jsonValue().map((value) => JSON.stringify(value) ?? '') },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 80 }).map((bytes) => Buffer.from(bytes).toString('latin1')) },
    { weight: 1, arbitrary: fc.constantFrom('', '   ', `{"petId":1,"pad":"${'x'.repeat(17 * 1024)}"}`) },
  );
  await fc.assert(
    fc.asyncProperty(body, orderContentType, async (template, type) => {
      const targets = { FRESH: addPet(server), PENDING: addPet(server, 'pending'), SOLD: addPet(server, 'sold'), UNKNOWN: 9_000_000 };
      const text = template.replace(/FRESH|PENDING|SOLD|UNKNOWN/g, (name) => String(targets[name as keyof typeof targets]));
      const bytes = Buffer.from(text, 'latin1');
      const before = orderRows(server).length;
      // A generated id may name a pet of an earlier run, ordered since: what counts is the pet as it is now.
      const asked = /^\{\s*"petId":\s*(\d+)\s*\}$/.exec(text)?.[1];
      const wellFormed = asked !== undefined && BigInt(asked) >= 1n && BigInt(asked) <= INT64_MAX;
      const status = wellFormed ? petStatus(server, BigInt(asked)) : undefined;
      const lines = ['POST /v1/store/orders HTTP/1.1', 'Host: x', `Authorization: Bearer ${owner.key}`, `Content-Length: ${bytes.length}`];
      if (type !== undefined) lines.push(`Content-Type: ${type}`);
      const response = await rawRequest(server.url, rawMessage(lines, bytes));
      const context = `${type} ${JSON.stringify(text.slice(0, 100))}`;
      const code = assertContractAnswer(response, {
        201: [], 400: ['invalid_json', 'invalid_body'], 404: ['pet_not_found'], 409: ['pet_not_available'], 413: ['payload_too_large'], 415: ['unsupported_media_type'],
      }, context);
      assert.equal(orderRows(server).length, before + (response.status === 201 ? 1 : 0), context);
      if (response.status === 201) {
        const order = JSON.parse(response.body) as { id: number; petId: number; status: string };
        assert.equal(String(order.petId), asked, context);
        assert.equal(order.status, 'placed');
        assert.equal(response.headers.location, `/v1/store/orders/${order.id}`);
      }
      if (code === 'pet_not_found') assert.equal(status, null, context);
      if (code === 'pet_not_available') assert.ok(status === 'pending' || status === 'sold', context);
      // A well-formed placement sent as JSON: 201 for an available pet, 404 for none, 409 for any other.
      if (wellFormed && type?.startsWith('application/json')) {
        assert.equal(response.status, status === null ? 404 : status === 'available' ? 201 : 409, `${context}: pet ${asked} was ${status}`);
      }
      assert.equal(disagreements(server), 0, context);
    }),
    settings(100, seed),
  );
}));

test('any PATCH of an order (body, media type, If-Match, key) is answered in the contract\'s order of checks, and changes it only on 200', (t) => forEachSeed(t, async (t, seed) => {
  const server = await startTestServer(t, { overrides: { limiter: roomyLimiter() } });
  const keys = await keysFor(server);
  const statusLiteral = fc.constantFrom('"placed"', '"approved"', '"completed"', '"cancelled"', 'null', '"shipped"', '"APPROVED"', '1');
  const body = fc.oneof(
    { weight: 5, arbitrary: fc.tuple(fc.option(statusLiteral, { nil: undefined }), fc.option(fc.constantFrom('"petId":2', '"account":"x"', '"version":1'), { nil: undefined }))
      .map(([status, extra]) => `{${[status === undefined ? null : `"status":${status}`, extra ?? null].filter(Boolean).join(',')}}`) },
    { weight: 1, arbitrary: fc.jsonValue().map((value) => JSON.stringify(value) ?? '') },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 60 }).map((bytes) => Buffer.from(bytes).toString('latin1')) },
  );
  const target = fc.constantFrom('fresh', 'approved', 'older', 'unknown');
  const who = fc.constantFrom('owner', 'other', 'staff') as fc.Arbitrary<keyof typeof keys>;
  const reached = new Set<number>();
  await fc.assert(
    fc.asyncProperty(target, who, body, orderContentType, ifMatchTemplate, async (aim, caller, text, type, template) => {
      const [result] = server.service.stores.orders.placeMany([{ petId: BigInt(addPet(server)), account: keys.owner.record.account, now: server.clock(), expiresAt: server.clock() + 3_600_000, maxOpen: null }]);
      const placed = (result as { order: { id: number } }).order;
      if (aim === 'approved') server.service.stores.orders.changeMany([{ id: BigInt(placed.id), to: 'approved', expectedVersion: null, manage: true, account: null, now: server.clock() }]);
      const rows = orderRows(server);
      const id = aim === 'unknown' ? 9_000_000 : aim === 'older' ? rows[Math.floor(rows.length / 2)]!.id : placed.id;
      const before = rows.find((row) => row.id === id);
      const ifMatch = before ? template?.replaceAll('CURRENT', orderETag(before)) ?? null : template?.replaceAll('CURRENT', '"1.1"') ?? null;
      const bytes = Buffer.from(text, 'latin1');
      const lines: (string | Buffer)[] = [`PATCH /v1/store/orders/${id} HTTP/1.1`, 'Host: x', `Authorization: Bearer ${keys[caller].key}`, `Content-Length: ${bytes.length}`];
      if (type !== undefined) lines.push(`Content-Type: ${type}`);
      if (ifMatch !== null) lines.push(Buffer.from(`If-Match: ${ifMatch}`, 'latin1'));
      const response = await rawRequest(server.url, rawMessage(lines, bytes));
      reached.add(response.status);
      const context = `${aim} order by ${caller}, If-Match ${JSON.stringify(ifMatch)}, ${type}, ${JSON.stringify(text.slice(0, 80))}`;
      const manage = caller === 'staff';
      const visible = before !== undefined && (manage || before.account === keys[caller].record.account);
      const precondition = ifMatchOutcome(ifMatch, before ? orderETag(before) : '');
      // The checks in the contract's order: existence and visibility, If-Match, body, transition, scope.
      if (!visible) assertContractAnswer(response, { 404: ['order_not_found'] }, context);
      else if (precondition === 'bad_request') assertContractAnswer(response, { 400: ['bad_request'] }, context);
      else if (precondition === 'precondition_failed') assertContractAnswer(response, { 412: ['precondition_failed'] }, context);
      else {
        const code = assertContractAnswer(response, {
          200: [], 400: ['invalid_json', 'invalid_body'], 403: ['insufficient_scope'], 409: ['invalid_transition'], 415: ['unsupported_media_type'],
        }, context);
        const to = /^\{"status":"(placed|approved|completed|cancelled)"\}$/.exec(text)?.[1] as OrderStatus | undefined;
        const step = to === undefined ? undefined : CONTRACT_TRANSITIONS[before!.status].find((each) => each.to === to);
        if (code === 'invalid_transition') assert.ok(to !== undefined && to !== before!.status && step === undefined, context);
        if (code === 'insufficient_scope') assert.ok(step?.manage === true && !manage, context);
        if (response.status === 200) assert.equal(JSON.parse(response.body).status, to ?? before!.status, context);
        // A well-formed step sent as a merge patch or JSON: the contract's table decides it all.
        if (to !== undefined && type !== undefined && MERGE_PATCH_TYPES.test(type)) {
          const expected = to === before!.status ? 200 : step === undefined ? 409 : step.manage && !manage ? 403 : 200;
          assert.equal(response.status, expected, context);
        }
      }
      const after = orderRows(server).find((row) => row.id === id);
      const changed = JSON.stringify(after) !== JSON.stringify(before);
      assert.equal(changed, response.status === 200 && after!.status !== before!.status, context);
      if (changed) assert.equal(after!.version, before!.version + 1, context);
      assert.equal(disagreements(server), 0, context);
    }),
    // One example of each answer, whatever the seed generates besides; the third is an adopter
    // completing its own approved order.
    { ...settings(120, seed), examples: [
      ['fresh', 'owner', '{"status":"cancelled"}', 'application/merge-patch+json', null],
      ['fresh', 'owner', '{"status":"approved"}', 'application/merge-patch+json', 'CURRENT'],
      ['approved', 'owner', '{"status":"completed"}', 'application/json', null],
      ['fresh', 'staff', '{"status":"completed"}', 'application/json', null],
      ['fresh', 'staff', '{"status":"shipped"}', 'application/merge-patch+json', null],
      ['fresh', 'staff', '{"status":"approved"}', 'text/plain', null],
      ['fresh', 'staff', '{"status":"approved"}', 'application/json', '"9.9"'],
      ['fresh', 'other', '{"status":"cancelled"}', 'application/json', null],
      ['unknown', 'staff', '{}', 'application/json', null],
    ] },
  );
  assert.deepEqual([...reached].sort(), [200, 400, 403, 404, 409, 412, 415], 'every answer was reached');
}));

test('any query on GET /v1/store/orders answers 200 with the caller\'s orders only, or 400 invalid_query', (t) => forEachSeed(t, async (t, seed) => {
  const server = await startTestServer(t, { overrides: { limiter: roomyLimiter() } });
  const keys = await keysFor(server);
  for (const key of [keys.owner, keys.other, keys.owner]) {
    server.service.stores.orders.placeMany([{ petId: BigInt(addPet(server)), account: key.record.account, now: server.clock(), expiresAt: server.clock() + 3_600_000, maxOpen: null }]);
  }
  const query = fc.oneof(
    fc.tuple(fc.constantFrom('limit', 'status', 'cursor', 'account', 'limit=1&limit'), fc.constantFrom('1', '100', '0', '101', 'placed', 'sold', 'YWZ0ZXI6MQ', 'x', '', '%00')).map(([name, value]) => `${name}=${value}`),
    fc.string({ unit: 'grapheme-ascii', maxLength: 40 }).map((text) => text.replace(/[\s#]/g, '')),
  );
  await fc.assert(
    fc.asyncProperty(query, fc.constantFrom('owner', 'other', 'staff') as fc.Arbitrary<keyof typeof keys>, async (search, caller) => {
      const response = await rawRequest(server.url, rawMessage([`GET /v1/store/orders?${search} HTTP/1.1`, 'Host: x', `Authorization: Bearer ${keys[caller].key}`]));
      assertContractAnswer(response, { 200: [], 400: ['invalid_query'], 404: ['not_found'] }, search);
      if (response.status !== 200) return;
      const orders = JSON.parse(response.body) as { account: string }[];
      if (caller !== 'staff') assert.ok(orders.every((order) => order.account === keys[caller].record.account), search);
    }),
    settings(80, seed),
  );
}));

test('any method and segment after /v1/store/orders/ answers as documented, never a 500, and changes an order only on 200', async (t) => {
  const server = await startTestServer(t, { overrides: { limiter: roomyLimiter() } });
  const { owner } = await keysFor(server);
  for (let i = 0; i < 3; i++) server.service.stores.orders.placeMany([{ petId: BigInt(addPet(server)), account: owner.record.account, now: server.clock(), expiresAt: server.clock() + 3_600_000, maxOpen: null }]);
  const segment = fc.oneof(
    lineBytes(40),
    fc.stringMatching(/^-?0{0,30}[0-9]{0,22}$/).map((text) => Buffer.from(text)),
    fc.constantFrom('1', '01', '-0', '3', '9223372036854775807', '9223372036854775808', '%31', '1%00', '1/', '..', '', '0'.repeat(5_000) + '1').map((text) => Buffer.from(text)),
  );
  const method = fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom('GET', 'PATCH') },
    { weight: 1, arbitrary: fc.constantFrom('POST', 'PUT', 'DELETE', 'OPTIONS', 'TRACE', 'get', 'G ET', '') },
  );
  await fc.assert(
    fc.asyncProperty(method, segment, fc.constantFrom('{}', '{"status":"cancelled"}', '{"status":"approved"}', '{"x":1}'), async (verb, orderId, body) => {
      const before = JSON.stringify(orderRows(server));
      const target = Buffer.concat([Buffer.from(`${verb} /v1/store/orders/`), orderId, Buffer.from(' HTTP/1.1')]);
      const lines = [target, 'Host: x', `Authorization: Bearer ${owner.key}`, 'Content-Type: application/merge-patch+json', `Content-Length: ${body.length}`];
      const response = await rawRequest(server.url, rawMessage(lines, Buffer.from(body)));
      const context = `${verb} ${orderId.toString('latin1').slice(0, 60)} ${body}`;
      assertContractAnswer(response, {
        200: [], 400: ['invalid_path', 'invalid_body'], 403: ['insufficient_scope'], 404: ['order_not_found', 'not_found'], 405: ['method_not_allowed'], 409: ['invalid_transition'],
      }, context);
      // Only a cancel changes anything here (an order already cancelled stays as it is).
      if (JSON.stringify(orderRows(server)) !== before) assert.ok(response.status === 200 && verb === 'PATCH' && body.includes('cancelled'), context);
      assert.equal(disagreements(server), 0, context);
    }),
    settings(250),
  );
});

test('any query on GET /v1/store/inventory answers 200 with the three counts, or 400 invalid_query when it has any parameter', async (t) => {
  const server = await startTestServer(t, { overrides: { limiter: roomyLimiter() } });
  addPet(server);
  addPet(server, 'sold');
  const query = fc.oneof(lineBytes(60), fc.constantFrom('', '&', 'limit=1', 'x', '=', '&&&', 'a=1&a=1').map((text) => Buffer.from(text)));
  await fc.assert(
    fc.asyncProperty(query, async (search) => {
      const target = Buffer.concat([Buffer.from('GET /v1/store/inventory?'), search, Buffer.from(' HTTP/1.1')]);
      const response = await rawRequest(server.url, rawMessage([target, 'Host: x', `Authorization: Bearer ${server.key}`]));
      const context = search.toString('latin1');
      assertContractAnswer(response, { 200: [], 400: ['invalid_query'], 404: ['not_found'] }, context);
      if (response.status === 200) {
        assert.deepEqual(JSON.parse(response.body), { available: 1, pending: 0, sold: 1 }, context);
        assert.equal(new URLSearchParams(context).size, 0, `${context}: a parameter was accepted`);
      }
    }),
    settings(200),
  );
});

test('the worst cases of every store operation, at any size up to the caps, answer as documented in at most 1 KiB and change nothing unless they succeed', async (t) => {
  const server = await startTestServer(t, COMPLEXITY_SERVER);
  const fixtures = await complexityFixtures(server);
  const cases = worstCases(fixtures).filter((worst) => worst.surface.operation?.tag === 'store');
  const state = () => JSON.stringify([orderRows(server), server.db.prepare('SELECT id, status, version FROM pets ORDER BY id').all()]);
  await fc.assert(
    fc.asyncProperty(worstCaseAt(cases), async ({ worst, bytes, context }) => {
      const before = state();
      const response = await rawRequest(server.url, bytes);
      checkAnswer(worst, response, context);
      if (response.status >= 300) assert.equal(state(), before, context);
      assert.equal(disagreements(server), 0, context);
    }),
    settings(300),
  );
  assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
});
