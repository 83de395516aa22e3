/**
 * The two servers under test as child processes of the bench, and what Linux tells about them:
 * resident memory from /proc/<pid>/status, CPU time from /proc/<pid>/stat, and the whole
 * machine's CPU time from /proc/stat (so that load from other processes can be reported).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { inCpuGroup, onCpus, readProcStat, type CpuTimes } from './cpu.ts';

/** Linux reports CPU times in clock ticks of 1/100 s (USER_HZ is 100 on every mainstream arch). */
export const TICKS_PER_SECOND = 100;

export interface StartOptions {
  /** A short name used in messages: `service` or `baseline`. */
  name: string;
  /** Arguments to `process.execPath`: node options, then the script and its arguments. */
  args: string[];
  env: Record<string, string>;
  /** The child must print its listening line within this time. */
  timeoutMs: number;
  /** The only CPUs it may run on (taskset), or null for any. */
  cpus?: readonly number[] | null;
  /** The cgroup whose CPU quota it runs under (`--cpu-quota`), or null for none. */
  cpuGroup?: string | null;
}

export interface ServerProcess {
  name: string;
  pid: number;
  /** `http://127.0.0.1:<port>`, from the child's `{"event":"listening","url":...}` line. */
  url: string;
  /** performance.now() just before the spawn. */
  spawnedAt: number;
  /** Bytes and lines the child has written to stdout so far (the access log, for the service). */
  stdout(): { bytes: number; lines: number };
  /** The last few KiB of its stderr, for error messages. */
  stderrTail(): string;
  /** Whether it has exited, and how. */
  exited(): { code: number | null; signal: NodeJS.Signals | null } | null;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

/**
 * Spawns `process.execPath args...` (on `cpus` only, when given) with stdout piped and drained by this process, as a log
 * collector would, and resolves once the child has printed its listening line.
 */
export function startServer({ name, args, env, timeoutMs, cpus = null, cpuGroup = null }: StartOptions): Promise<ServerProcess> {
  const [command, commandArgs] = inCpuGroup(cpuGroup, ...onCpus(cpus, process.execPath, args));
  const spawnedAt = performance.now();
  const child: ChildProcess = spawn(command, commandArgs, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let bytes = 0;
  let lines = 0;
  let head = '';
  let stderr = '';
  let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  // 'close', not 'exit': by then stdout has been read to its end, so the counts are final.
  const exitedPromise = new Promise<void>((resolve) => {
    child.once('close', (code, signal) => {
      exit = { code, signal };
      resolve();
    });
  });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-4096);
  });

  return new Promise<ServerProcess>((resolve, reject) => {
    let listening = false;
    const timer = setTimeout(() => fail(new Error(`${name} did not print its listening line within ${timeoutMs} ms`)), timeoutMs);
    function fail(error: Error): void {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${error.message}${stderr ? `\n${name} stderr:\n${stderr}` : ''}`));
    }
    child.once('error', fail);
    child.once('exit', (code, signal) => {
      if (!listening) fail(new Error(`${name} exited before listening (code ${code}, signal ${signal})`));
    });
    child.stdout!.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines++;
      if (listening) return;
      head += chunk.toString('utf8');
      const url = findListeningUrl(head);
      if (url === null) {
        if (head.length > 65_536) fail(new Error(`${name} printed 64 KiB without a listening line`));
        return;
      }
      listening = true;
      head = '';
      clearTimeout(timer);
      resolve({
        name,
        pid: child.pid!,
        url,
        spawnedAt,
        stdout: () => ({ bytes, lines }),
        stderrTail: () => stderr,
        exited: () => exit,
        async stop(graceMs = 15_000) {
          if (exit === null) {
            child.kill('SIGTERM');
            const kill = setTimeout(() => child.kill('SIGKILL'), graceMs);
            await exitedPromise;
            clearTimeout(kill);
          }
          return exit!.code;
        },
      });
    });
  });
}

/** The `url` of the first complete `{"event":"listening",...}` JSON line in `text`, if any. */
export function findListeningUrl(text: string): string | null {
  for (const line of text.split('\n').slice(0, -1)) {
    try {
      const event = JSON.parse(line) as { event?: unknown; url?: unknown };
      if (event.event === 'listening' && typeof event.url === 'string') return event.url;
    } catch {
      // Not JSON: some other output before the listening line.
    }
  }
  return null;
}

export interface HttpAnswer {
  status: number;
  /** Raw header names and values in the order and case the server sent them. */
  rawHeaders: string[];
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request on a fresh connection, bounded by `timeoutMs`. */
export function fetchOnce(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {},
): Promise<HttpAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, agent: false, timeout: options.timeoutMs ?? 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, rawHeaders: res.rawHeaders, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} in time`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * Repeats `GET url` (with `headers`) until it answers 200, every `intervalMs`, and returns that
 * answer and the time from the server's spawn to it: the bench's "start to first 200".
 */
export async function firstOk(server: ServerProcess, path: string, headers: Record<string, string>, timeoutMs: number, intervalMs = 2): Promise<{ answer: HttpAnswer; startToFirstOkMs: number }> {
  const deadline = performance.now() + timeoutMs;
  let last = 'no answer';
  for (;;) {
    try {
      const answer = await fetchOnce(server.url + path, { headers, timeoutMs: Math.max(100, deadline - performance.now()) });
      if (answer.status === 200) return { answer, startToFirstOkMs: performance.now() - server.spawnedAt };
      last = `status ${answer.status}: ${answer.body.slice(0, 200)}`;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    if (performance.now() > deadline) throw new Error(`${server.name}: no 200 for GET ${path} within ${timeoutMs} ms (last: ${last})`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Resident memory now and its peak so far (VmRSS, VmHWM), in bytes; null once the process is gone. */
export function readMemory(pid: number): { rss: number; peak: number } | null {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN) * 1024;
  return { rss: kib('VmRSS'), peak: kib('VmHWM') };
}

/** CPU time (user + system) the process has used, all its threads, in clock ticks; NaN once it is gone. */
export function readCpuTicks(pid: number): number {
  const fields = readStatFields(`/proc/${pid}/stat`);
  return fields === null ? Number.NaN : Number(fields[11]) + Number(fields[12]);
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
  const stat = readProcStat();
  const all = stat.get('cpu')!;
  let kernelThreads = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    const fields = readStatFields(`/proc/${entry}/stat`);
    // Kernel threads are kthreadd (pid 2) and its children; null: gone meanwhile.
    if (fields !== null && (entry === '2' || fields[1] === '2')) kernelThreads += Number(fields[11]) + Number(fields[12]);
  }
  return { busy: all.busy, kernel: all.irqs + kernelThreads, stat };
}

/**
 * Cores used by other processes (and taken by the hypervisor, steal) over the next `windowMs`:
 * the machine's busy time less the kernel's and less `ownPids` and this process.
 */
export async function otherLoad(ownPids: readonly number[], windowMs: number): Promise<number> {
  const own = () => ownPids.reduce((sum, pid) => sum + (readCpuTicks(pid) || 0), 0);
  const machine0 = readMachineTicks();
  const own0 = own();
  const self0 = process.cpuUsage();
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, windowMs));
  const machine1 = readMachineTicks();
  const selfTicks = (((cpu) => cpu.user + cpu.system)(process.cpuUsage(self0)) / 1e6) * TICKS_PER_SECOND;
  const ticks = machine1.busy - machine0.busy - (machine1.kernel - machine0.kernel) - (own() - own0) - selfTicks;
  return Math.max(0, ticks / TICKS_PER_SECOND / ((performance.now() - started) / 1000));
}
