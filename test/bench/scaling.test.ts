import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configurationsFor, describe } from '../../bench/scaling.ts';

const none = { cores: null, scaleOut: null };

test('--cores and --scale-out ask for one configuration per count, SQLite first; nothing asked, none', () => {
  assert.deepEqual(configurationsFor(none), []);
  assert.deepEqual(configurationsFor({ ...none, cores: [1, 4] }).map(describe), ['SQLite, 1 process', 'SQLite, WORKERS=4']);
  assert.deepEqual(configurationsFor({ ...none, scaleOut: [1, 3] }).map(describe), ['PostgreSQL, 1 instance', 'PostgreSQL, 3 instances']);
});
