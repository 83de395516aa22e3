import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadedOnFirstUse } from '../../src/lib/loaded-on-first-use.ts';

test('nothing is loaded before the first use; the first uses share one load, and the value is kept', async () => {
  let loads = 0;
  const lazy = loadedOnFirstUse(async () => ({ made: ++loads }));
  assert.equal(loads, 0);
  const [first, second] = await Promise.all([lazy.get(), lazy.get()]);
  assert.equal(loads, 1);
  assert.equal(first, second);
  assert.equal(lazy.use((made) => made), first, 'kept: given at once');
  assert.equal(await lazy.get(), first);
  assert.equal(loads, 1);
});

test('a load that fails fails its callers, keeps no value, and is tried again by the next use', async () => {
  let loads = 0;
  const lazy = loadedOnFirstUse(async () => {
    loads += 1;
    if (loads === 1) throw new Error('first load failed');
    return 'loaded';
  });
  await assert.rejects(Promise.all([lazy.get(), lazy.get()]), /first load failed/);
  assert.equal(loads, 1, 'the callers of one failed load share it');
  const next = lazy.use((made) => made);
  assert.ok(next instanceof Promise, 'no value kept: the next use loads again');
  assert.equal(await lazy.get(), 'loaded');
  assert.equal(await next, 'loaded');
  assert.equal(loads, 2);
  assert.equal(lazy.use((made) => made), 'loaded');
});

test('use calls on at once once loaded, and after the load before', async () => {
  const lazy = loadedOnFirstUse(async () => 2);
  const before = lazy.use((two) => two * 3);
  assert.ok(before instanceof Promise, 'not loaded yet: after the load');
  assert.equal(await before, 6);
  assert.equal(lazy.use((two) => two * 5), 10, 'loaded: at once, no promise');
});
