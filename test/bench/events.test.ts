import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { withoutEventLog } from '../../bench/events.ts';

test('the bench\'s copy without the event log removes exactly the executor\'s append, and nothing else', () => {
  const source = readFileSync(new URL('../../src/storage/sqlite/writer/executor.ts', import.meta.url), 'utf8');
  const stripped = withoutEventLog(source);
  assert.equal(source.match(/appendEvents\(/g)?.length, 1, 'one place appends');
  assert.equal(stripped.match(/appendEvents\(/g), null);
  assert.equal(source.split('\n').length - stripped.split('\n').length, 1, 'one line less');
  assert.throws(() => withoutEventLog(stripped), /no longer appends/);
});
