/** The CPU quota of the process's cgroups, read from files as the kernel writes them. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cgroupCpuQuota, parseCfs, parseCpuMax } from '../../src/lib/cpu-quota.ts';

/** A filesystem of these files only. */
const files = (contents: Record<string, string>) => (path: string) => contents[path] ?? null;

test('cgroup v2 cpu.max: "max" is no limit, a quota is cores over the period', () => {
  assert.equal(parseCpuMax('max 100000\n'), null);
  assert.equal(parseCpuMax('100000 100000\n'), 1);
  assert.equal(parseCpuMax('150000 100000'), 1.5);
  assert.equal(parseCpuMax('50000 100000'), 0.5);
  assert.equal(parseCpuMax(''), null);
  assert.equal(parseCpuMax('0 100000'), null);
  assert.equal(parseCpuMax('garbage'), null);
});

test('cgroup v1 cfs_quota_us: -1 is no limit, a quota is cores over cfs_period_us', () => {
  assert.equal(parseCfs('-1\n', '100000\n'), null);
  assert.equal(parseCfs('100000\n', '100000\n'), 1);
  assert.equal(parseCfs('200000', '100000'), 2);
  assert.equal(parseCfs('100000', '0'), null);
});

test('the v2 quota of the process\'s group or any group above it, the smallest', () => {
  const read = files({
    '/proc/self/cgroup': '0::/system.slice/pets.service\n',
    '/sys/fs/cgroup/system.slice/pets.service/cpu.max': 'max 100000\n',
    '/sys/fs/cgroup/system.slice/cpu.max': '150000 100000\n',
    '/sys/fs/cgroup/cpu.max': 'max 100000\n',
  });
  assert.equal(cgroupCpuQuota(read), 1.5);
});

test('the v1 quota, under the cpu or the cpu,cpuacct mount', () => {
  const membership = '12:memory:/x\n4:cpu,cpuacct:/docker/abc\n0::/\n';
  assert.equal(cgroupCpuQuota(files({
    '/proc/self/cgroup': membership,
    '/sys/fs/cgroup/cpu/docker/abc/cpu.cfs_quota_us': '100000\n',
    '/sys/fs/cgroup/cpu/docker/abc/cpu.cfs_period_us': '100000\n',
  })), 1);
  assert.equal(cgroupCpuQuota(files({
    '/proc/self/cgroup': membership,
    '/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us': '50000\n',
    '/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us': '100000\n',
    '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '-1\n',
    '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000\n',
  })), 0.5);
});

test('no quota anywhere, or nothing readable: null', () => {
  assert.equal(cgroupCpuQuota(files({})), null);
  assert.equal(cgroupCpuQuota(files({ '/proc/self/cgroup': '1:cpu:/\n', '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': '-1', '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' })), null);
});

test('on this machine the probe answers without throwing', () => {
  const quota = cgroupCpuQuota();
  assert.ok(quota === null || quota > 0);
});
