/**
 * The interface (docs/api.md), "Pet lifecycle: change and remove a pet", line by line against a real server:
 * PATCH and DELETE of /v1/pets/{petId}, versions, ETag and If-Match, and what does not change.
 * Each test checks the status, the code, the headers, the body and the row in the database after.
 * (Caches and pagination under changes are in pet-lifecycle-reads.test.ts.)
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { errorBody, json, startTestServer, storedPet, type TestServer } from '../support/test-server.ts';
import { errorCode, openRaw } from '../support/raw-http.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createPetsStore, type SqlitePetsStore as PetsStore } from '../../src/storage/sqlite/pets-store.ts';
import { petETag } from '../../src/api/pets/json.ts';

const MERGE_PATCH = 'application/merge-patch+json';

function count(server: TestServer): number {
  return (server.db.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n;
}

/** Creates a pet; returns its id and the ETag of the 201. */
async function create(server: TestServer, pet: Record<string, unknown> = { name: 'Rex', categoryId: 7, status: 'available' }) {
  const response = await server.post('/v1/pets', pet);
  assert.equal(response.status, 201);
  return { id: (await json(response)).id as number, etag: response.headers.get('etag')! };
}

/** PATCH with a JSON merge patch body (a string is sent as is). */
function patch(server: TestServer, id: number | string, body: unknown, headers: Record<string, string> = {}) {
  return server.request(`/v1/pets/${id}`, {
    method: 'PATCH',
    headers: { 'content-type': MERGE_PATCH, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function remove(server: TestServer, id: number | string, headers: Record<string, string> = {}) {
  return server.request(`/v1/pets/${id}`, { method: 'DELETE', headers });
}

async function expectError(response: Response, status: number, code: string): Promise<string> {
  assert.equal(response.status, status, `expected ${status} ${code}`);
  const body = await errorBody(response);
  assert.equal(body.code, code);
  return body.message;
}

const DEPRECATION_HEADERS = ['deprecation', 'sunset', 'link'];

function assertNotDeprecated(response: Response): void {
  for (const name of DEPRECATION_HEADERS) assert.equal(response.headers.get(name), null, `${response.status} carries ${name}`);
}

// --- PATCH /v1/pets/{petId} -----------------------------------------------------------------

test('PATCH changes the fields sent, keeps the others: 200 with the whole pet and its new ETag, row stored', async (t) => {
  const server = await startTestServer(t);
  const { id, etag } = await create(server, { name: 'Rex', categoryId: 7 });
  const response = await patch(server, id, { status: 'sold' });
  assert.equal(response.status, 200);
  assert.equal(await response.text(), '{"id":1,"name":"Rex","categoryId":7,"status":"sold"}');
  assert.equal(response.headers.get('content-type'), 'application/json; charset=utf-8');
  const newTag = response.headers.get('etag');
  assert.match(newTag ?? '', /^"[!#-~]*"$/, 'a strong entity tag');
  assert.notEqual(newTag, etag);
  assert.deepEqual(storedPet(server, id), { id, name: 'Rex', categoryId: '7', status: 'sold', version: 2 });

  const again = await patch(server, id, { name: ' Rex the 2nd ', categoryId: 9 });
  assert.equal(await again.text(), '{"id":1,"name":" Rex the 2nd ","categoryId":9,"status":"sold"}');
  assert.deepEqual(storedPet(server, id), { id, name: ' Rex the 2nd ', categoryId: '9', status: 'sold', version: 3 });
});

test('PATCH with every field at once, and categoryId above 2^53 with its exact digits', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  const response = await patch(server, id, '{"categoryId":9223372036854775807,"status":"pending","name":"Whiskers"}');
  assert.equal(response.status, 200);
  assert.equal(await response.text(), '{"id":1,"name":"Whiskers","categoryId":9223372036854775807,"status":"pending"}');
  assert.deepEqual(storedPet(server, id), { id, name: 'Whiskers', categoryId: '9223372036854775807', status: 'pending', version: 2 });
  assert.match(await (await server.request('/v1/pets')).text(), /"categoryId":9223372036854775807,/);
});

test('any status may change to any other', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  const path = ['pending', 'sold', 'available', 'sold', 'pending', 'available'];
  for (const [index, status] of path.entries()) {
    const response = await patch(server, id, { status });
    assert.equal(response.status, 200, status);
    assert.equal((await json(response)).status, status);
    assert.deepEqual(storedPet(server, id), { id, name: 'Rex', categoryId: '7', status, version: index + 2 });
  }
});

test('{} changes nothing and answers 200 with the pet and its unchanged ETag', async (t) => {
  const server = await startTestServer(t);
  const { id, etag } = await create(server, { name: 'Rex', categoryId: 7, status: 'pending' });
  const response = await patch(server, id, {});
  assert.equal(response.status, 200);
  assert.equal(await response.text(), '{"id":1,"name":"Rex","categoryId":7,"status":"pending"}');
  assert.equal(response.headers.get('etag'), etag);
  assert.deepEqual(storedPet(server, id), { id, name: 'Rex', categoryId: '7', status: 'pending', version: 1 });
  assert.equal((await patch(server, id, '  {  }  ', { 'if-match': etag })).status, 200, 'with a matching If-Match too');
});

test('Content-Type is application/merge-patch+json or application/json (charset=utf-8 allowed), else 415 and nothing changes', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  const accepted = ['application/merge-patch+json', 'application/json', 'application/merge-patch+json; charset=utf-8', 'APPLICATION/JSON;charset="UTF-8"', 'Application/Merge-Patch+JSON'];
  for (const [index, type] of accepted.entries()) {
    assert.equal((await patch(server, id, { name: `n${index}` }, { 'content-type': type })).status, 200, type);
  }
  const before = storedPet(server, id);
  for (const type of ['text/plain', 'application/json-patch+json', 'application/merge-patch', 'application/merge-patch+json; charset=latin1', 'application/x-www-form-urlencoded', 'application/json; foo=bar']) {
    const message = await expectError(await patch(server, id, { name: 'refused' }, { 'content-type': type }), 415, 'unsupported_media_type');
    assert.match(message, /application\/merge-patch\+json or application\/json/);
  }
  const none = await server.request(`/v1/pets/${id}`, { method: 'PATCH', body: new Blob(['{"name":"refused"}']) });
  await expectError(none, 415, 'unsupported_media_type');
  assert.deepEqual(storedPet(server, id), before);
});

test('an empty body is 400 invalid_body, even with no or another Content-Type, and nothing changes', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  for (const headers of [{}, { 'content-type': MERGE_PATCH }, { 'content-type': 'text/plain' }]) {
    await expectError(await server.request(`/v1/pets/${id}`, { method: 'PATCH', headers }), 400, 'invalid_body');
  }
  assert.equal(storedPet(server, id)!.version, 1);
});

test('over 16 KiB is 413 payload_too_large (declared or chunked), exactly 16 KiB is read; nothing changes on 413', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  await expectError(await patch(server, id, JSON.stringify({ name: 'x', pad: 'y'.repeat(17 * 1024) })), 413, 'payload_too_large');
  const stream = new ReadableStream({
    start(controller) {
      for (let i = 0; i < 20; i++) controller.enqueue(new TextEncoder().encode(' '.repeat(1024)));
      controller.close();
    },
  });
  const chunked = await server.request(`/v1/pets/${id}`, { method: 'PATCH', headers: { 'content-type': MERGE_PATCH }, body: stream, duplex: 'half' } as RequestInit);
  await expectError(chunked, 413, 'payload_too_large');
  assert.equal(storedPet(server, id)!.version, 1);
  const base = JSON.stringify({ name: 'Exact' });
  const exact = base.slice(0, -1) + ' '.repeat(16 * 1024 - base.length) + '}';
  assert.equal(Buffer.byteLength(exact), 16 * 1024);
  assert.equal((await patch(server, id, exact)).status, 200);
  assert.equal(storedPet(server, id)!.name, 'Exact');
});

test('malformed JSON, whitespace only, invalid UTF-8 and repeated names are invalid_json; a non-object is invalid_body', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  for (const body of ['{', '{"name":"a",}', ' ', '\n\t', "{'name':'a'}", '{"name":"a"} x', '{"name":"a","name":"b"}', '\ufeff{"name":"a"}']) {
    await expectError(await patch(server, id, body), 400, 'invalid_json');
  }
  const invalidUtf8 = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
  await expectError(await server.request(`/v1/pets/${id}`, { method: 'PATCH', headers: { 'content-type': MERGE_PATCH }, body: invalidUtf8 }), 400, 'invalid_json');
  for (const body of ['[]', '"sold"', '1', 'null', 'true', '[{"status":"sold"}]']) {
    await expectError(await patch(server, id, body), 400, 'invalid_body');
  }
  assert.deepEqual(storedPet(server, id), { id, name: 'Rex', categoryId: '7', status: 'available', version: 1 });
});

test('the checks of the body come in the order of POST: empty, media type, size, JSON, fields', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  const huge = JSON.stringify({ name: 'x'.repeat(17 * 1024) });
  await expectError(await server.request(`/v1/pets/${id}`, { method: 'PATCH', headers: { 'content-type': 'text/plain' } }), 400, 'invalid_body');
  await expectError(await patch(server, id, huge, { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
  await expectError(await patch(server, id, `{${' '.repeat(17 * 1024)}`), 413, 'payload_too_large');
  await expectError(await patch(server, id, '{"id":1,'), 400, 'invalid_json');
  assert.equal(storedPet(server, id)!.version, 1);
});

test('each field follows its creation rule; the message names every bad field and nothing changes', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  const cases: [string, string][] = [
    ['{"name":""}', 'name'], ['{"name":"   "}', 'name'], [`{"name":"${'x'.repeat(101)}"}`, 'name'], ['{"name":"a\\u0000"}', 'name'],
    ['{"name":"\\ud800"}', 'name'], ['{"name":5}', 'name'],
    ['{"categoryId":0}', 'categoryId'], ['{"categoryId":-1}', 'categoryId'], ['{"categoryId":1.0}', 'categoryId'], ['{"categoryId":1e2}', 'categoryId'],
    ['{"categoryId":"5"}', 'categoryId'], ['{"categoryId":9223372036854775808}', 'categoryId'],
    ['{"status":"adopted"}', 'status'], ['{"status":"SOLD"}', 'status'], ['{"status":1}', 'status'],
  ];
  for (const [body, field] of cases) assert.match(await expectError(await patch(server, id, body), 400, 'invalid_body'), new RegExp(field), body);
  const message = await expectError(await patch(server, id, '{"name":"","categoryId":0,"status":"lost","owner":"me"}'), 400, 'invalid_body');
  for (const field of ['name', 'categoryId', 'status', '"owner"']) assert.match(message, new RegExp(field));
  assert.deepEqual(storedPet(server, id), { id, name: 'Rex', categoryId: '7', status: 'available', version: 1 });
});

test('null is refused for every field (no field can be removed), naming it; nothing changes', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  for (const field of ['name', 'categoryId', 'status']) {
    const message = await expectError(await patch(server, id, `{"${field}":null}`), 400, 'invalid_body');
    assert.match(message, new RegExp(`${field} must be .*not null`));
  }
  assert.match(await expectError(await patch(server, id, '{"name":null,"status":null}'), 400, 'invalid_body'), /name.*status/);
  assert.deepEqual(storedPet(server, id), { id, name: 'Rex', categoryId: '7', status: 'available', version: 1 });
});

test('any other property, id included, is refused and named; nothing changes', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  for (const extra of ['id', 'version', 'owner', '__proto__', 'constructor', 'Status']) {
    const message = await expectError(await patch(server, id, `{"status":"sold","${extra}":2}`), 400, 'invalid_body');
    assert.match(message, new RegExp(`"${extra}"`), extra);
  }
  assert.deepEqual(storedPet(server, id), { id, name: 'Rex', categoryId: '7', status: 'available', version: 1 });
});

test('PATCH: a bad petId is 400 invalid_path; an unknown or deleted pet is 404 pet_not_found', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  for (const petId of ['abc', '1.0', '9223372036854775808', '%31', '+1']) {
    assert.match(await expectError(await patch(server, petId, { status: 'sold' }), 400, 'invalid_path'), /petId/);
  }
  for (const petId of ['2', '-5', '0', '9223372036854775807']) await expectError(await patch(server, petId, { status: 'sold' }), 404, 'pet_not_found');
  assert.equal((await remove(server, id)).status, 204);
  await expectError(await patch(server, id, { status: 'sold' }), 404, 'pet_not_found');
  await expectError(await patch(server, id, {}), 404, 'pet_not_found');
  assert.equal(count(server), 0);
  assert.equal((await patch(server, '0001', {})).status, 404, 'leading zeros are the same id');
});

// --- DELETE /v1/pets/{petId} ----------------------------------------------------------------

test('DELETE answers 204 with no body; the pet is gone from every list and lookup', async (t) => {
  const server = await startTestServer(t);
  await create(server, { name: 'a', categoryId: 1, status: 'sold' });
  const { id } = await create(server, { name: 'b', categoryId: 1, status: 'sold' });
  await create(server, { name: 'c', categoryId: 1, status: 'sold' });
  const response = await remove(server, id);
  assert.equal(response.status, 204);
  assert.equal(await response.text(), '');
  assert.equal(response.headers.get('content-length'), null, 'RFC 9110: no Content-Length in a 204');
  assert.equal(response.headers.get('content-type'), null, 'nothing to type');
  assert.equal(response.headers.get('etag'), null);
  assert.equal(response.headers.get('cache-control'), 'no-store');
  assert.equal(storedPet(server, id), undefined);
  await expectError(await server.request(`/v1/pets/${id}`), 404, 'pet_not_found');
  for (const query of ['', '?status=sold', '?limit=1&cursor=YWZ0ZXI6MQ']) {
    assert.ok(!(await json(await server.request(`/v1/pets${query}`))).some((pet: { id: number }) => pet.id === id), query);
  }
});

test('DELETE: unknown or already deleted is 404 pet_not_found; a bad petId 400 invalid_path; nothing else is removed', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  await create(server);
  assert.equal((await remove(server, id)).status, 204);
  await expectError(await remove(server, id), 404, 'pet_not_found');
  await expectError(await remove(server, 99), 404, 'pet_not_found');
  for (const petId of ['abc', '1.5', '9223372036854775808']) assert.match(await expectError(await remove(server, petId), 400, 'invalid_path'), /petId/);
  assert.equal(count(server), 1);
});

test('the id of a deleted pet is never given again, not even when it was the newest (AUTOINCREMENT)', async (t) => {
  const server = await startTestServer(t);
  await create(server);
  const { id: newest } = await create(server);
  assert.equal((await remove(server, newest)).status, 204);
  assert.equal((await remove(server, 1)).status, 204);
  const { id } = await create(server);
  assert.equal(id, 3);
  assert.equal((await json(await server.request('/v1/pets'))).length, 1);
  const sequence = server.db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'pets'").get() as { seq: number };
  assert.equal(sequence.seq, 3, 'SQLite keeps the highest id ever given');
});

// --- Versions and conditional requests --------------------------------------------------------

test('ETag: on 201 of POST (and its replay), 200 of GET and HEAD, 200 of PATCH; the same for the same version', async (t) => {
  const server = await startTestServer(t);
  const first = await server.post('/v1/pets', { name: 'Rex', categoryId: 7 }, { headers: { 'idempotency-key': 'rex' } });
  const etag = first.headers.get('etag')!;
  assert.match(etag, /^"[!#-~]+"$/);
  const replay = await server.post('/v1/pets', { name: 'Rex', categoryId: 7 }, { headers: { 'idempotency-key': 'rex' } });
  assert.equal(replay.headers.get('idempotent-replayed'), 'true');
  assert.equal(replay.headers.get('etag'), etag, 'a replay is the first response, ETag included');
  assert.equal((await server.request('/v1/pets/1')).headers.get('etag'), etag);
  assert.equal((await server.request('/v1/pets/1', { method: 'HEAD' })).headers.get('etag'), etag);
  const changed = await patch(server, 1, { name: 'Max' });
  const newTag = changed.headers.get('etag');
  assert.notEqual(newTag, etag);
  assert.equal((await server.request('/v1/pets/1')).headers.get('etag'), newTag, 'GET sees the version PATCH made');
  assert.equal((await server.request('/v1/pets')).headers.get('etag'), null, 'a list has no single version');
  // A replay after the change still answers the first response, with the first ETag.
  assert.equal((await server.post('/v1/pets', { name: 'Rex', categoryId: 7 }, { headers: { 'idempotency-key': 'rex' } })).headers.get('etag'), etag);
});

test('the ETag changes with every change, even one that sets the same values, and never repeats', async (t) => {
  const server = await startTestServer(t);
  const { id, etag } = await create(server);
  const seen = new Set([etag]);
  for (let i = 0; i < 5; i++) {
    const response = await patch(server, id, { status: 'available' });
    const tag = response.headers.get('etag')!;
    assert.ok(!seen.has(tag), `${tag} was already given`);
    seen.add(tag);
  }
  assert.equal(storedPet(server, id)!.version, 6);
});

test('no ETag is shared across a deletion and a new pet', async (t) => {
  const server = await startTestServer(t);
  const old = await create(server);
  assert.equal((await remove(server, old.id)).status, 204);
  const fresh = await create(server);
  assert.notEqual(fresh.etag, old.etag);
  await expectError(await patch(server, fresh.id, { name: 'x' }, { 'if-match': old.etag }), 412, 'precondition_failed');
  assert.equal(storedPet(server, fresh.id)!.version, 1);
});

test('If-Match with the current ETag, in a list, or *: the change is made', async (t) => {
  const server = await startTestServer(t);
  const { id, etag } = await create(server);
  const first = await patch(server, id, { status: 'pending' }, { 'if-match': etag });
  assert.equal(first.status, 200);
  const second = first.headers.get('etag')!;
  const listed = await patch(server, id, { status: 'sold' }, { 'if-match': `"nope", ${second}, W/"x"` });
  assert.equal(listed.status, 200);
  const any = await patch(server, id, { name: 'Max' }, { 'if-match': '*' });
  assert.equal(any.status, 200);
  assert.deepEqual(storedPet(server, id), { id, name: 'Max', categoryId: '7', status: 'sold', version: 4 });
  assert.equal((await remove(server, id, { 'if-match': any.headers.get('etag')! })).status, 204);
  assert.equal(storedPet(server, id), undefined);
});

test('If-Match that lists none of the current ETag: 412 precondition_failed, and nothing changes', async (t) => {
  const server = await startTestServer(t);
  const { id, etag } = await create(server);
  assert.equal((await patch(server, id, { status: 'sold' })).status, 200);
  const before = storedPet(server, id);
  for (const ifMatch of [etag, '"other"', `"x", ${etag}`, '""', '', ' , ']) {
    const message = await expectError(await patch(server, id, { name: 'stale' }, { 'if-match': ifMatch }), 412, 'precondition_failed');
    assert.match(message, /If-Match/);
    await expectError(await remove(server, id, { 'if-match': ifMatch }), 412, 'precondition_failed');
    await expectError(await patch(server, id, {}, { 'if-match': ifMatch }), 412, 'precondition_failed');
  }
  assert.deepEqual(storedPet(server, id), before);
});

test('a weak tag never matches, not even the current one', async (t) => {
  const server = await startTestServer(t);
  const { id, etag } = await create(server);
  await expectError(await patch(server, id, { status: 'sold' }, { 'if-match': `W/${etag}` }), 412, 'precondition_failed');
  await expectError(await remove(server, id, { 'if-match': `W/${etag}` }), 412, 'precondition_failed');
  assert.equal(storedPet(server, id)!.version, 1);
});

test('a malformed If-Match is 400 bad_request on PATCH and DELETE, and nothing changes', async (t) => {
  const server = await startTestServer(t);
  const { id, etag } = await create(server);
  for (const ifMatch of [etag.slice(1, -1), `${etag} ${etag}`, `w/${etag}`, `*, ${etag}`, '"a', '"a b"']) {
    await expectError(await patch(server, id, { status: 'sold' }, { 'if-match': ifMatch }), 400, 'bad_request');
    await expectError(await remove(server, id, { 'if-match': ifMatch }), 400, 'bad_request');
  }
  assert.deepEqual(storedPet(server, id), { id, name: 'Rex', categoryId: '7', status: 'available', version: 1 });
});

test('without If-Match the change is unconditional', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  for (let i = 0; i < 3; i++) assert.equal((await patch(server, id, { name: `n${i}` })).status, 200);
  assert.equal((await remove(server, id)).status, 204);
});

test('order: the path first, then existence (404), then If-Match (412), then the body', async (t) => {
  const server = await startTestServer(t);
  const { id, etag } = await create(server);
  const badBody = { 'content-type': 'text/plain' };
  // A bad path wins over everything after it.
  await expectError(await patch(server, 'abc', 'junk', { ...badBody, 'if-match': 'malformed' }), 400, 'invalid_path');
  await expectError(await remove(server, 'abc', { 'if-match': 'malformed' }), 400, 'invalid_path');
  // A missing pet wins over If-Match, malformed or not, and over the body.
  await expectError(await patch(server, 99, 'junk', { ...badBody, 'if-match': 'malformed' }), 404, 'pet_not_found');
  await expectError(await remove(server, 99, { 'if-match': '"nope"' }), 404, 'pet_not_found');
  // If-Match wins over the body: its syntax, then whether it matches.
  await expectError(await patch(server, id, 'junk', { ...badBody, 'if-match': 'malformed' }), 400, 'bad_request');
  await expectError(await patch(server, id, 'junk', { ...badBody, 'if-match': '"nope"' }), 412, 'precondition_failed');
  await expectError(await server.request(`/v1/pets/${id}`, { method: 'PATCH', headers: { 'if-match': '"nope"' } }), 412, 'precondition_failed');
  await expectError(await patch(server, id, JSON.stringify({ name: 'x'.repeat(17 * 1024) }), { 'if-match': '"nope"' }), 412, 'precondition_failed');
  await expectError(await patch(server, id, '{"name":null}', { 'if-match': '"nope"' }), 412, 'precondition_failed');
  // Only a matching (or absent) If-Match reaches the body's checks.
  await expectError(await patch(server, id, 'junk', { ...badBody, 'if-match': etag }), 415, 'unsupported_media_type');
  await expectError(await patch(server, id, '{"name":null}', { 'if-match': etag }), 400, 'invalid_body');
  assert.equal(storedPet(server, id)!.version, 1);
});

/**
 * A server whose pets store counts the lookups of the checks before a change's body, so that a
 * test can hold the bodies back until every request has passed those checks: the requests then
 * truly race for the change, not for the check.
 */
async function racingServer(t: TestContext) {
  const db = openDatabase(':memory:');
  const real = createPetsStore(db);
  let lookups = 0;
  const pets: PetsStore = { ...real, get: (id) => (lookups++, real.get(id)) };
  const server = await startTestServer(t, { db, overrides: { pets } });
  t.after(() => db.close());
  /** Sends the requests on their own connections: every head first, then, once each was checked, every body. */
  const race = async (requests: { method: string; path: string; headers: Record<string, string>; body?: string }[], between = () => {}) => {
    const connections = await Promise.all(requests.map(() => openRaw(server.url)));
    const before = lookups;
    requests.forEach((request, i) => {
      const headers = { ...request.headers, host: 'x', authorization: `Bearer ${server.key}`, 'content-length': String(Buffer.byteLength(request.body ?? '')) };
      connections[i]!.write(`${request.method} ${request.path} HTTP/1.1\r\n${Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n`);
    });
    for (let turn = 0; lookups - before < requests.length; turn++) {
      assert.ok(turn < 10_000, `only ${lookups - before} of ${requests.length} requests were checked`);
      await new Promise((resolve) => setImmediate(resolve));
    }
    between();
    requests.forEach((request, i) => connections[i]!.write(request.body ?? ''));
    const answers = await Promise.all(connections.map((connection) => connection.response));
    for (const connection of connections) connection.socket.destroy();
    return answers;
  };
  return { server, race };
}

const patchRequest = (id: number, etag: string, body: object) => ({
  method: 'PATCH', path: `/v1/pets/${id}`, headers: { 'content-type': MERGE_PATCH, 'if-match': etag }, body: JSON.stringify(body),
});
const deleteRequest = (id: number, etag: string) => ({ method: 'DELETE', path: `/v1/pets/${id}`, headers: { 'if-match': etag } });

test('two conditional changes with the same ETag, past their checks together: exactly one is made', async (t) => {
  const { server, race } = await racingServer(t);
  for (const [first, second] of [['PATCH', 'PATCH'], ['PATCH', 'DELETE'], ['DELETE', 'PATCH'], ['DELETE', 'DELETE']] as const) {
    const { id, etag } = await create(server);
    const request = (method: string, name: string) => (method === 'PATCH' ? patchRequest(id, etag, { name }) : deleteRequest(id, etag));
    const answers = await race([request(first, 'first'), request(second, 'second')]);
    const won = answers.filter((answer) => answer.status < 300);
    const lost = answers.filter((answer) => answer.status >= 400);
    assert.equal(won.length, 1, `${first}/${second}: ${answers.map((answer) => answer.status)}`);
    assert.equal(lost.length, 1);
    // The loser finds the pet changed (412) or, after a deletion, gone (404).
    const code = errorCode(lost[0]!);
    assert.ok(code === 'precondition_failed' || (code === 'pet_not_found' && won[0]!.status === 204), `${first}/${second}: ${code}`);
    const stored = storedPet(server, id);
    if (won[0]!.status === 204) assert.equal(stored, undefined);
    else assert.deepEqual(stored, { id, name: JSON.parse(won[0]!.body).name, categoryId: '7', status: 'available', version: 2 });
  }
});

test('a change made while a PATCH body was on its way: the PATCH is 412 (or 404) and changes nothing, even {}', async (t) => {
  const { server, race } = await racingServer(t);
  for (const body of [{}, { status: 'sold' }]) {
    const { id, etag } = await create(server);
    const [changed] = await race([patchRequest(id, etag, body)], () => {
      server.service.stores.pets.changeMany([{ kind: 'update', id: BigInt(id), patch: { name: 'meanwhile' }, expectedVersion: null , now: 0}]);
    });
    assert.equal(errorCode(changed!), 'precondition_failed', JSON.stringify(body));
    assert.deepEqual(storedPet(server, id), { id, name: 'meanwhile', categoryId: '7', status: 'available', version: 2 });
    const [gone] = await race([patchRequest(id, petETag({ id, version: 2 }), body)], () => {
      server.service.stores.pets.changeMany([{ kind: 'delete', id: BigInt(id), expectedVersion: null , now: 0}]);
    });
    assert.equal(errorCode(gone!), 'pet_not_found', JSON.stringify(body));
  }
});

test('50 concurrent PATCHes with the same If-Match: exactly one 200 and 49 412s, and the version moved by one', async (t) => {
  const { server, race } = await racingServer(t);
  const { id, etag } = await create(server);
  const answers = await race(Array.from({ length: 50 }, (_, i) => patchRequest(id, etag, { name: `writer ${i}` })));
  const statuses = answers.map((answer) => answer.status);
  assert.equal(statuses.filter((status) => status === 200).length, 1, String(statuses));
  assert.equal(statuses.filter((status) => status === 412).length, 49, String(statuses));
  for (const answer of answers.filter((candidate) => candidate.status === 412)) assert.equal(errorCode(answer), 'precondition_failed');
  const winner = answers.find((answer) => answer.status === 200)!;
  assert.deepEqual(storedPet(server, id), { id, name: JSON.parse(winner.body).name, categoryId: '7', status: 'available', version: 2 });
  assert.notEqual(winner.headers.etag, etag);
});

// --- What does not change ---------------------------------------------------------------------

test('PATCH and DELETE are not deprecated: none of their answers carries Deprecation, Sunset or the successor Link', async (t) => {
  const server = await startTestServer(t);
  const { id, etag } = await create(server);
  const answers = [
    await patch(server, id, { status: 'sold' }), await patch(server, id, { name: null }), await patch(server, 99, {}),
    await patch(server, 'abc', {}), await patch(server, id, {}, { 'if-match': etag }), await patch(server, id, {}, { 'if-match': 'x' }),
    await remove(server, 99), await remove(server, id, { 'if-match': etag }), await remove(server, id),
  ];
  assert.deepEqual(answers.map((response) => response.status), [200, 400, 404, 400, 412, 400, 404, 412, 204]);
  for (const response of answers) assertNotDeprecated(response);
  // GET of the same path keeps them.
  const { id: other } = await create(server);
  assert.equal((await server.request(`/v1/pets/${other}`)).headers.get('sunset'), 'Thu, 05 Dec 2030 00:00:00 GMT');
});

test('from the sunset instant on, GET of a pet is 410 gone, while PATCH and DELETE keep working', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  server.clock.now = Date.UTC(2030, 11, 5);
  await expectError(await server.request(`/v1/pets/${id}`), 410, 'gone');
  const changed = await patch(server, id, { status: 'sold' });
  assert.equal(changed.status, 200);
  assertNotDeprecated(changed);
  assert.equal(storedPet(server, id)!.status, 'sold');
  const removed = await remove(server, id);
  assert.equal(removed.status, 204);
  assertNotDeprecated(removed);
  assert.equal(storedPet(server, id), undefined);
});

test('405 on a pet lists GET, HEAD, PATCH, DELETE in Allow', async (t) => {
  const server = await startTestServer(t);
  for (const method of ['PUT', 'POST', 'OPTIONS']) {
    const response = await server.request('/v1/pets/1', { method });
    await expectError(response, 405, 'method_not_allowed');
    assert.equal(response.headers.get('allow'), 'GET, HEAD, PATCH, DELETE', method);
  }
});

test('PATCH and DELETE need a key, are rate limited and carry the common headers like every /v1 operation', async (t) => {
  const server = await startTestServer(t);
  const { id } = await create(server);
  for (const send of [() => server.request(`/v1/pets/${id}`, { method: 'PATCH', key: null }), () => server.request(`/v1/pets/${id}`, { method: 'DELETE', key: null })]) {
    const response = await send();
    await expectError(response, 401, 'missing_api_key');
    assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="pets"');
  }
  await expectError(await server.request(`/v1/pets/${id}`, { method: 'DELETE', key: 'pk_test_nope' }), 401, 'invalid_api_key');
  assert.equal(storedPet(server, id)!.version, 1);
  const changed = await server.request(`/v1/pets/${id}`, { method: 'PATCH', key: server.freeKey, headers: { 'content-type': MERGE_PATCH, 'x-request-id': 'patch-1' }, body: '{"status":"sold"}' });
  assert.equal(changed.status, 200);
  assert.equal(changed.headers.get('x-ratelimit-limit'), '60');
  assert.equal(changed.headers.get('x-ratelimit-remaining'), '59');
  assert.equal(changed.headers.get('x-request-id'), 'patch-1');
  assert.equal(changed.headers.get('x-content-type-options'), 'nosniff');
  const removed = await server.request(`/v1/pets/${id}`, { method: 'DELETE', key: server.freeKey });
  assert.equal(removed.headers.get('x-ratelimit-remaining'), '58');
  assert.match(removed.headers.get('ratelimit') ?? '', /^"minute";r=58;/);
  await new Promise((resolve) => setImmediate(resolve));
  const logged = server.logs.map((line) => JSON.parse(line)).filter((line) => line.path === `/v1/pets/${id}` && line.keyId === server.freeKeyId);
  assert.deepEqual(logged.map((line) => [line.method, line.status]), [['PATCH', 200], ['DELETE', 204]]);
});
