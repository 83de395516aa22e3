import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createReplyCache } from '../../src/api/reply-cache.ts';

const reply = (body: string) => ({ status: 200, body });

test('a stable answer survives inserts; only another connection\'s commit drops it', () => {
  const cache = createReplyCache(10);
  cache.set('limit=2', reply('full page'), true, { inserts: 0, external: 1 });
  assert.equal(cache.get('limit=2', { inserts: 5, external: 1 })?.body, 'full page');
  assert.equal(cache.get('limit=2', { inserts: 5, external: 2 }), undefined);
  assert.equal(cache.get('limit=2', { inserts: 5, external: 1 }), undefined, 'a dropped entry stays dropped');
});

test('an answer an insert could change is dropped by the next insert', () => {
  const cache = createReplyCache(10);
  cache.set('', reply('last page'), false, { inserts: 3, external: 1 });
  assert.equal(cache.get('', { inserts: 3, external: 1 })?.body, 'last page');
  assert.equal(cache.get('', { inserts: 4, external: 1 }), undefined);
});

test('the cache holds at most its capacity, dropping the oldest entry', () => {
  const cache = createReplyCache(2);
  const now = { inserts: 0, external: 0 };
  cache.set('a', reply('a'), true, now);
  cache.set('b', reply('b'), true, now);
  cache.set('a', reply('a2'), true, now);
  cache.set('c', reply('c'), true, now);
  assert.equal(cache.get('a', now), undefined);
  assert.equal(cache.get('b', now)?.body, 'b');
  assert.equal(cache.get('c', now)?.body, 'c');
});
