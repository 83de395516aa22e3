import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseBenchOptions } from '../../bench/options.ts';

test('with no options the bench runs every workload with the issue\'s settings, pinned, with the generator found', () => {
  assert.deepEqual(parseBenchOptions([], '/out'), {
    pets: 10_000, seconds: 5, warmup: 3, rounds: 3, connections: 50, only: null, profile: false, metrics: false,
    generator: null, pin: true, serverCpus: null, generatorCpus: null, quietWaitSeconds: 180,
    out: '/out', help: false,
  });
});

test('--only keeps the standard order and refuses an unknown workload', () => {
  assert.deepEqual(parseBenchOptions(['--only', 'mix,list20'], '/out').only, ['list20', 'mix']);
  assert.throws(() => parseBenchOptions(['--only', 'list20,lsit100'], '/out'), /unknown workload "lsit100"/);
});

test('numbers are positive integers, with _ separators allowed', () => {
  assert.equal(parseBenchOptions(['--pets', '1_000_000'], '/out').pets, 1_000_000);
  for (const bad of ['0', '-1', '1e6', '2.5', '']) {
    assert.throws(() => parseBenchOptions([`--pets=${bad}`], '/out'), /--pets must be an integer/, bad);
  }
  assert.throws(() => parseBenchOptions(['--petz', '1'], '/out'), /Unknown option '--petz'/);
});

test('--generator names wrk or autocannon', () => {
  assert.equal(parseBenchOptions(['--generator', 'wrk'], '/out').generator, 'wrk');
  assert.equal(parseBenchOptions(['--generator=autocannon'], '/out').generator, 'autocannon');
  assert.throws(() => parseBenchOptions(['--generator', 'ab'], '/out'), /--generator: unknown generator "ab"; known: wrk, autocannon/);
});

test('the cores are chosen as CPU lists that do not overlap, and not with --no-pin', () => {
  const chosen = parseBenchOptions(['--server-cpus', '2-3', '--generator-cpus', '0'], '/out');
  assert.deepEqual([chosen.pin, chosen.serverCpus, chosen.generatorCpus], [true, [2, 3], [0]]);
  assert.equal(parseBenchOptions(['--no-pin'], '/out').pin, false);
  assert.throws(() => parseBenchOptions(['--server-cpus', '0-1', '--generator-cpus', '1,2'], '/out'), /must not share a CPU, both have 1/);
  assert.throws(() => parseBenchOptions(['--no-pin', '--server-cpus', '1'], '/out'), /--no-pin cannot be combined/);
  assert.throws(() => parseBenchOptions(['--server-cpus=one'], '/out'), /--server-cpus must be a CPU list such as 1 or 0-1,4, got "one"/);
});

test('--quiet-wait 0 measures at once, however busy the machine', () => {
  assert.equal(parseBenchOptions(['--quiet-wait', '0'], '/out').quietWaitSeconds, 0);
  assert.throws(() => parseBenchOptions(['--quiet-wait', '1h'], '/out'), /--quiet-wait must be an integer/);
});
