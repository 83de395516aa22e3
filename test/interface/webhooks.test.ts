/**
 * Managing webhooks over HTTP, rule by rule, against a real server: registering an endpoint (its
 * URL held to the address policy in every spelling, its host resolved by a resolver the test
 * controls), the secret shown only in the creation's answer and its replay, the cap per account,
 * another account's webhook that does not exist, the merge patch, the removal and the delivery
 * log. Each test checks the status, the code, the headers, the body and what the store holds after.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Scope } from '../../src/keys/scopes.ts';
import type { Resolver } from '../../src/http/outbound-resolution.ts';
import { EVENT_TYPES } from '../../src/storage/events.ts';
import type { Webhook } from '../../src/storage/webhooks.ts';
import type { Stores } from '../../src/storage/stores.ts';
import { describeWithPostgres, openTestDatabase } from '../support/postgres.ts';
import { errorBody, fakeClock, json, startPostgresTestServer, startTestServer, startWriterTestServer, type TestServer } from '../support/test-server.ts';
import { REFUSED_ADDRESS_FORMS } from '../support/webhook-addresses.ts';
import { startReceiver } from '../support/webhook-receivers.ts';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { startDeliveryWorker } from '../../src/service/deliveries.ts';

const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;
const FIELDS = ['id', 'url', 'types', 'orders', 'status', 'createdAt'];
/** A public address (nothing is sent to it: creating a webhook only resolves its host). */
const PUBLIC = '93.184.215.14';

/**
 * The names these tests resolve, as DNS would answer them: a public host, a private one, one
 * with a public and a private address, and whatever a test sets; any other name does not exist.
 */
function testResolver(names: Record<string, string[]> = {}): Resolver & { names: Record<string, string[]> } {
  const table: Record<string, string[]> = {
    'hooks.example': [PUBLIC],
    'other.example': ['93.184.215.15'],
    'intranet.example': ['10.0.0.5'],
    'split.example': [PUBLIC, '127.0.0.1'],
    'metadata.example': ['169.254.169.254'],
    'v6.example': ['2606:2800:220:1:248:1893:25c8:1946'],
    'ula.example': ['fd00::1'],
    ...names,
  };
  const resolve: Resolver = async (hostname) => {
    const addresses = table[hostname.toLowerCase()];
    if (addresses === undefined) throw Object.assign(new Error(`no such name ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 as const : 4 as const }));
  };
  return Object.assign(resolve, { names: table });
}

type Server = Pick<TestServer, 'post' | 'request' | 'clock' | 'logs' | 'keyId'> & { service: { stores: Pick<Stores, 'keys' | 'webhooks'> } };

/** A key of a new account with `scopes`, unlimited enough for the tests. */
async function keyOf(server: Server, scopes: Scope[] = ['webhooks:manage']): Promise<{ key: string; account: string; id: string }> {
  const issued = await server.service.stores.keys.create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 100_000_000, scopes, now: server.clock() });
  return { key: issued.key, account: issued.record.account, id: issued.record.id };
}

const create = (server: Server, body: unknown, key?: string, headers: Record<string, string> = {}) =>
  server.post('/v1/webhooks', body, { ...(key ? { key } : {}), headers });

const patch = (server: Server, id: number | string, body: unknown, key?: string) =>
  server.request(`/v1/webhooks/${id}`, {
    method: 'PATCH', ...(key ? { key } : {}),
    headers: { 'content-type': 'application/merge-patch+json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

async function expectError(response: Response, status: number, code: string): Promise<string> {
  assert.equal(response.status, status, `${response.status} ${await response.clone().text()}`);
  const body = await errorBody(response);
  assert.equal(body.code, code);
  return body.message;
}

/** The account's webhooks as the store holds them. */
const stored = async (server: Server, account: string): Promise<Webhook[]> => server.service.stores.webhooks.list({ account, afterId: 0, limit: 100 });

/** Creates a webhook that must succeed; its answer's body. */
async function made(server: Server, body: Record<string, unknown>, key?: string): Promise<any> {
  const response = await create(server, body, key);
  assert.equal(response.status, 201, await response.clone().text());
  return json(response);
}

const sqliteServer = (t: Parameters<typeof startTestServer>[0], config = {}) =>
  startTestServer(t, { resolver: testResolver(), config });

test('a creation: 201 with the webhook in its field order, the secret last, Location; all seven types and orders own by default; stored as answered', async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server);
  server.clock.advance(1234);
  const response = await create(server, { url: 'https://Hooks.Example/pets?x=1' }, key);
  assert.equal(response.status, 201);
  const text = await response.text();
  const body = JSON.parse(text);
  assert.deepEqual(Object.keys(body), [...FIELDS, 'secret']);
  assert.ok(text.startsWith(`{"id":${body.id},"url":`) && text.endsWith(`"secret":"${body.secret}"}`), 'in the interface\'s order, the secret last');
  assert.equal(response.headers.get('location'), `/v1/webhooks/${body.id}`);
  assert.ok(Number.isInteger(body.id) && body.id >= 1);
  assert.equal(body.url, 'https://hooks.example/pets?x=1', 'as the URL parser normalises it');
  assert.deepEqual(body.types, [...EVENT_TYPES]);
  assert.equal(body.orders, 'own');
  assert.equal(body.status, 'enabled');
  assert.equal(body.createdAt, new Date(server.clock()).toISOString());
  assert.match(body.createdAt, INSTANT);
  assert.match(body.secret, SECRET);
  assert.equal(Buffer.from(body.secret.slice(6), 'base64').length, 32);
  const [webhook, ...others] = await stored(server, account);
  assert.equal(others.length, 0);
  assert.deepEqual(webhook, { id: body.id, account, url: body.url, types: [...EVENT_TYPES], orders: 'own', status: 'enabled', createdAt: server.clock() });
  // Chosen types are stored in the order sent; `all` with orders:manage.
  const manager = await keyOf(server, ['webhooks:manage', 'orders:manage']);
  const chosen = await made(server, { url: 'https://hooks.example/b', types: ['order.placed', 'pet.deleted'], orders: 'all' }, manager.key);
  assert.deepEqual([chosen.types, chosen.orders], [['order.placed', 'pet.deleted'], 'all']);
  assert.deepEqual((await server.service.stores.webhooks.get(manager.account, chosen.id))?.types, ['order.placed', 'pet.deleted']);
  assert.notEqual(chosen.secret, body.secret, 'each webhook its own secret');
});

test('the secret is shown only in the creation\'s answer: never by a read, the list or a change, nor in a log line', async (t) => {
  const server = await sqliteServer(t);
  const { key } = await keyOf(server);
  const { id, secret, ...webhook } = await made(server, { url: 'https://hooks.example/a' }, key);
  const answers = [
    await server.request(`/v1/webhooks/${id}`, { key }),
    await server.request('/v1/webhooks', { key }),
    await patch(server, id, { types: ['pet.created'] }, key),
    await patch(server, id, {}, key),
    await server.request(`/v1/webhooks/${id}/deliveries`, { key }),
  ];
  for (const answer of answers) {
    assert.equal(answer.status, 200);
    const text = await answer.text();
    assert.ok(!text.includes('secret') && !text.includes(secret) && !text.includes('whsec_'), text);
  }
  const read = await json(await server.request(`/v1/webhooks/${id}`, { key }));
  assert.deepEqual(Object.keys(read), FIELDS);
  assert.deepEqual(read, { id, ...webhook, types: ['pet.created'] });
  assert.ok(server.logs.length > 0);
  assert.ok(!server.logs.some((line) => line.includes(secret) || line.includes('whsec_')), 'no log line carries the secret');
});

test('Idempotency-Key: a retry answers the same 201, secret included, with Idempotent-Replayed, and stores nothing more; another body is 422', async (t) => {
  const resolver = testResolver();
  const server = await startTestServer(t, { resolver });
  const { key, account } = await keyOf(server);
  const headers = { 'idempotency-key': 'hook-1' };
  const first = await create(server, { url: 'https://hooks.example/a', types: ['pet.created'] }, key, headers);
  assert.equal(first.status, 201);
  const firstText = await first.text();
  assert.equal(first.headers.get('idempotent-replayed'), null);
  // The retry is answered from the record, before the host is resolved again.
  resolver.names['hooks.example'] = ['10.1.2.3'];
  server.clock.advance(60_000);
  const replay = await create(server, { types: ['pet.created'], url: 'https://hooks.example/a' }, key, headers);
  assert.equal(replay.status, 201);
  assert.equal(await replay.text(), firstText, 'the same body, the same secret');
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.equal(replay.headers.get('location'), first.headers.get('location'));
  assert.equal((await stored(server, account)).length, 1);
  await expectError(await create(server, { url: 'https://hooks.example/b' }, key, headers), 422, 'idempotency_key_reused');
  await expectError(await create(server, { url: 'https://hooks.example/a' }, key, { 'idempotency-key': 'a b' }), 400, 'invalid_idempotency_key');
  // A refusal is not remembered: the same key succeeds once the URL may be used.
  const refused = { 'idempotency-key': 'hook-2' };
  await expectError(await create(server, { url: 'https://hooks.example/c' }, key, refused), 400, 'invalid_body');
  resolver.names['hooks.example'] = [PUBLIC];
  assert.equal((await create(server, { url: 'https://hooks.example/c' }, key, refused)).status, 201);
  assert.equal((await stored(server, account)).length, 2);
});

test('types: an empty list, an unknown or repeated type, or not an array is 400 invalid_body naming types; so are null, other members and a missing url', async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server);
  const url = 'https://hooks.example/a';
  const cases: [unknown, RegExp][] = [
    [{ url, types: [] }, /types must be an array of 1 to 7 distinct items.*not an empty array/],
    [{ url, types: ['pet.created', 'pet.adopted'] }, /types must be/],
    [{ url, types: ['pet.created', 'pet.created'] }, /"pet\.created" is repeated/],
    [{ url, types: 'pet.created' }, /types must be/],
    [{ url, types: null }, /types must be .*, not null/],
    [{ url, orders: 'mine' }, /orders must be one of own, all/],
    [{ url, status: 'disabled' }, /"status" is not a known property/],
    [{ url, secret: 'whsec_x' }, /"secret" is not a known property/],
    [{ url: null }, /url must be a string/],
    [{}, /url is required/],
    [{ url: 42 }, /url must be a string/],
  ];
  for (const [body, reason] of cases) assert.match(await expectError(await create(server, body, key), 400, 'invalid_body'), reason, JSON.stringify(body));
  await expectError(await create(server, '{"url":', key), 400, 'invalid_json');
  await expectError(await create(server, '', key), 400, 'invalid_body');
  const textPlain = await server.request('/v1/webhooks', { method: 'POST', key, headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ url }) });
  await expectError(textPlain, 415, 'unsupported_media_type');
  assert.deepEqual(await stored(server, account), []);
});

test('orders "all" needs orders:manage too: 403 insufficient_scope naming it, decided once the body and its URL are valid', async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server);
  const refused = await create(server, { url: 'https://hooks.example/a', orders: 'all' }, key);
  assert.match(await expectError(refused, 403, 'insufficient_scope'), /orders:manage/);
  assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="pets", error="insufficient_scope", scope="orders:manage"');
  // A body that is invalid is refused as such first, its URL included.
  await expectError(await create(server, { url: 'https://hooks.example/a', orders: 'all', types: [] }, key), 400, 'invalid_body');
  await expectError(await create(server, { url: 'https://intranet.example/a', orders: 'all' }, key), 400, 'invalid_body');
  assert.deepEqual(await stored(server, account), []);
  const manager = await keyOf(server, ['webhooks:manage', 'orders:manage']);
  assert.equal((await made(server, { url: 'https://hooks.example/a', orders: 'all' }, manager.key)).orders, 'all');
  // A key that lost orders:manage is refused on a retry of its creation too: never shown the secret again.
  const staff = await keyOf(server, ['webhooks:manage', 'orders:manage']);
  const headers = { 'idempotency-key': 'all-1' };
  assert.equal((await create(server, { url: 'https://hooks.example/all', orders: 'all' }, staff.key, headers)).status, 201);
  await server.service.stores.keys.setScopes(staff.id, ['webhooks:manage']);
  const retried = await create(server, { url: 'https://hooks.example/all', orders: 'all' }, staff.key, headers);
  assert.ok(!(await retried.clone().text()).includes('whsec_'));
  await expectError(retried, 403, 'insufficient_scope');
  // orders:write is not orders:manage.
  const writer = await keyOf(server, ['webhooks:manage', 'orders:write']);
  await expectError(await create(server, { url: 'https://hooks.example/a', orders: 'all' }, writer.key), 403, 'insufficient_scope');
});

test('the URL: absolute, https:, at most 2,048 characters, no user information or fragment, a host that resolves only to public addresses; else 400 naming why', async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server);
  const long = `https://hooks.example/${'a'.repeat(2048 - 'https://hooks.example/'.length)}`;
  assert.equal((await made(server, { url: long }, key)).url, long, 'exactly 2,048 characters is allowed');
  assert.equal((await made(server, { url: 'https://[2606:2800:220:1:248:1893:25c8:1946]:8443/in' }, key)).url, 'https://[2606:2800:220:1:248:1893:25c8:1946]:8443/in');
  assert.equal((await made(server, { url: 'https://v6.example/in' }, key)).url, 'https://v6.example/in');
  assert.equal((await made(server, { url: `https://${PUBLIC}/in` }, key)).url, `https://${PUBLIC}/in`);
  const before = (await stored(server, account)).length;
  const cases: [string, RegExp][] = [
    [`${long}a`, /url must be a string of 1 to 2048 characters/],
    ['https://hooks.example/é'.padEnd(2048, 'é'), /url must be at most 2048 characters once percent-encoded/],
    ['hooks.example/in', /url must be an absolute URL/],
    ['/in', /url must be an absolute URL/],
    ['https:hooks.example', /url must be an absolute URL/],
    ['http://hooks.example/in', /outside the networks the operator allows, where alone http: may be used: use https:/],
    ['ftp://hooks.example/in', /url must use https:/],
    ['javascript://hooks.example/%0aalert(1)', /url must use https:/],
    ['https://user:pass@hooks.example/in', /url must not contain user information/],
    ['https://user@hooks.example/in', /url must not contain user information/],
    ['https://hooks.example/in#top', /url must not have a fragment/],
    ['https://hooks.example/in#', /url must not have a fragment/],
    ['https://hooks.example/a b', /url must not contain spaces, control characters or backslashes/],
    ['https://hooks.example\\@evil.example/', /backslashes/],
    ['https://nowhere.example/in', /url's host "nowhere\.example" does not resolve \(ENOTFOUND\)/],
    ['https://intranet.example/in', /url's host "intranet\.example" resolves to 10\.0\.0\.5, which is private-use \(RFC 1918\), not a public address/],
    ['https://split.example/in', /"split\.example" resolves to 127\.0\.0\.1, which is loopback/],
    ['https://metadata.example/latest/', /169\.254\.169\.254, which is link-local, where cloud metadata services answer/],
    ['https://ula.example/in', /fd00::1, which is unique local \(RFC 4193\)/],
    ['https://localhost/in', /does not resolve/],
  ];
  for (const [url, reason] of cases) {
    const message = await expectError(await create(server, { url }, key), 400, 'invalid_body');
    assert.match(message, reason, url);
    assert.match(message, /^Invalid body: url/);
  }
  assert.equal((await stored(server, account)).length, before, 'nothing refused is stored');
});

test(`every spelling of an address that is not public is refused at creation and at a PATCH of url (${REFUSED_ADDRESS_FORMS.length} forms)`, async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server);
  const { id } = await made(server, { url: 'https://hooks.example/a' }, key);
  for (const [url, reason] of REFUSED_ADDRESS_FORMS) {
    assert.match(await expectError(await create(server, { url }, key), 400, 'invalid_body'), reason, `create ${url}`);
    assert.match(await expectError(await patch(server, id, { url }, key), 400, 'invalid_body'), reason, `patch ${url}`);
  }
  const webhooks = await stored(server, account);
  assert.deepEqual(webhooks.map((webhook) => webhook.url), ['https://hooks.example/a'], 'none stored, the URL unchanged');
});

test('WEBHOOK_ALLOWED_NETWORKS lets a URL point into the operator\'s networks, where http: is allowed too; the rest stays refused', async (t) => {
  const server = await startTestServer(t, { resolver: testResolver({ 'internal.example': ['10.1.2.3'] }), config: { webhookAllowedNetworks: ['127.0.0.0/8', '10.1.0.0/16'] } });
  const { key } = await keyOf(server);
  assert.equal((await made(server, { url: 'http://127.0.0.1:9/in' }, key)).url, 'http://127.0.0.1:9/in');
  assert.equal((await made(server, { url: 'http://0x7f.1/in' }, key)).url, 'http://127.0.0.1/in', 'stored as the parser reads it');
  assert.equal((await made(server, { url: 'https://internal.example/in' }, key)).url, 'https://internal.example/in');
  assert.equal((await made(server, { url: 'http://internal.example/in' }, key)).url, 'http://internal.example/in');
  assert.match(await expectError(await create(server, { url: 'http://hooks.example/in' }, key), 400, 'invalid_body'), /use https:/);
  assert.match(await expectError(await create(server, { url: 'https://intranet.example/in' }, key), 400, 'invalid_body'), /10\.0\.0\.5, which is private-use/);
  assert.match(await expectError(await create(server, { url: 'https://169.254.169.254/' }, key), 400, 'invalid_body'), /link-local/);
});

test('at most 10 webhooks per account: the 11th is 409 too_many_webhooks naming the limit; another account is not counted; a removal makes room', async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server);
  const ids: number[] = [];
  for (let i = 0; i < 10; i++) ids.push((await made(server, { url: `https://hooks.example/${i}` }, key)).id);
  assert.match(await expectError(await create(server, { url: 'https://hooks.example/10' }, key), 409, 'too_many_webhooks'), /already has 10 webhooks/);
  assert.equal((await stored(server, account)).length, 10);
  const other = await keyOf(server);
  await made(server, { url: 'https://hooks.example/other' }, other.key);
  assert.equal((await server.request(`/v1/webhooks/${ids[3]}`, { method: 'DELETE', key })).status, 204);
  await made(server, { url: 'https://hooks.example/again' }, key);
  assert.equal((await stored(server, account)).length, 10);
});

/** 20 creations at once by the account of `key`, which has none: exactly 10 are created, the others are 409. */
async function concurrentCap(server: Server, { key, account }: { key: string; account: string }): Promise<void> {
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => create(server, { url: `https://hooks.example/${i}` }, key)));
  const statuses = answers.map((answer) => answer.status).sort();
  assert.deepEqual(statuses, [...Array(10).fill(201), ...Array(10).fill(409)]);
  for (const answer of answers.filter((answer) => answer.status === 409)) assert.equal((await errorBody(answer)).code, 'too_many_webhooks');
  const ids = (await Promise.all(answers.filter((answer) => answer.status === 201).map(json))).map((body) => body.id).sort((a, b) => a - b);
  assert.deepEqual((await stored(server, account)).map((webhook) => webhook.id), ids);
}

test('the cap under concurrency, through the writer thread: 20 creations at once give exactly 10 201s', async (t) => {
  // The reading connection cannot issue keys: the server's own key, of every scope.
  const server = await startWriterTestServer(t, { resolver: testResolver() });
  await concurrentCap(server, { key: server.key, account: (await server.service.stores.keys.get(server.keyId))!.account });
});

test('another account\'s webhook, or none, is 404 webhook_not_found on every operation; a bad id is 400 invalid_path', async (t) => {
  const server = await sqliteServer(t);
  const alice = await keyOf(server);
  const bob = await keyOf(server, ['webhooks:manage', 'orders:manage']);
  const { id } = await made(server, { url: 'https://hooks.example/a' }, alice.key);
  const operations = (webhookId: string, key: string) => [
    server.request(`/v1/webhooks/${webhookId}`, { key }),
    patch(server, webhookId, { status: 'disabled' }, key),
    server.request(`/v1/webhooks/${webhookId}`, { method: 'DELETE', key }),
    server.request(`/v1/webhooks/${webhookId}/deliveries`, { key }),
  ];
  for (const webhookId of [String(id), String(id + 1), '0', '-1', '9007199254740993', '9223372036854775807', `00${id}`]) {
    for (const answer of await Promise.all(operations(webhookId, bob.key))) {
      assert.match(await expectError(answer, 404, 'webhook_not_found'), /This account has no webhook with id -?\d+\./, webhookId);
    }
  }
  for (const webhookId of ['abc', '1.5', '9223372036854775808', '0x1']) {
    for (const answer of await Promise.all(operations(webhookId, bob.key))) assert.match(await expectError(answer, 400, 'invalid_path'), /webhookId/, webhookId);
  }
  // Nothing of Alice's changed; her own key still reads it, by any spelling of its id.
  assert.equal((await stored(server, alice.account))[0]!.status, 'enabled');
  assert.equal((await server.request(`/v1/webhooks/00${id}`, { key: alice.key })).status, 200);
  assert.deepEqual(await json(await server.request('/v1/webhooks', { key: bob.key })), []);
});

test('the list: the account\'s webhooks by id, a page at a time with Link rel="next"; limit and cursor as for pets', async (t) => {
  const server = await sqliteServer(t);
  const { key } = await keyOf(server);
  const other = await keyOf(server);
  const ids: number[] = [];
  for (let i = 0; i < 5; i++) {
    ids.push((await made(server, { url: `https://hooks.example/${i}` }, key)).id);
    await made(server, { url: `https://other.example/${i}` }, other.key);
  }
  const all = await server.request('/v1/webhooks', { key });
  assert.equal(all.status, 200);
  assert.equal(all.headers.get('link'), null, 'no next page');
  const bodies = await json(all);
  assert.deepEqual(bodies.map((webhook: any) => webhook.id), ids);
  for (const webhook of bodies) assert.deepEqual(Object.keys(webhook), FIELDS);
  const seen: number[] = [];
  let next: string | null = '/v1/webhooks?limit=2';
  let pages = 0;
  while (next !== null) {
    const page: Response = await server.request(next, { key });
    assert.equal(page.status, 200);
    seen.push(...(await json(page)).map((webhook: any) => webhook.id));
    const link = page.headers.get('link');
    next = link === null ? null : /^<([^>]+)>; rel="next"$/.exec(link)![1]!;
    if (next !== null) assert.match(next, /^\/v1\/webhooks\?limit=2&cursor=[A-Za-z0-9_-]+$/);
    pages++;
  }
  assert.deepEqual([seen, pages], [ids, 3]);
  for (const query of ['limit=0', 'limit=101', 'limit=1&limit=2', 'cursor=nope', 'status=enabled', 'after=1']) {
    await expectError(await server.request(`/v1/webhooks?${query}`, { key }), 400, 'invalid_query');
  }
});

test('PATCH: a merge patch of url, types, orders and status with the rules of a creation; {} changes nothing; stored as answered', async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server);
  const { secret: _secret, ...created } = await made(server, { url: 'https://hooks.example/a' }, key);
  const { id } = created;
  const changed = await patch(server, id, { url: 'https://Other.Example/b', types: ['order.cancelled', 'pet.created'], status: 'disabled' }, key);
  assert.equal(changed.status, 200);
  const text = await changed.text();
  const body = JSON.parse(text);
  assert.deepEqual(Object.keys(body), FIELDS);
  assert.deepEqual(body, { ...created, url: 'https://other.example/b', types: ['order.cancelled', 'pet.created'], status: 'disabled' });
  assert.deepEqual((await server.service.stores.webhooks.get(account, id))!, {
    id, account, url: 'https://other.example/b', types: ['order.cancelled', 'pet.created'], orders: 'own', status: 'disabled', createdAt: Date.parse(created.createdAt),
  });
  assert.deepEqual(await json(await patch(server, id, {}, key)), body, '{} answers the webhook as it is');
  assert.equal((await json(await patch(server, id, { status: 'enabled' }, key))).status, 'enabled');
  const asJson = await server.request(`/v1/webhooks/${id}`, { method: 'PATCH', key, headers: { 'content-type': 'application/json' }, body: '{"types":["pet.deleted"]}' });
  assert.deepEqual((await json(asJson)).types, ['pet.deleted'], 'application/json is accepted too');
  const cases: [unknown, RegExp][] = [
    [{ url: null }, /url must be a string/],
    [{ types: [] }, /not an empty array/],
    [{ types: ['pet.created', 'pet.created'] }, /is repeated/],
    [{ status: 'paused' }, /status must be one of enabled, disabled/],
    [{ orders: null }, /orders must be one of own, all/],
    [{ secret: 'whsec_x' }, /"secret" is not a known property/],
    [{ id: 7 }, /"id" is not a known property/],
    [{ url: 'http://hooks.example/' }, /use https:/],
    [{ url: 'https://intranet.example/' }, /10\.0\.0\.5, which is private-use/],
  ];
  for (const [change, reason] of cases) assert.match(await expectError(await patch(server, id, change, key), 400, 'invalid_body'), reason, JSON.stringify(change));
  await expectError(await patch(server, id, '[]', key), 400, 'invalid_body');
  await expectError(await patch(server, id, '{', key), 400, 'invalid_json');
  const plain = await server.request(`/v1/webhooks/${id}`, { method: 'PATCH', key, headers: { 'content-type': 'text/plain' }, body: '{}' });
  await expectError(plain, 415, 'unsupported_media_type');
  assert.deepEqual((await server.service.stores.webhooks.get(account, id))!.types, ['pet.deleted'], 'nothing refused was applied');
});

test('PATCH of orders "all", or of anything of a webhook that has it, needs orders:manage: 403 once the body is valid, and nothing changes', async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server, ['webhooks:manage']);
  const manager = await keyOf(server, ['webhooks:manage', 'orders:manage']);
  const { secret: _secret, ...own } = await made(server, { url: 'https://hooks.example/own' }, key);
  await expectError(await patch(server, own.id, { orders: 'all' }, key), 403, 'insufficient_scope');
  await expectError(await patch(server, own.id, { orders: 'all', types: [] }, key), 400, 'invalid_body');
  assert.equal((await server.service.stores.webhooks.get(account, own.id))!.orders, 'own');
  // A key of the account's staff makes it `all`; then a key without orders:manage may not redirect it.
  await expectError(await patch(server, own.id, { orders: 'all' }, manager.key), 404, 'webhook_not_found');
  const staff = await server.service.stores.keys.create({ plan: 'enterprise', perMinute: 1_000_000, perDay: 100_000_000, scopes: ['webhooks:manage', 'orders:manage'], account, now: server.clock() });
  assert.equal((await json(await patch(server, own.id, { orders: 'all' }, staff.key))).orders, 'all');
  for (const change of [{ url: 'https://other.example/mine' }, { types: ['order.placed'] }, { status: 'disabled' }]) {
    const refused = await patch(server, own.id, change, key);
    assert.equal(refused.headers.get('www-authenticate'), 'Bearer realm="pets", error="insufficient_scope", scope="orders:manage"');
    await expectError(refused, 403, 'insufficient_scope');
  }
  assert.deepEqual(await json(await patch(server, own.id, {}, key)), { ...own, orders: 'all' }, '{} still reads it');
  assert.equal((await json(await patch(server, own.id, { orders: 'own', url: 'https://other.example/mine' }, key))).orders, 'own', 'narrowing it to own needs no more');
  assert.equal((await server.service.stores.webhooks.get(account, own.id))!.url, 'https://other.example/mine');
});

test('DELETE: 204 with no body, then the webhook is gone from every read and the store; a second DELETE is 404', async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server);
  const { id } = await made(server, { url: 'https://hooks.example/a' }, key);
  const kept = await made(server, { url: 'https://hooks.example/b' }, key);
  const removed = await server.request(`/v1/webhooks/${id}`, { method: 'DELETE', key });
  assert.equal(removed.status, 204);
  assert.equal(await removed.text(), '');
  assert.equal(await server.service.stores.webhooks.get(account, id), null);
  assert.deepEqual((await stored(server, account)).map((webhook) => webhook.id), [kept.id]);
  await expectError(await server.request(`/v1/webhooks/${id}`, { key }), 404, 'webhook_not_found');
  await expectError(await server.request(`/v1/webhooks/${id}`, { method: 'DELETE', key }), 404, 'webhook_not_found');
});

test('the delivery log: [] before the first attempt, then the newest attempts first with their fields in order, as the store recorded them', async (t) => {
  const server = await sqliteServer(t);
  const { key, account } = await keyOf(server);
  const { id } = await made(server, { url: 'https://hooks.example/a', types: ['pet.created'] }, key);
  const empty = await server.request(`/v1/webhooks/${id}/deliveries`, { key });
  assert.equal(empty.status, 200);
  assert.equal(await empty.text(), '[]');
  // Two pets: two deliveries, written with their events; the first fails, then succeeds.
  const pets = [];
  for (const name of ['Rex', 'Tom']) pets.push(await json(await server.post('/v1/pets', { name, categoryId: 1 })));
  const { webhooks } = server.service.stores;
  const start = server.clock();
  const claimed = await webhooks.claimDue('test', start, 30_000, 10, new Set());
  assert.equal(claimed.length, 2);
  const [first, second] = claimed.sort((a, b) => a.event.id - b.event.id);
  const attempt = (delivery: typeof first, at: number, status: number | null, error: any, durationMs: number, retryAt: number | null) =>
    webhooks.recordAttempt({ delivery: delivery!, holder: 'test', outcome: { eventId: delivery!.event.id, attempt: delivery!.attempt, attemptedAt: at, status, error, durationMs }, retryAt, disableAfterMs: 5 * 86_400_000 });
  await attempt(first, start, 503, 'http_status', 41, start + 5_000);
  await attempt(second, start + 1, null, 'timeout', 10_000, start + 5_000);
  const [again] = await webhooks.claimDue('test', start + 5_000, 30_000, 1, new Set());
  await attempt(again, start + 5_120, 200, null, 87, null);
  const log = await server.request(`/v1/webhooks/${id}/deliveries`, { key });
  assert.equal(log.status, 200);
  const text = await log.text();
  const attempts = JSON.parse(text);
  for (const entry of attempts) assert.deepEqual(Object.keys(entry), ['eventId', 'attempt', 'attemptedAt', 'status', 'error', 'durationMs']);
  assert.deepEqual(attempts, [
    { eventId: again!.event.id, attempt: 2, attemptedAt: new Date(start + 5_120).toISOString(), status: 200, error: null, durationMs: 87 },
    { eventId: second!.event.id, attempt: 1, attemptedAt: new Date(start + 1).toISOString(), status: null, error: 'timeout', durationMs: 10_000 },
    { eventId: first!.event.id, attempt: 1, attemptedAt: new Date(start).toISOString(), status: 503, error: 'http_status', durationMs: 41 },
  ]);
  assert.ok(text.includes('"status":null,"error":"timeout"'), 'null written as null');
  assert.deepEqual(await webhooks.attempts(account, id), attempts.map((entry: any) => ({ ...entry, attemptedAt: Date.parse(entry.attemptedAt) })));
});

test('registered through the API, an endpoint receives the events it lists, signed with the secret of the creation\'s answer; its log shows the attempt', async (t) => {
  // The receiver's library checks the signed time against its own clock.
  const server = await startTestServer(t, { clock: fakeClock(Date.now()), resolver: testResolver(), config: { webhookAllowedNetworks: ['127.0.0.0/8'] } });
  const receiver = await startReceiver(t, (_request, response) => {
    response.writeHead(204);
    response.end();
  });
  const { key } = await keyOf(server);
  const { id, secret } = await made(server, { url: `http://127.0.0.1:${receiver.port}/in`, types: ['pet.created'] }, key);
  const worker = startDeliveryWorker({
    store: server.service.stores.webhooks, clock: server.clock, allowedNetworks: ['127.0.0.0/8'], schedule: [1],
    resolve: testResolver(), intervalMs: 3_600_000, log: () => {}, failed: (event, error) => assert.fail(`${event}: ${String(error)}`),
    crashed: (event, error) => assert.fail(`${event}: ${String(error)}`),
  });
  t.after(() => worker.stop());
  const pet = await json(await server.post('/v1/pets', { name: 'Rex', categoryId: 1 }));
  await server.request(`/v1/pets/${pet.id}`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"name":"Max"}' });
  await worker.tick();
  await worker.idle();
  assert.equal(receiver.requests.length, 1, 'pet.updated is not among its types');
  const [delivery] = receiver.requests;
  assert.equal(delivery!.method, 'POST');
  assert.equal(delivery!.target, '/in');
  const event = new StandardWebhook(secret).verify(delivery!.body, delivery!.headers as Record<string, string>) as any;
  assert.deepEqual([event.type, event.data], ['pet.created', pet]);
  assert.equal(delivery!.headers['webhook-id'], String(event.id));
  const log = await json(await server.request(`/v1/webhooks/${id}/deliveries`, { key }));
  assert.deepEqual(log, [{ eventId: event.id, attempt: 1, attemptedAt: new Date(server.clock()).toISOString(), status: 204, error: null, durationMs: log[0].durationMs }]);
});

test('405 lists each path\'s methods in Allow: GET, HEAD, POST; GET, HEAD, PATCH, DELETE; GET, HEAD', async (t) => {
  const server = await sqliteServer(t);
  const { key } = await keyOf(server);
  const { id } = await made(server, { url: 'https://hooks.example/a' }, key);
  const cases: [string, string[], string][] = [
    ['/v1/webhooks', ['PUT', 'PATCH', 'DELETE'], 'GET, HEAD, POST'],
    [`/v1/webhooks/${id}`, ['POST', 'PUT'], 'GET, HEAD, PATCH, DELETE'],
    [`/v1/webhooks/${id}/deliveries`, ['POST', 'PUT', 'PATCH', 'DELETE'], 'GET, HEAD'],
  ];
  for (const [path, methods, allow] of cases) {
    for (const method of methods) {
      const answer = await server.request(path, { method, key });
      assert.equal(answer.headers.get('allow'), allow, `${method} ${path}`);
      await expectError(answer, 405, 'method_not_allowed');
    }
    assert.equal((await server.request(path, { method: 'HEAD', key })).status, 200, `HEAD ${path}`);
  }
});

test('every webhook operation needs webhooks:manage: 403 insufficient_scope naming it, before the path or the body is looked at', async (t) => {
  const server = await sqliteServer(t);
  const { key } = await keyOf(server);
  const { id } = await made(server, { url: 'https://hooks.example/a' }, key);
  const { key: reader } = await keyOf(server, ['pets:read', 'pets:write', 'orders:manage', 'events:read']);
  const answers = [
    await server.request('/v1/webhooks', { key: reader }),
    await create(server, { url: 'nope' }, reader),
    await server.request(`/v1/webhooks/${id}`, { key: reader }),
    await patch(server, 'abc', {}, reader),
    await server.request(`/v1/webhooks/${id}`, { method: 'DELETE', key: reader }),
    await server.request(`/v1/webhooks/${id}/deliveries`, { key: reader }),
  ];
  for (const answer of answers) {
    assert.equal(answer.headers.get('www-authenticate'), 'Bearer realm="pets", error="insufficient_scope", scope="webhooks:manage"');
    await expectError(answer, 403, 'insufficient_scope');
  }
  await expectError(await server.request('/v1/webhooks', { key: null }), 401, 'missing_api_key');
});

describeWithPostgres('webhooks on PostgreSQL', (cluster) => {
  const postgresServer = async (t: Parameters<typeof startTestServer>[0]) =>
    startPostgresTestServer(t, (await openTestDatabase(t, cluster(), { poolSize: 8 })).sql, { resolver: testResolver() });

  test('the cap under concurrency: 20 creations at once by one account give exactly 10 201s and 10 409 too_many_webhooks', async (t) => {
    const server = await postgresServer(t);
    await concurrentCap(server, await keyOf(server));
  });

  test('a creation, its replay, a change, the list and a removal, as on SQLite', async (t) => {
    const server = await postgresServer(t);
    const { key, account } = await keyOf(server);
    const headers = { 'idempotency-key': 'pg-1' };
    const first = await create(server, { url: 'https://hooks.example/a', types: ['order.placed'] }, key, headers);
    assert.equal(first.status, 201);
    const body = await json(first.clone());
    assert.deepEqual(Object.keys(body), [...FIELDS, 'secret']);
    const replay = await create(server, { url: 'https://hooks.example/a', types: ['order.placed'] }, key, headers);
    assert.equal(await replay.text(), await first.text());
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    assert.equal((await json(await patch(server, body.id, { status: 'disabled' }, key))).status, 'disabled');
    assert.deepEqual((await stored(server, account)).map((webhook) => [webhook.id, webhook.status, webhook.types]), [[body.id, 'disabled', ['order.placed']]]);
    const other = await keyOf(server);
    await expectError(await server.request(`/v1/webhooks/${body.id}`, { key: other.key }), 404, 'webhook_not_found');
    assert.equal((await server.request(`/v1/webhooks/${body.id}/deliveries`, { key })).status, 200);
    assert.equal((await server.request(`/v1/webhooks/${body.id}`, { method: 'DELETE', key })).status, 204);
    assert.deepEqual(await stored(server, account), []);
  });
});
