import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStreamSlots, STREAMS_PER_INSTANCE, STREAMS_PER_KEY } from '../../src/limits/stream-slots.ts';

test('by default an instance holds 1,000 streams and a key 5: the next one is refused with the cap it passed', () => {
  assert.equal(STREAMS_PER_INSTANCE, 1000);
  assert.equal(STREAMS_PER_KEY, 5);
  const slots = createStreamSlots();
  for (let i = 0; i < 1000; i++) assert.equal(slots.acquire(`key_${Math.floor(i / 5)}`), null, `stream ${i}`);
  assert.equal(slots.open(), 1000);
  assert.deepEqual(slots.acquire('key_new'), { cap: 'instance', limit: 1000 });
  assert.deepEqual(slots.acquire('key_0'), { cap: 'key', limit: 5 }, 'a key at its cap is told so first');
  slots.release('key_7');
  assert.equal(slots.acquire('key_new'), null, 'a slot given back is taken again');
  assert.equal(slots.open(), 1000);
});

test('a release of a key that holds nothing changes nothing', () => {
  const slots = createStreamSlots({ perKey: 1, perInstance: 2 });
  slots.release('key_a');
  assert.equal(slots.acquire('key_a'), null);
  assert.deepEqual(slots.acquire('key_a'), { cap: 'key', limit: 1 });
  slots.release('key_a');
  slots.release('key_a');
  assert.equal(slots.open(), 0);
});
