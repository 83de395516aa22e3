import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readCpuTicks, readMachineTicks } from '../../bench/cpu.ts';
import { findListeningUrl, readMemory } from '../../bench/processes.ts';

test('the listening url is read from the first complete listening line, whatever comes before it', () => {
  const line = '{"time":"2026-01-01T00:00:00.000Z","level":"info","event":"listening","url":"http://127.0.0.1:4321","appEnv":"production"}';
  assert.equal(findListeningUrl(`not json\n{"event":"other"}\n${line}\n`), 'http://127.0.0.1:4321');
  assert.equal(findListeningUrl(line), null, 'an unfinished line is not read');
  assert.equal(findListeningUrl('{"event":"listening"}\n'), null);
});

test('memory and CPU time of a live process are read from /proc, and nothing of a process that is gone', () => {
  const memory = readMemory(process.pid)!;
  assert.ok(memory.rss > 1_000_000 && memory.peak >= memory.rss);
  assert.ok(readCpuTicks(process.pid) >= 0);
  const machine = readMachineTicks();
  assert.ok(machine.busy > 0 && machine.kernel >= 0 && machine.kernel <= machine.busy);
  assert.equal(readMemory(2 ** 22 + 1), null);
  assert.ok(Number.isNaN(readCpuTicks(2 ** 22 + 1)));
});
