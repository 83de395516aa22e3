import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { LOG_LINES, withoutEventLog } from '../../bench/events.ts';

const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
const strip = (file: string) => {
  const source = read(file);
  const stripped = withoutEventLog(file, source);
  assert.throws(() => withoutEventLog(file, stripped), /no longer appends/, `${file}: one place only`);
  return { source, stripped };
};

test('the bench\'s copy without the event log removes exactly the SQLite executor\'s append, and nothing else', () => {
  const { source, stripped } = strip('src/storage/sqlite/writer/executor.ts');
  assert.equal(source.match(/appendEvents\(/g)?.length, 1, 'one place appends');
  assert.equal(stripped.match(/appendEvents\(/g), null);
  assert.equal(source.split('\n').length - stripped.split('\n').length, 1, 'one line less');
});

test('on PostgreSQL the copy drops the logged transactions\' append and the creations\' events, and nothing else', () => {
  const log = strip('src/storage/postgres/event-log.ts');
  assert.equal(log.source.match(/appendEvents\(/g)?.length, 2, 'defined once, called once');
  assert.equal(log.stripped.match(/appendEvents\(/g)?.length, 1, 'defined only');
  assert.equal(log.source.split('\n').length - log.stripped.split('\n').length, 1, 'one line less');
  const creations = strip('src/storage/postgres/pet-creations.ts');
  assert.equal(creations.source.match(/logged: true/g)?.length, 1, 'one statement logs creations itself');
  assert.equal(creations.stripped.match(/logged: true/g), null);
  assert.equal(creations.source.length - creations.stripped.length, '{ logged: true }'.length + 2);
  // No other PostgreSQL module writes into the log, so the copy has no events of writes at all.
  for (const name of readdirSync(new URL('../../src/storage/postgres/', import.meta.url), { recursive: true }).map(String).filter((name) => name.endsWith('.ts'))) {
    if (name !== 'event-log.ts') assert.doesNotMatch(read(`src/storage/postgres/${name}`), /INTO events|appendEvents\(/, name);
  }
  assert.deepEqual(LOG_LINES.map((entry) => entry.file).sort(), ['src/storage/postgres/event-log.ts', 'src/storage/postgres/pet-creations.ts', 'src/storage/sqlite/writer/executor.ts']);
});
