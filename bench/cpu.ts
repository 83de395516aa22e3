/**
 * The cores of the machine: where the bench runs what (`taskset`), and how busy each core was
 * during a load, from two samples of /proc/stat. The servers under test get cores of their own,
 * the load generator others, so that the generator's cores show whether it was the limit.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** One `cpu` or `cpuN` line of /proc/stat, in clock ticks since boot. */
export interface CpuTimes {
  /** Ticks in which the core ran something: a process, the kernel, or (steal) another virtual machine. */
  busy: number;
  /** Busy, idle, or idle waiting for I/O. */
  total: number;
  /** Of the busy ticks, interrupts and softirqs (loopback networking). */
  irqs: number;
}

/** The lines of /proc/stat that describe CPU time, by name: `cpu` (all cores), `cpu0`, `cpu1`, ... */
export function parseProcStat(text: string): Map<string, CpuTimes> {
  const lines = new Map<string, CpuTimes>();
  for (const line of text.split('\n')) {
    if (!/^cpu[0-9]* /.test(line)) continue;
    // cpu user nice system idle iowait irq softirq steal guest guest_nice (guest time is inside user).
    const [name, ...fields] = line.trim().split(/\s+/);
    const [user, nice, system, idle, iowait, irq, softirq, steal] = fields.slice(0, 8).map(Number) as number[];
    if (![user, nice, system, idle, iowait, irq, softirq, steal].every(Number.isFinite)) throw new Error(`unreadable /proc/stat line: ${line}`);
    const busy = user! + nice! + system! + irq! + softirq! + steal!;
    lines.set(name!, { busy, total: busy + idle! + iowait!, irqs: irq! + softirq! });
  }
  return lines;
}

export function readProcStat(): Map<string, CpuTimes> {
  return parseProcStat(readFileSync('/proc/stat', 'utf8'));
}

/**
 * The share (0 to 1) of the time between two /proc/stat samples in which core `core` was busy;
 * NaN when the core is not in both samples or no tick passed between them.
 */
export function busyShare(before: Map<string, CpuTimes>, after: Map<string, CpuTimes>, core: number): number {
  const start = before.get(`cpu${core}`);
  const end = after.get(`cpu${core}`);
  if (start === undefined || end === undefined) return Number.NaN;
  const total = end.total - start.total;
  return total > 0 ? (end.busy - start.busy) / total : Number.NaN;
}

/** The busy share of the busiest of `cores` between two samples (see busyShare). */
export function busiestShare(before: Map<string, CpuTimes>, after: Map<string, CpuTimes>, cores: readonly number[]): number {
  return cores.reduce((busiest, core) => Math.max(busiest, busyShare(before, after, core)), Number.NEGATIVE_INFINITY);
}

/** A Linux CPU list such as `0-3,8,10-11` (as in Cpus_allowed_list), as the numbers it names. */
export function parseCpuList(text: string): number[] {
  const cpus = new Set<number>();
  for (const part of text.trim().split(',')) {
    const range = /^([0-9]+)(?:-([0-9]+))?$/.exec(part);
    if (range === null) throw new Error(`not a CPU list: ${JSON.stringify(text)}`);
    const first = Number(range[1]);
    const last = range[2] === undefined ? first : Number(range[2]);
    for (let cpu = first; cpu <= last; cpu++) cpus.add(cpu);
  }
  return [...cpus].sort((a, b) => a - b);
}

/** The CPUs this process may run on (what `nproc` counts). */
export function allowedCpus(): number[] {
  const status = readFileSync('/proc/self/status', 'utf8');
  const list = /^Cpus_allowed_list:\s*(\S+)$/m.exec(status);
  if (list === null) throw new Error('no Cpus_allowed_list in /proc/self/status');
  return parseCpuList(list[1]!);
}

/** The cores that run the servers and those that run the load generator (and this process). */
export interface Pinning {
  server: number[];
  generator: number[];
}

/**
 * Where the servers and the generator run: the servers on the first `serverCores` CPUs this
 * process may use, the generator (and this process, which reads the service's log) on as many
 * of the next ones. When none is left they share the servers' cores, and `shared` says so: the
 * figures then measure the servers and their load generator together. null when not pinned.
 */
export function choosePinning(
  allowed: readonly number[],
  serverCores: number,
  options: { pin: boolean; tasksetFound: boolean },
): { pinning: Pinning | null; note: string; shared: boolean } {
  if (!options.pin) return { pinning: null, note: 'not pinned (--no-pin)', shared: true };
  if (allowed.length < 2) return { pinning: null, note: `not pinned: only ${allowed.length} core, which the servers and the generator share`, shared: true };
  if (!options.tasksetFound) return { pinning: null, note: 'not pinned: taskset not found (apt-get install util-linux)', shared: true };
  const server = allowed.slice(0, serverCores);
  const rest = allowed.slice(server.length, server.length + server.length);
  if (rest.length === 0) {
    return { pinning: { server, generator: server }, note: `servers on CPU ${server.join(',')}, the generator SHARES them (no core left for it)`, shared: true };
  }
  return { pinning: { server, generator: rest }, note: `servers on CPU ${server.join(',')}, generator on CPU ${rest.join(',')}`, shared: false };
}

/**
 * A cgroup v1 `cpu` group whose processes get `cores` cores' time between them (cfs_quota_us =
 * cores × cfs_period_us), as a container started with `--cpus` has: `--cpu-quota`. Needs the
 * right to make a group under `root` (root, on this machine).
 */
export function createCpuQuotaGroup(cores: number, root = '/sys/fs/cgroup/cpu'): { dir: string; remove(): void } {
  const dir = join(root, `pets-bench-${process.pid}`);
  mkdirSync(dir);
  const period = Number(readFileSync(join(dir, 'cpu.cfs_period_us'), 'utf8'));
  writeFileSync(join(dir, 'cpu.cfs_quota_us'), String(Math.round(cores * period)));
  // A group is removed once empty (its servers stopped); rmdir, not rm: its files are the kernel's.
  return { dir, remove: () => rmdirSync(dir) };
}

/** The command that runs `command args...` inside the cgroup `dir` (the shell moves itself in, then execs it: same pid), or as is. */
export function inCpuGroup(dir: string | null, command: string, args: readonly string[]): [string, string[]] {
  return dir === null ? [command, [...args]] : ['sh', ['-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', dir, command, ...args]];
}

/** The command that runs `command args...` on `cpus` only (taskset execs it: same pid), or as is. */
export function onCpus(cpus: readonly number[] | null, command: string, args: readonly string[]): [string, string[]] {
  return cpus === null ? [command, [...args]] : ['taskset', ['--cpu-list', cpus.join(','), command, ...args]];
}

/** Pins every thread of process `pid` to `cpus`; threads it starts later inherit that. */
export function pinProcess(pid: number, cpus: readonly number[]): void {
  const result = spawnSync('taskset', ['--all-tasks', '--cpu-list', '--pid', cpus.join(','), String(pid)], { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`taskset could not pin process ${pid} to CPU ${cpus.join(',')}: ${result.stderr || result.error?.message}`);
}

/** Whether `command --version` runs: the command is installed and on the PATH. */
export function installed(command: string): boolean {
  return spawnSync(command, ['--version'], { stdio: 'ignore' }).error === undefined;
}
