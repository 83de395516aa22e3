import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildWorkloads } from '../../bench/workloads.ts';
import { validateBody } from '../../src/api/validator.ts';
import { parseJson } from '../../src/http/request-body.ts';
import { petPatchSchema } from '../../src/api/schemas.ts';
import { startTestServer } from '../support/test-server.ts';

const fixture = { pets: 10_000, deepSoldAfterId: 9_000 };

test('patchmix sends 90 % reads (first pages and pets by id) and 10 % valid PATCHes, spread evenly', () => {
  const [patchmix] = buildWorkloads(fixture, ['patchmix']);
  const requests = patchmix!.sequence;
  const patches = requests.filter((request) => request.method === 'PATCH');
  assert.equal(patches.length * 10, requests.length);
  requests.forEach((request, i) => assert.equal(request.method, i % 10 === 9 ? 'PATCH' : 'GET', `request ${i}`));
  const reads = requests.filter((request) => request.method === 'GET').map((request) => request.path);
  assert.ok(reads.every((path) => path === '/v1/pets?limit=20' || /^\/v1\/pets\/[1-9][0-9]*$/.test(path)));
  assert.ok(reads.filter((path) => path !== '/v1/pets?limit=20').length > 0);
  for (const request of patches) {
    assert.match(request.path, /^\/v1\/pets\/[1-9][0-9]*$/);
    assert.ok(Number(request.path.split('/').pop()) <= fixture.pets);
    assert.equal(request.headers['content-type'], 'application/merge-patch+json');
    assert.equal(request.headers['if-match'], '*');
    assert.deepEqual(Object.keys(validateBody(parseJson(new TextEncoder().encode(String(request.body))), petPatchSchema)), ['status']);
  }
  assert.ok(new Set(patches.map((request) => request.path)).size > 1, 'changes spread over several pets');
  assert.equal(patchmix!.wrk.script, 'sequence.lua');
  assert.equal(patchmix!.wrk.args.length, requests.length, 'one wrk argument per request (wrk.test.ts checks that they send the same)');
});

test('adopt orders only pets the seed made available, and its settle cancels every open order through the API', async (t) => {
  const [adopt] = buildWorkloads(fixture, ['adopt']);
  const pets = adopt!.wrk.args.map(Number);
  assert.equal(pets.length, 400);
  assert.ok(pets.every((id) => id % 3 === 1 && id <= fixture.pets), 'STATUS_OF_N makes id % 3 = 1 available');
  assert.equal(buildWorkloads({ pets: 10, deepSoldAfterId: 0 }, ['adopt'])[0]!.wrk.args.length, 4, 'no more pets than the seed has');

  const server = await startTestServer(t);
  for (let i = 0; i < 150; i++) assert.equal((await server.post('/v1/pets', { name: `pet ${i}`, categoryId: 1 })).status, 201);
  for (let i = 1; i <= 130; i++) assert.equal((await server.post('/v1/store/orders', { petId: i })).status, 201);
  const approve = { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: '{"status":"approved"}' };
  assert.equal((await server.request('/v1/store/orders/130', approve)).status, 200);
  await adopt!.settle!(server.url, `Bearer ${server.key}`);
  const statuses = server.db.prepare('SELECT status, count(*) AS n FROM orders GROUP BY status ORDER BY status').all().map((row) => ({ ...row }));
  assert.deepEqual(statuses, [{ status: 'approved', n: 1 }, { status: 'cancelled', n: 129 }], 'every placed order, over two pages; adopt never approves');
  assert.equal((server.db.prepare("SELECT count(*) AS n FROM pets WHERE status = 'pending'").get() as { n: number }).n, 1);
});
