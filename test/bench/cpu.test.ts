import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { busiestShare, busyShare, choosePinning, createCpuQuotaGroup, inCpuGroup, installed, onCpus, parseCpuList, parseProcStat } from '../../bench/cpu.ts';

/** /proc/stat as Linux prints it, with the per-core lines of a 2-core machine. */
function procStat(cpu0: number[], cpu1: number[]): string {
  const all = cpu0.map((ticks, i) => ticks + cpu1[i]!);
  return [
    `cpu  ${all.join(' ')} 0 0`,
    `cpu0 ${cpu0.join(' ')} 0 0`,
    `cpu1 ${cpu1.join(' ')} 0 0`,
    'intr 123456 0 0',
    'ctxt 99',
    'btime 1700000000',
    'procs_running 3',
    '',
  ].join('\n');
}

test('/proc/stat is read line by line, per core and in all', () => {
  //                         user nice system idle iowait irq softirq steal
  const stat = parseProcStat(procStat([100, 1, 50, 800, 9, 2, 30, 8], [10, 0, 5, 980, 1, 0, 4, 0]));
  assert.deepEqual([...stat.keys()], ['cpu', 'cpu0', 'cpu1']);
  // Busy: user, nice, system, irq, softirq and steal; in all, idle and iowait as well.
  assert.deepEqual(stat.get('cpu0'), { busy: 191, total: 1000, irqs: 32 });
  assert.equal(stat.get('cpu')!.total - stat.get('cpu')!.busy, 1790);
  assert.throws(() => parseProcStat('cpu0 1 2 x 4 5 6 7 8\n'), /unreadable \/proc\/stat line/);
});

test('a core\'s busy share is its busy ticks (steal, irq and softirq included) over all its ticks between two samples', () => {
  const before = parseProcStat(procStat([100, 0, 50, 800, 10, 0, 30, 0], [10, 0, 5, 980, 0, 0, 5, 0]));
  // cpu0: +60 user, +10 system, +5 softirq, +5 steal busy (80); +15 idle, +5 iowait (100 ticks in all).
  // cpu1: +1 user, +99 idle.
  const after = parseProcStat(procStat([160, 0, 60, 815, 15, 0, 35, 5], [11, 0, 5, 1079, 0, 0, 5, 0]));
  assert.equal(busyShare(before, after, 0), 0.8);
  assert.equal(busyShare(before, after, 1), 0.01);
  assert.ok(Number.isNaN(busyShare(before, after, 2)), 'a core that is not there');
  assert.ok(Number.isNaN(busyShare(before, before, 0)), 'no tick between the samples');
  assert.equal(busiestShare(before, after, [1, 0]), 0.8, 'of several cores, the busiest');
});

test('a CPU list names single CPUs and ranges', () => {
  assert.deepEqual(parseCpuList('0-1'), [0, 1]);
  assert.deepEqual(parseCpuList('3,0-1,8-9\n'), [0, 1, 3, 8, 9]);
  assert.deepEqual(parseCpuList('5'), [5]);
  assert.throws(() => parseCpuList('0-1,a'), /not a CPU list/);
});

const found = { pin: true, tasksetFound: true };

test('the servers get the first allowed CPUs, the generator as many of the next ones', () => {
  assert.deepEqual(choosePinning([0, 1], 1, found), { pinning: { server: [0], generator: [1] }, note: 'servers on CPU 0, generator on CPU 1', shared: false });
  assert.deepEqual(choosePinning([2, 5, 7], 1, found).pinning, { server: [2], generator: [5] });
  assert.deepEqual(choosePinning([0, 1, 2, 3, 4, 5], 2, found).pinning, { server: [0, 1], generator: [2, 3] });
  assert.deepEqual(choosePinning([0, 1, 2], 2, found).pinning, { server: [0, 1], generator: [2] });
});

test('when the servers take every core, the generator shares them and the note says so', () => {
  assert.deepEqual(choosePinning([0, 1], 2, found), {
    pinning: { server: [0, 1], generator: [0, 1] },
    note: 'servers on CPU 0,1, the generator SHARES them (no core left for it)',
    shared: true,
  });
  assert.deepEqual(choosePinning([0, 1], 4, found).pinning, { server: [0, 1], generator: [0, 1] });
});

test('with one core, without taskset or with --no-pin nothing is pinned, and the note says why', () => {
  assert.deepEqual(choosePinning([0], 1, found), { pinning: null, note: 'not pinned: only 1 core, which the servers and the generator share', shared: true });
  assert.deepEqual(choosePinning([0, 1], 1, { pin: true, tasksetFound: false }).note, 'not pinned: taskset not found (apt-get install util-linux)');
  assert.deepEqual(choosePinning([0, 1], 1, { pin: false, tasksetFound: true }).note, 'not pinned (--no-pin)');
});

test('a pinned command runs through taskset, which keeps the process id', () => {
  assert.deepEqual(onCpus([1], '/usr/bin/wrk', ['-c', '50']), ['taskset', ['--cpu-list', '1', '/usr/bin/wrk', '-c', '50']]);
  assert.deepEqual(onCpus([2, 3], 'node', ['main.ts']), ['taskset', ['--cpu-list', '2,3', 'node', 'main.ts']]);
  assert.deepEqual(onCpus(null, '/usr/bin/wrk', ['-c', '50']), ['/usr/bin/wrk', ['-c', '50']]);
});

test('a command is installed when it runs, and not when it is not on the PATH', () => {
  assert.equal(installed('node'), true);
  assert.equal(installed('no-such-command-of-the-bench'), false);
});

test('a command in a cpu group: its shell writes its own pid to cgroup.procs, then execs the command with that pid', (t) => {
  assert.deepEqual(inCpuGroup(null, 'node', ['main.ts']), ['node', ['main.ts']]);
  // A plain folder stands for the group: the kernel would move the writer of the pid into it.
  const dir = mkdtempSync(join(tmpdir(), 'pets-cpu-group-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const [command, args] = inCpuGroup(dir, ...onCpus(null, process.execPath, ['-e', 'process.stdout.write(String(process.pid))']));
  const run = spawnSync(command, args, { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  assert.equal(readFileSync(join(dir, 'cgroup.procs'), 'utf8').trim(), run.stdout, 'the pid the group got is the command\'s own');
});

test('a cpu group gives its processes the cores asked for, where this process may make one', (t) => {
  let group: ReturnType<typeof createCpuQuotaGroup>;
  try {
    group = createCpuQuotaGroup(1.5);
  } catch {
    t.skip('no cgroup v1 cpu controller this process may write to');
    return;
  }
  t.after(() => group.remove());
  const period = Number(readFileSync(join(group.dir, 'cpu.cfs_period_us'), 'utf8'));
  assert.equal(Number(readFileSync(join(group.dir, 'cpu.cfs_quota_us'), 'utf8')), 1.5 * period);
  // The service's probe (WRITER=auto) reads the quota inside the group.
  const probe = new URL('../../src/lib/cpu-quota.ts', import.meta.url).href;
  const script = `const { cgroupCpuQuota } = await import(${JSON.stringify(probe)}); process.stdout.write(JSON.stringify({ quota: cgroupCpuQuota(), groups: (await import('node:fs')).readFileSync('/proc/self/cgroup', 'utf8') }));`;
  const [command, args] = inCpuGroup(group.dir, process.execPath, ['--input-type=module', '-e', script]);
  const run = spawnSync(command, args, { encoding: 'utf8' });
  assert.equal(run.status, 0, run.stderr);
  const seen = JSON.parse(run.stdout) as { quota: number; groups: string };
  assert.match(seen.groups, new RegExp(`:cpu[^:]*:/${basename(group.dir)}$`, 'm'));
  assert.equal(seen.quota, 1.5);
});
