/**
 * The cores of the machine: where the bench runs what (`taskset`, a cgroup for `--cpu-quota`),
 * and where their time went, from /proc: each core's busy share, each process's CPU time, the
 * kernel's, and that of the other processes of the machine (noise).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Linux reports CPU times in clock ticks of 1/100 s (USER_HZ is 100 on every mainstream arch). */
export const TICKS_PER_SECOND = 100;

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

/**
 * The share (0 to 1) of the time between two /proc/stat samples in which core `core` was busy;
 * NaN when the core is not in both samples or no tick passed between them.
 */
export function busyShare(before: Map<string, CpuTimes>, after: Map<string, CpuTimes>, core: number): number {
  const [start, end] = [before.get(`cpu${core}`), after.get(`cpu${core}`)];
  if (start === undefined || end === undefined || end.total === start.total) return Number.NaN;
  return (end.busy - start.busy) / (end.total - start.total);
}

/** The busy share of the busiest of `cores` between two samples (see busyShare). */
export function busiestShare(before: Map<string, CpuTimes>, after: Map<string, CpuTimes>, cores: readonly number[]): number {
  return cores.reduce((busiest, core) => Math.max(busiest, busyShare(before, after, core)), Number.NEGATIVE_INFINITY);
}

/**
 * The fields of a /proc/.../stat file after the parenthesised command name (which may contain
 * spaces): [0] is the state, [1] the parent's pid, [11] utime, [12] stime, [13] cutime and [14]
 * cstime (the time of children that exited and were waited for). null once it is gone.
 */
export function readStatFields(path: string): string[] | null {
  try {
    return readFileSync(path, 'utf8').split(') ')[1]!.split(' ');
  } catch {
    return null;
  }
}

/** CPU time (user + system) the process has used, all its threads, in clock ticks; NaN once it is gone. */
export function readCpuTicks(pid: number): number {
  const fields = readStatFields(`/proc/${pid}/stat`);
  return fields === null ? Number.NaN : Number(fields[11]) + Number(fields[12]);
}

/** The live processes whose parent is `pid`. */
export function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^[0-9]+$/.test(entry) && readStatFields(`/proc/${entry}/stat`)?.[1] === String(pid))
    .map(Number);
}

export interface MachineTicks {
  /** All cores busy (not idle, not iowait), steal included: clock ticks since boot. */
  busy: number;
  /** Of which the kernel's own work: interrupts, softirqs (loopback networking) and kernel threads (I/O). */
  kernel: number;
  /** The /proc/stat it was computed from, per core as well (`cpu0`, ...). */
  stat: Map<string, CpuTimes>;
}

/** Where the machine's CPU time went so far, from /proc/stat and the kernel threads' /proc/<pid>/stat. */
export function readMachineTicks(): MachineTicks {
  const stat = parseProcStat(readFileSync('/proc/stat', 'utf8'));
  // Kernel threads are kthreadd (pid 2) and its children; NaN: gone meanwhile.
  const kernelThreads = [2, ...childrenOf(2)].reduce((sum, pid) => sum + (readCpuTicks(pid) || 0), 0);
  const all = stat.get('cpu')!;
  return { busy: all.busy, kernel: all.irqs + kernelThreads, stat };
}

/**
 * Cores used by other processes (and taken by the hypervisor, steal) over the next `windowMs`:
 * the machine's busy time less the kernel's and less `ownPids` and this process.
 */
export async function otherLoad(ownPids: readonly number[], windowMs: number): Promise<number> {
  // NaN: gone meanwhile.
  const own = () => [...ownPids, process.pid].reduce((sum, pid) => sum + (readCpuTicks(pid) || 0), 0);
  const [machine0, own0, started] = [readMachineTicks(), own(), performance.now()];
  await new Promise((resolve) => setTimeout(resolve, windowMs));
  const machine1 = readMachineTicks();
  const ticks = machine1.busy - machine0.busy - (machine1.kernel - machine0.kernel) - (own() - own0);
  return Math.max(0, ticks / TICKS_PER_SECOND / ((performance.now() - started) / 1000));
}

/** A Linux CPU list such as `0-3,8,10-11` (as in Cpus_allowed_list), as the numbers it names. */
export function parseCpuList(text: string): number[] {
  const cpus = new Set<number>();
  for (const part of text.trim().split(',')) {
    const range = /^([0-9]+)(?:-([0-9]+))?$/.exec(part);
    if (range === null) throw new Error(`not a CPU list: ${JSON.stringify(text)}`);
    for (let cpu = Number(range[1]); cpu <= Number(range[2] ?? range[1]); cpu++) cpus.add(cpu);
  }
  return [...cpus].sort((a, b) => a - b);
}

/** The CPUs this process may run on (what `nproc` counts). */
export function allowedCpus(): number[] {
  const list = /^Cpus_allowed_list:\s*(\S+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
  if (list === null) throw new Error('no Cpus_allowed_list in /proc/self/status');
  return parseCpuList(list[1]!);
}

/** The cores that run the servers and those that run the load generator (and this process). */
export interface Pinning { server: number[]; generator: number[] }

/**
 * Where the servers and the generator run: the servers on the first `serverCores` CPUs this
 * process may use, the generator (and this process, which reads the service's log) on as many
 * of the next ones. When none is left they share the servers' cores, and `shared` says so: the
 * figures then measure the servers and their load generator together. null when not pinned.
 */
export function choosePinning(allowed: readonly number[], serverCores: number, options: { pin: boolean; tasksetFound: boolean }): { pinning: Pinning | null; note: string; shared: boolean } {
  const unpinned = (note: string) => ({ pinning: null, note, shared: true });
  if (!options.pin) return unpinned('not pinned (--no-pin)');
  if (allowed.length < 2) return unpinned(`not pinned: only ${allowed.length} core, which the servers and the generator share`);
  if (!options.tasksetFound) return unpinned('not pinned: taskset not found (apt-get install util-linux)');
  const server = allowed.slice(0, serverCores);
  const rest = allowed.slice(server.length, server.length + server.length);
  if (rest.length === 0) return { pinning: { server, generator: server }, note: `servers on CPU ${server.join(',')}, the generator SHARES them (no core left for it)`, shared: true };
  return { pinning: { server, generator: rest }, note: `servers on CPU ${server.join(',')}, generator on CPU ${rest.join(',')}`, shared: false };
}

/**
 * A cgroup v1 `cpu` group whose processes get `cores` cores' time between them (cfs_quota_us =
 * cores × cfs_period_us), as a container started with `--cpus` has: `--cpu-quota`. Needs the
 * right to make a group in /sys/fs/cgroup/cpu (root, on this machine).
 */
export function createCpuQuotaGroup(cores: number): { dir: string; remove(): void } {
  const dir = join('/sys/fs/cgroup/cpu', `pets-bench-${process.pid}`);
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
