import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ATOMIC_WRITE_BYTES, fdWriter } from '../../src/http/access-log.ts';

const line = (i: number, length = 300) => `${String(i).padStart(5, '0')}${'x'.repeat(length - 6)}\n`;

test('fdWriter writes whole lines, in pieces no larger than an atomic pipe write', () => {
  const pieces: string[] = [];
  const write = fdWriter(1, 1 << 20, () => 0, (_fd, bytes, offset, length) => {
    pieces.push(Buffer.from(bytes.subarray(offset, offset + length)).toString());
    return length;
  });
  const text = Array.from({ length: 40 }, (_, i) => line(i)).join('');
  write(text);
  assert.equal(pieces.join(''), text);
  for (const piece of pieces) {
    assert.ok(Buffer.byteLength(piece) <= ATOMIC_WRITE_BYTES, `${Buffer.byteLength(piece)} bytes`);
    assert.ok(piece.endsWith('\n'), 'a piece ends with a whole line');
  }
  assert.ok(pieces.length >= 3);
});

test('fdWriter keeps what a full pipe refused (EAGAIN) for later, and past its limit drops lines and counts them', () => {
  const written: string[] = [];
  let full = true;
  const write = fdWriter(1, 1000, () => 0, (_fd, bytes, offset, length) => {
    if (full) throw Object.assign(new Error('full'), { code: 'EAGAIN' });
    written.push(Buffer.from(bytes.subarray(offset, offset + length)).toString());
    return length;
  });
  write(line(1));
  write(line(2));
  write(line(3));
  write(line(4)); // 1200 bytes would pass the limit of 1000: dropped
  full = false;
  write(line(5, 100)); // fits the limit, and finds the pipe free again
  const text = written.join('');
  assert.equal(text.slice(0, 1000), line(1) + line(2) + line(3) + line(5, 100));
  assert.match(text.slice(1000), /^\{"time":"[^"]+","level":"warn","event":"log_lines_dropped","count":1\}\n$/);
});
