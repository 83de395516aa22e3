import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildWorkloads } from '../../bench/workloads.ts';
import { validateBody } from '../../src/api/validator.ts';
import { parseJson } from '../../src/http/request-body.ts';
import { petPatchSchema } from '../../src/api/schemas.ts';

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
  assert.equal(patchmix!.wrk.script, 'patchmix.lua');
  assert.equal(patchmix!.wrk.args.length, requests.length, 'one wrk argument per request (wrk.test.ts checks that they send the same)');
});
