import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseBenchOptions } from '../../bench/options.ts';

test('with no options the bench runs the comparison of every workload with the default settings, pinned', () => {
  assert.deepEqual(parseBenchOptions([]), {
    pets: 10_000, seconds: 5, warmup: 3, rounds: 3, connections: 50, only: null,
    pin: true, cpuQuota: null, quietWaitSeconds: 180, cores: null, scaleOut: null, out: null,
    help: false,
  });
});

test('--cpu-quota is a number of cores above 0, a fraction allowed', () => {
  assert.equal(parseBenchOptions(['--cpu-quota', '1']).cpuQuota, 1);
  assert.equal(parseBenchOptions(['--cpu-quota', '1.5']).cpuQuota, 1.5);
  for (const bad of ['0', '-1', 'one', '1e3', '']) assert.throws(() => parseBenchOptions(['--cpu-quota', bad]), /--cpu-quota/);
});

test('--only keeps the standard order and refuses an unknown workload', () => {
  assert.deepEqual(parseBenchOptions(['--only', 'mix,list20']).only, ['list20', 'mix']);
  assert.throws(() => parseBenchOptions(['--only', 'list20,lsit100']), /unknown workload "lsit100"/);
});

test('numbers are positive integers, with _ separators allowed', () => {
  assert.equal(parseBenchOptions(['--pets', '1_000_000']).pets, 1_000_000);
  for (const bad of ['0', '-1', '1e6', '2.5', '']) {
    assert.throws(() => parseBenchOptions([`--pets=${bad}`]), /--pets must be an integer/, bad);
  }
  assert.throws(() => parseBenchOptions(['--petz', '1']), /Unknown option '--petz'/);
});

test('there is one load generator: the options to choose another or its cores are gone', () => {
  for (const gone of ['--generator', '--server-cpus', '--generator-cpus']) {
    assert.throws(() => parseBenchOptions([gone, 'wrk']), /Unknown option/, gone);
  }
  assert.equal(parseBenchOptions(['--no-pin']).pin, false);
});

test('--quiet-wait 0 measures at once, however busy the machine', () => {
  assert.equal(parseBenchOptions(['--quiet-wait', '0']).quietWaitSeconds, 0);
  assert.throws(() => parseBenchOptions(['--quiet-wait', '1h']), /--quiet-wait must be an integer/);
});

test('the cores and scale-out runs are options of the one bench, with their counts as lists', () => {
  assert.deepEqual(parseBenchOptions(['--cores', '4,1,2,2']).cores, [1, 2, 4]);
  assert.deepEqual(parseBenchOptions(['--scale-out']).scaleOut, [1, 2]);
  assert.deepEqual(parseBenchOptions(['--scale-out', '--instances', '3,1']).scaleOut, [1, 3]);
  assert.throws(() => parseBenchOptions(['--model']), /model/, 'the capacity model is not part of the bench');
  assert.throws(() => parseBenchOptions(['--metrics']), /Unknown option/, 'the metrics endpoint is measured by no option');
  assert.throws(() => parseBenchOptions(['--cores', '0,2']), /--cores must be an integer from 1 to 256, got "0"/);
  assert.throws(() => parseBenchOptions(['--cores', '1-4']), /--cores must be an integer/);
  assert.throws(() => parseBenchOptions(['--instances', '2']), /--instances goes with --scale-out/);
});
