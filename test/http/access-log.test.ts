import { test } from 'node:test';
import assert from 'node:assert/strict';
import { boundedWriter, createLogger, errorFields, stackFrames } from '../../src/http/access-log.ts';

const entry = { time: 0, requestId: 'r', method: 'GET', path: '/v1/pets', status: 200, durationMs: 1.5, keyId: 'key_1' };

test('lines are buffered and written once per turn', async () => {
  const writes: string[] = [];
  const logger = createLogger({ level: 'info', clock: () => 0, write: (text) => writes.push(text) });
  logger.access(entry);
  logger.access(entry);
  assert.equal(writes.length, 0);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(writes.length, 1);
  assert.equal(writes[0]!.split('\n').length, 3);
  const { time: _time, ...rest } = entry;
  assert.deepEqual(JSON.parse(writes[0]!.split('\n')[0]!), { time: '1970-01-01T00:00:00.000Z', level: 'info', ...rest });
});

test('levels filter: warn drops access lines, silent drops everything', () => {
  const writes: string[] = [];
  const warn = createLogger({ level: 'warn', clock: () => 0, write: (text) => writes.push(text) });
  warn.access(entry);
  warn.event({ level: 'info', event: 'x' });
  warn.event({ level: 'error', event: 'y' });
  warn.flush();
  assert.equal(writes.length, 1);
  assert.equal(JSON.parse(writes[0]!).event, 'y');
  const silent = createLogger({ level: 'silent', clock: () => 0, write: (text) => writes.push(text) });
  silent.event({ level: 'error', event: 'z' });
  silent.flush();
  assert.equal(writes.length, 1);
});

test('a full buffer is written at once, without waiting for the turn to end', () => {
  const writes: string[] = [];
  const logger = createLogger({ level: 'info', clock: () => 0, write: (text) => writes.push(text), highWaterMark: 100 });
  logger.access(entry);
  assert.equal(writes.length, 1);
});

test('a slow log reader never makes the writer hold more than its limit: lines are dropped and counted', () => {
  const written: string[] = [];
  const stream = { writableLength: 0, write: (text: string) => written.push(text) };
  const write = boundedWriter(stream, 100, () => 0);
  write('a\n');
  stream.writableLength = 101;
  write('b\nc\n');
  write('d\n');
  assert.deepEqual(written, ['a\n']);
  stream.writableLength = 0;
  write('e\n');
  assert.equal(written.length, 3);
  assert.deepEqual(JSON.parse(written[1]!), { time: '1970-01-01T00:00:00.000Z', level: 'warn', event: 'log_lines_dropped', count: 3 });
  assert.equal(written[2], 'e\n');
});

test('a path longer than 256 characters is logged cut to 256, with a marker saying so', () => {
  const writes: string[] = [];
  const logger = createLogger({ level: 'info', clock: () => 0, write: (text) => writes.push(text) });
  const long = `/${'a'.repeat(14_999)}`;
  logger.access({ ...entry, path: long });
  logger.access({ ...entry, path: long.slice(0, 256) });
  logger.access({ ...entry, path: long.slice(0, 257) });
  logger.flush();
  const [cut, exact, over] = writes[0]!.trimEnd().split('\n').map((line) => JSON.parse(line).path as string);
  assert.equal(cut!.length, 256);
  assert.ok(cut!.startsWith('/aaa'));
  assert.ok(cut!.endsWith('...[cut from 15000 characters]'), cut);
  assert.equal(exact, long.slice(0, 256), 'a path of exactly 256 characters is logged whole');
  assert.equal(over!.length, 256);
  assert.ok(over!.endsWith('...[cut from 257 characters]'));
});

test('an error is logged by its name and its stack frames, never its message, even one that looks like frames', () => {
  const secret = "SELECT key FROM keys WHERE x = 'pk_live_secret'\n    at forged (file:///input.ts:1:1)";
  function deep(): Error {
    return new TypeError(secret);
  }
  const error = deep();
  const fields = errorFields(error);
  assert.equal(fields.error, 'TypeError');
  assert.ok(fields.frames.length > 0 && fields.frames.every((frame) => frame.startsWith('at ')), fields.frames.join('\n'));
  assert.match(fields.frames[0]!, /^at deep \(file:.*access-log\.test\.ts:\d+:\d+\)$/);
  assert.doesNotMatch(JSON.stringify(fields), /SELECT|pk_live|forged/);
  // A message changed after the stack was read: where the old one ends is unknown, so no line is kept.
  error.message = 'another';
  assert.deepEqual(stackFrames(error), []);
  // What is not an Error has no frames.
  assert.deepEqual(errorFields('SELECT 1'), { error: 'string', frames: [] });
});
