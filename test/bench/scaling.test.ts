import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configurationsFor, describe } from '../../bench/scaling.ts';

const none = { cores: null, scaleOut: null, model: false };

test('--cores and --scale-out ask for one configuration per count, SQLite first; nothing asked, none', () => {
  assert.deepEqual(configurationsFor(none), []);
  assert.deepEqual(configurationsFor({ ...none, cores: [1, 4] }).map(describe), ['SQLite, 1 process', 'SQLite, WORKERS=4']);
  assert.deepEqual(configurationsFor({ ...none, scaleOut: [1, 3] }).map(describe), ['PostgreSQL, 1 instance', 'PostgreSQL, 3 instances']);
});

test('--model asks for one and two of each engine, and a configuration asked twice runs once', () => {
  assert.deepEqual(configurationsFor({ ...none, model: true }).map(describe), ['SQLite, 1 process', 'SQLite, WORKERS=2', 'PostgreSQL, 1 instance', 'PostgreSQL, 2 instances']);
  assert.deepEqual(configurationsFor({ cores: [2, 4], scaleOut: [1], model: true }), [
    { engine: 'sqlite', instances: 1, workers: 1 },
    { engine: 'sqlite', instances: 1, workers: 2 },
    { engine: 'sqlite', instances: 1, workers: 4 },
    { engine: 'postgres', instances: 1, workers: 1 },
    { engine: 'postgres', instances: 2, workers: 1 },
  ]);
});
