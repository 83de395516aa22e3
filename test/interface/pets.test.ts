import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorBody, json, startTestServer, type TestServer } from '../support/test-server.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';

function rows(server: TestServer) {
  return server.db.prepare('SELECT id, name, CAST(category_id AS TEXT) AS categoryId, status FROM pets ORDER BY id').all();
}

async function createMany(server: TestServer, count: number, status = (i: number) => (['available', 'pending', 'sold'] as const)[i % 3]) {
  for (let i = 0; i < count; i++) {
    const response = await server.post('/v1/pets', { name: `pet ${i + 1}`, categoryId: i + 1, status: status(i) });
    assert.equal(response.status, 201);
  }
}

// --- POST /v1/pets ---------------------------------------------------------------------------

test('POST creates a pet: 201, Location, fields in contract order, row stored', async (t) => {
  const server = await startTestServer(t);
  const response = await server.post('/v1/pets', { status: 'pending', categoryId: 7, name: 'Rex' });
  assert.equal(response.status, 201);
  assert.equal(response.headers.get('location'), '/v1/pets/1');
  assert.equal(await response.text(), '{"id":1,"name":"Rex","categoryId":7,"status":"pending"}');
  assert.deepEqual(rows(server).map((row) => ({ ...row })), [{ id: 1, name: 'Rex', categoryId: '7', status: 'pending' }]);
});

test('an omitted status is stored as available', async (t) => {
  const server = await startTestServer(t);
  const response = await server.post('/v1/pets', { name: 'Tom', categoryId: 2 });
  assert.equal((await json(response)).status, 'available');
  assert.equal(rows(server)[0]!.status, 'available');
});

test('ids are positive and strictly increasing in creation order', async (t) => {
  const server = await startTestServer(t);
  const ids: number[] = [];
  for (let i = 0; i < 5; i++) ids.push((await json(await server.post('/v1/pets', { name: 'x', categoryId: 1 }))).id);
  assert.deepEqual(ids, [1, 2, 3, 4, 5]);
});

test('categoryId above 2^53 round-trips with its exact digits', async (t) => {
  const server = await startTestServer(t);
  for (const digits of ['9007199254740993', '9223372036854775807', '12345678901234567']) {
    const response = await server.post('/v1/pets', `{"name":"Big","categoryId":${digits}}`);
    assert.equal(response.status, 201, digits);
    const text = await response.text();
    assert.ok(text.includes(`"categoryId":${digits},`), text);
    const id = JSON.parse(text).id;
    assert.ok((await (await server.request(`/v1/pets/${id}`)).text()).includes(`"categoryId":${digits},`));
    assert.ok((await (await server.request('/v1/pets?limit=100')).text()).includes(`"categoryId":${digits},`));
  }
  assert.deepEqual(rows(server).map((row) => row.categoryId), ['9007199254740993', '9223372036854775807', '12345678901234567']);
});

test('categoryId must be plain digits from 1 to int64 max: 400 invalid_body naming it, nothing stored', async (t) => {
  const server = await startTestServer(t);
  for (const value of ['1.0', '1e2', '"5"', '0', '-1', '9223372036854775808', '1.5', 'null', 'true', '-0']) {
    const response = await server.post('/v1/pets', `{"name":"x","categoryId":${value}}`);
    assert.equal(response.status, 400, value);
    const body = await errorBody(response);
    assert.equal(body.code, 'invalid_body');
    assert.match(body.message, /categoryId/);
  }
  assert.equal(rows(server).length, 0);
});

test('any other property, including id, is refused and named', async (t) => {
  const server = await startTestServer(t);
  for (const extra of ['id', 'owner', '__proto__', 'constructor']) {
    const response = await server.post('/v1/pets', `{"name":"x","categoryId":1,"${extra}":1}`);
    assert.equal(response.status, 400, extra);
    const body = await errorBody(response);
    assert.equal(body.code, 'invalid_body');
    assert.match(body.message, new RegExp(`"${extra}"`));
  }
  assert.equal(rows(server).length, 0);
});

test('the message names every bad field', async (t) => {
  const server = await startTestServer(t);
  const body = await errorBody(await server.post('/v1/pets', { name: '   ', categoryId: 'one', status: null }));
  assert.equal(body.code, 'invalid_body');
  for (const field of ['name', 'categoryId', 'status']) assert.match(body.message, new RegExp(field));
  const missing = await errorBody(await server.post('/v1/pets', {}));
  assert.match(missing.message, /name is required/);
  assert.match(missing.message, /categoryId is required/);
});

test('a name is stored and returned exactly as sent', async (t) => {
  const server = await startTestServer(t);
  for (const name of ['  Zoë 🐶  ', '"quoted" \\ back', 'x'.repeat(100), '中文名字', '\u2028line sep']) {
    const response = await server.post('/v1/pets', { name, categoryId: 1 });
    assert.equal(response.status, 201, name);
    assert.equal((await json(response)).name, name);
  }
  assert.deepEqual(rows(server).map((row) => row.name), ['  Zoë 🐶  ', '"quoted" \\ back', 'x'.repeat(100), '中文名字', '\u2028line sep']);
});

test('names that break the rules are refused: blank, too long, control characters, lone surrogates', async (t) => {
  const server = await startTestServer(t);
  for (const raw of ['""', '" \\t "', `"${'x'.repeat(101)}"`, '"a\\u0000"', '"a\\u0085b"', '"\\ud800"', '"a\\udc00"', '5', 'null']) {
    const response = await server.post('/v1/pets', `{"name":${raw},"categoryId":1}`);
    assert.equal(response.status, 400, raw);
    assert.match((await errorBody(response)).message, /name/);
  }
  assert.equal(rows(server).length, 0);
});

test('Content-Type must be application/json (charset=utf-8 allowed), else 415', async (t) => {
  const server = await startTestServer(t);
  for (const type of ['application/json', 'application/json; charset=utf-8', 'Application/JSON;charset="UTF-8"']) {
    assert.equal((await server.post('/v1/pets', { name: 'a', categoryId: 1 }, { headers: { 'content-type': type } })).status, 201, type);
  }
  for (const type of ['text/plain', 'application/json; charset=latin1', 'application/jsonx', 'application/x-www-form-urlencoded', 'application/json; foo=bar']) {
    const response = await server.post('/v1/pets', { name: 'a', categoryId: 1 }, { headers: { 'content-type': type } });
    assert.equal(response.status, 415, type);
    assert.equal((await errorBody(response)).code, 'unsupported_media_type');
  }
  const none = await server.request('/v1/pets', { method: 'POST', body: new Blob(['{"name":"a","categoryId":1}']) });
  assert.equal(none.status, 415);
  assert.equal(rows(server).length, 3);
});

test('an empty body is 400 invalid_body, even with no Content-Type', async (t) => {
  const server = await startTestServer(t);
  for (const headers of [{}, { 'content-type': 'application/json' }, { 'content-type': 'text/plain' }]) {
    const response = await server.request('/v1/pets', { method: 'POST', headers });
    assert.equal(response.status, 400);
    assert.equal((await errorBody(response)).code, 'invalid_body');
  }
});

test('malformed JSON, whitespace only and invalid UTF-8 are invalid_json; non-objects are invalid_body', async (t) => {
  const server = await startTestServer(t);
  for (const body of ['{', '{"name":"a",}', ' ', '\n\t', "{'name':'a'}", '{"name":"a"} x', 'NaN']) {
    const response = await server.post('/v1/pets', body);
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.equal((await errorBody(response)).code, 'invalid_json', JSON.stringify(body));
  }
  const invalidUtf8 = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc3, 0x28]), Buffer.from('","categoryId":1}')]);
  const response = await server.request('/v1/pets', { method: 'POST', headers: { 'content-type': 'application/json' }, body: invalidUtf8 });
  assert.equal((await errorBody(response)).code, 'invalid_json');
  for (const body of ['[]', '"pet"', '1', 'null', '[{"name":"a","categoryId":1}]']) {
    assert.equal((await errorBody(await server.post('/v1/pets', body))).code, 'invalid_body', body);
  }
  assert.equal(rows(server).length, 0);
});

test('a body over 16 KiB is 413 payload_too_large and nothing is stored', async (t) => {
  const server = await startTestServer(t);
  const huge = JSON.stringify({ name: 'x', categoryId: 1, pad: 'y'.repeat(17 * 1024) });
  const response = await server.post('/v1/pets', huge);
  assert.equal(response.status, 413);
  assert.equal((await errorBody(response)).code, 'payload_too_large');
  // Chunked, with no declared length: refused once the cap is passed.
  const stream = new ReadableStream({
    start(controller) {
      for (let i = 0; i < 20; i++) controller.enqueue(new TextEncoder().encode('x'.repeat(1024)));
      controller.close();
    },
  });
  const chunked = await server.request('/v1/pets', { method: 'POST', headers: { 'content-type': 'application/json' }, body: stream, duplex: 'half' } as RequestInit);
  assert.equal(chunked.status, 413);
  assert.equal(rows(server).length, 0);
  // The server keeps serving.
  assert.equal((await server.post('/v1/pets', { name: 'a', categoryId: 1 })).status, 201);
});

test('a body of exactly 16 KiB is read', async (t) => {
  const server = await startTestServer(t);
  const base = JSON.stringify({ name: 'x', categoryId: 1 });
  const exact = base.slice(0, -1) + ' '.repeat(16 * 1024 - base.length) + '}';
  assert.equal(Buffer.byteLength(exact), 16 * 1024);
  assert.equal((await server.post('/v1/pets', exact)).status, 201);
});

// --- GET /v1/pets ----------------------------------------------------------------------------

test('an empty list is a plain empty array with no next link', async (t) => {
  const server = await startTestServer(t);
  const response = await server.request('/v1/pets');
  assert.equal(response.status, 200);
  assert.equal(await response.text(), '[]');
  assert.equal(response.headers.get('link'), null);
});

test('the list is sorted by id, 20 by default, with a next link carrying limit and cursor', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 25);
  const response = await server.request('/v1/pets');
  const pets = await json(response);
  assert.equal(pets.length, 20);
  assert.deepEqual(pets.map((pet: { id: number }) => pet.id), Array.from({ length: 20 }, (_, i) => i + 1));
  assert.deepEqual(Object.keys(pets[0]), ['id', 'name', 'categoryId', 'status']);
  assert.match(response.headers.get('link') ?? '', /^<\/v1\/pets\?limit=20&cursor=[A-Za-z0-9_-]+>; rel="next"$/);
});

test('following next links visits every matching pet exactly once, in id order', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 23);
  for (const [query, expected] of [['?limit=5', 23], ['?limit=05&status=sold', 7], ['?status=available&limit=1', 8], ['?limit=100', 23]] as const) {
    const seen: number[] = [];
    let next: string | null = `/v1/pets${query}`;
    let pages = 0;
    while (next) {
      const response = await server.request(next);
      assert.equal(response.status, 200);
      const page = (await json(response)) as { id: number; status: string }[];
      if (query.includes('status=sold')) assert.ok(page.every((pet) => pet.status === 'sold'));
      seen.push(...page.map((pet) => pet.id));
      const link = response.headers.get('link');
      next = link ? /^<([^>]+)>; rel="next"$/.exec(link)![1]! : null;
      if (next && query.includes('status=sold')) assert.match(next, /status=sold/);
      pages++;
    }
    assert.equal(seen.length, expected, query);
    assert.deepEqual(seen, [...seen].sort((a, b) => a - b));
    assert.equal(new Set(seen).size, seen.length);
    assert.ok(pages >= 1);
  }
});

test('the last page has no next link, also when it is exactly full', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 4);
  const first = await server.request('/v1/pets?limit=2');
  const next = /^<([^>]+)>/.exec(first.headers.get('link')!)![1]!;
  const last = await server.request(next);
  assert.equal((await json(last)).length, 2);
  assert.equal(last.headers.get('link'), null);
});

test('pets added during a traversal appear at most once, at the end', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 6);
  const seen: number[] = [];
  let next: string | null = '/v1/pets?limit=4';
  let added = false;
  while (next) {
    const response: Response = await server.request(next);
    seen.push(...((await json(response)) as { id: number }[]).map((pet) => pet.id));
    if (!added) {
      await createMany(server, 3);
      added = true;
    }
    const link = response.headers.get('link');
    next = link ? /^<([^>]+)>/.exec(link)![1]! : null;
  }
  assert.deepEqual(seen, [1, 2, 3, 4, 5, 6, 7, 8, 9]);
});

test('a cursor is only a position: it combines with another limit and status', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 10);
  const first = await server.request('/v1/pets?limit=3');
  const cursor = /cursor=([^&>]+)/.exec(first.headers.get('link')!)![1]!;
  const pets = await json(await server.request(`/v1/pets?cursor=${cursor}&limit=2&status=available`));
  assert.deepEqual(pets.map((pet: { id: number }) => pet.id), [4, 7]);
});

test('bad query values, repeated and unknown parameters are 400 invalid_query naming the parameter', async (t) => {
  const server = await startTestServer(t);
  const cases = [
    ['limit=0', 'limit'], ['limit=101', 'limit'], ['limit=abc', 'limit'], ['limit=', 'limit'], ['limit=1.5', 'limit'], ['limit=-1', 'limit'],
    ['status=lost', 'status'], ['cursor=garbage', 'cursor'], ['cursor=YWZ0ZXI6LTE', 'cursor'], ['cursor=', 'cursor'],
    ['limit=5&limit=5', 'limit'], ['page=2', 'page'], ['offset=10', 'offset'], ['status=sold&status=pending', 'status'],
  ] as const;
  for (const [query, name] of cases) {
    const response = await server.request(`/v1/pets?${query}`);
    assert.equal(response.status, 400, query);
    const body = await errorBody(response);
    assert.equal(body.code, 'invalid_query', query);
    assert.match(body.message, new RegExp(name), query);
  }
});

// --- GET /v1/pets/{petId} --------------------------------------------------------------------

const DEPRECATION = {
  deprecation: '@1764892800',
  sunset: 'Thu, 05 Dec 2030 00:00:00 GMT',
  link: '</v1/pets>; rel="successor-version"',
};

function assertDeprecationHeaders(response: Response): void {
  for (const [name, value] of Object.entries(DEPRECATION)) assert.equal(response.headers.get(name), value, name);
}

test('GET /v1/pets/{petId} returns the pet with Deprecation, Sunset and successor Link', async (t) => {
  const server = await startTestServer(t);
  await server.post('/v1/pets', { name: 'Rex', categoryId: 3, status: 'sold' });
  for (const path of ['/v1/pets/1', '/v1/pets/0001']) {
    const response = await server.request(path);
    assert.equal(response.status, 200);
    assert.equal(await response.text(), '{"id":1,"name":"Rex","categoryId":3,"status":"sold"}');
    assertDeprecationHeaders(response);
  }
});

test('an unknown id is 404 pet_not_found, a bad one 400 invalid_path, both with the deprecation headers', async (t) => {
  const server = await startTestServer(t);
  for (const id of ['2', '-5', '9223372036854775807']) {
    const response = await server.request(`/v1/pets/${id}`);
    assert.equal(response.status, 404, id);
    assert.equal((await errorBody(response)).code, 'pet_not_found');
    assertDeprecationHeaders(response);
  }
  for (const id of ['abc', '1.0', '9223372036854775808', '%31', '+1']) {
    const response = await server.request(`/v1/pets/${id}`);
    assert.equal(response.status, 400, id);
    const body = await errorBody(response);
    assert.equal(body.code, 'invalid_path');
    assert.match(body.message, /petId/);
    assertDeprecationHeaders(response);
  }
});

test('from the sunset instant on, GET /v1/pets/{petId} is 410 gone naming the replacement', async (t) => {
  const server = await startTestServer(t);
  await server.post('/v1/pets', { name: 'Rex', categoryId: 3 });
  server.clock.now = Date.UTC(2030, 11, 5) - 1;
  assert.equal((await server.request('/v1/pets/1')).status, 200);
  server.clock.now = Date.UTC(2030, 11, 5);
  for (const id of ['1', 'abc']) {
    const response = await server.request(`/v1/pets/${id}`);
    assert.equal(response.status, 410);
    const body = await errorBody(response);
    assert.equal(body.code, 'gone');
    assert.match(body.message, /GET \/v1\/pets/);
    assertDeprecationHeaders(response);
  }
  assert.equal((await server.request('/v1/pets')).status, 200);
});

test('the deprecation headers are not on other operations', async (t) => {
  const server = await startTestServer(t);
  const response = await server.request('/v1/pets');
  assert.equal(response.headers.get('deprecation'), null);
  assert.equal(response.headers.get('sunset'), null);
});

// --- answers that are cached stay right ---------------------------------------------------

test('a new pet is visible on the very next list, and a full page read before it is unchanged', async (t) => {
  const server = await startTestServer(t);
  await createMany(server, 3);
  const fullBefore = await (await server.request('/v1/pets?limit=2')).text();
  assert.equal((await json(await server.request('/v1/pets'))).length, 3);
  await server.post('/v1/pets', { name: 'late', categoryId: 9 });
  const after = await json(await server.request('/v1/pets'));
  assert.deepEqual(after.map((pet: { name: string }) => pet.name), ['pet 1', 'pet 2', 'pet 3', 'late']);
  assert.equal(await (await server.request('/v1/pets?limit=2')).text(), fullBefore);
});

test('a commit by another connection is seen by the next list and get (PRAGMA data_version)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'pets-cache-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const db = openDatabase(join(dir, 'pets.db'));
  const other = openDatabase(join(dir, 'pets.db'));
  t.after(() => {
    other.close();
    db.close();
  });
  const server = await startTestServer(t, { db });
  await createMany(server, 3);
  assert.equal((await json(await server.request('/v1/pets?limit=2'))).length, 2);
  assert.equal((await json(await server.request('/v1/pets/1'))).name, 'pet 1');
  other.exec("UPDATE pets SET name = 'renamed' WHERE id = 1");
  assert.equal((await json(await server.request('/v1/pets?limit=2')))[0].name, 'renamed');
  assert.equal((await json(await server.request('/v1/pets/1'))).name, 'renamed');
});
