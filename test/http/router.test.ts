import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRouter } from '../../src/http/router.ts';

function sample() {
  const router = createRouter<string>();
  router.add('GET', '/v1/pets', 'list');
  router.add('POST', '/v1/pets', 'create');
  router.add('GET', '/v1/pets/{petId}', 'get');
  router.add('GET', '/v1/store/orders', 'orders');
  return router;
}

test('a static path finds its handler with no params', () => {
  assert.deepEqual(sample().find('GET', '/v1/pets'), { kind: 'found', handler: 'list', params: {}, pattern: '/v1/pets' });
  assert.deepEqual(sample().find('POST', '/v1/pets'), { kind: 'found', handler: 'create', params: {}, pattern: '/v1/pets' });
});

test('a pattern captures its parameter without decoding it', () => {
  assert.deepEqual(sample().find('GET', '/v1/pets/42'), { kind: 'found', handler: 'get', params: { petId: '42' }, pattern: '/v1/pets/{petId}' });
  assert.deepEqual(sample().find('GET', '/v1/pets/a%20b'), { kind: 'found', handler: 'get', params: { petId: 'a%20b' }, pattern: '/v1/pets/{petId}' });
});

test('static routes win over patterns that also match', () => {
  const router = createRouter<string>();
  router.add('GET', '/v1/pets/{petId}', 'get');
  router.add('GET', '/v1/pets/mine', 'mine');
  assert.deepEqual(router.find('GET', '/v1/pets/mine'), { kind: 'found', handler: 'mine', params: {}, pattern: '/v1/pets/mine' });
});

test('HEAD is served by the GET handler', () => {
  assert.deepEqual(sample().find('HEAD', '/v1/pets/7'), { kind: 'found', handler: 'get', params: { petId: '7' }, pattern: '/v1/pets/{petId}' });
});

test('an unknown path is null, never an exception', () => {
  const router = sample();
  for (const path of ['/', '/v1', '/v1/pets/', '/v1/pets/1/2', '/v1/pet', '//v1/pets', '/v1/pets//', '', 'v1/pets']) {
    assert.equal(router.find('GET', path), null, path);
  }
});

test('a known path with another method lists the allowed methods in the order they were added, HEAD right after GET', () => {
  const router = createRouter<string>();
  router.add('GET', '/v1/pets/{petId}', 'get');
  router.add('PATCH', '/v1/pets/{petId}', 'update');
  router.add('DELETE', '/v1/pets/{petId}', 'delete');
  assert.deepEqual(router.find('PUT', '/v1/pets/1'), { kind: 'method_not_allowed', allow: 'GET, HEAD, PATCH, DELETE', pattern: '/v1/pets/{petId}' });
  assert.deepEqual(router.find('DELETE', '/v1/pets/1'), { kind: 'found', handler: 'delete', params: { petId: '1' }, pattern: '/v1/pets/{petId}' });
  const postFirst = createRouter<string>();
  postFirst.add('POST', '/things', 'create');
  postFirst.add('GET', '/things', 'list');
  assert.deepEqual(postFirst.find('PUT', '/things'), { kind: 'method_not_allowed', allow: 'POST, GET, HEAD', pattern: '/things' });
  assert.deepEqual(sample().find('DELETE', '/v1/pets'), { kind: 'method_not_allowed', allow: 'GET, HEAD, POST', pattern: '/v1/pets' });
  assert.deepEqual(sample().find('PUT', '/v1/pets/1'), { kind: 'method_not_allowed', allow: 'GET, HEAD', pattern: '/v1/pets/{petId}' });
  assert.deepEqual(sample().find('POST', '/v1/store/orders'), { kind: 'method_not_allowed', allow: 'GET, HEAD', pattern: '/v1/store/orders' });
});

test('allowed(path) gives the Allow value of the same lookup, or null for an unknown path', () => {
  const router = sample();
  assert.equal(router.allowed('/v1/pets'), 'GET, HEAD, POST');
  assert.equal(router.allowed('/v1/pets/7'), 'GET, HEAD');
  for (const path of ['/v1/pets/', '/v1/nowhere', '/v1']) assert.equal(router.allowed(path), null, path);
  router.add('DELETE', '/v1/pets/{petId}', 'delete');
  assert.equal(router.allowed('/v1/pets/7'), 'GET, HEAD, DELETE', 'a method added later shows up by itself, in its place');
});

test('programmer errors throw at registration', () => {
  const router = sample();
  assert.throws(() => router.add('GET', '/v1/pets', 'again'), /duplicate/);
  assert.throws(() => router.add('GET', '/v1/pets/{petId}', 'again'), /duplicate/);
  assert.throws(() => router.add('get', '/x', 'x'), /invalid method/);
  assert.throws(() => router.add('HEAD', '/x', 'x'), /HEAD/);
  assert.throws(() => router.add('GET', 'x', 'x'), /must start/);
  assert.throws(() => router.add('GET', '/a/{b}/{b}', 'x'), /repeats/);
  assert.throws(() => router.add('GET', '/a/{b', 'x'), /malformed/);
});
