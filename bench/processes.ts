/**
 * The servers under test as child processes of the bench, reached over HTTP, and their resident
 * memory from /proc/<pid>/status (their CPU time is cpu.ts's).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { inCpuGroup, onCpus } from './cpu.ts';

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
  /** SIGTERM, then SIGKILL after 15 s; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL at once, whether it is still running or not: an interrupted run. */
  kill(): void;
}

/**
 * Spawns `process.execPath args...` with stdout piped and drained by this process, as a log
 * collector would, and resolves once the child has printed its listening line.
 */
export function startServer({ name, args, env, timeoutMs, cpus = null, cpuGroup = null }: StartOptions): Promise<ServerProcess> {
  const [command, commandArgs] = inCpuGroup(cpuGroup, ...onCpus(cpus, process.execPath, args));
  const spawnedAt = performance.now();
  const child = spawn(command, commandArgs, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let [bytes, lines, head, stderr] = [0, 0, '', ''];
  let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  // 'close', not 'exit': by then stdout has been read to its end, so the counts are final.
  const closed = new Promise<void>((resolve) => child.once('close', (code, signal) => resolve(void (exit = { code, signal }))));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4096)));
  return new Promise<ServerProcess>((resolve, reject) => {
    let url: string | null = null;
    const timer = setTimeout(() => fail(`did not print its listening line within ${timeoutMs} ms`), timeoutMs);
    function fail(why: string): void {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${name} ${why}${stderr ? `\n${name} stderr:\n${stderr}` : ''}`));
    }
    child.once('error', (error) => fail(error.message));
    child.once('exit', (code, signal) => url === null && fail(`exited before listening (code ${code}, signal ${signal})`));
    child.stdout.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines++;
      if (url !== null) return;
      head += chunk.toString('utf8');
      url = findListeningUrl(head);
      if (url === null) return void (head.length > 65_536 && fail('printed 64 KiB without a listening line'));
      clearTimeout(timer);
      resolve({
        name, pid: child.pid!, url, spawnedAt,
        stdout: () => ({ bytes, lines }),
        stderrTail: () => stderr,
        exited: () => exit,
        kill: () => void child.kill('SIGKILL'),
        async stop() {
          if (exit === null) {
            child.kill('SIGTERM');
            const kill = setTimeout(() => child.kill('SIGKILL'), 15_000);
            await closed;
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
export function fetchOnce(url: string, options: { method?: string; headers?: Record<string, string>; body?: string; timeoutMs?: number } = {}): Promise<HttpAnswer> {
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
 * Repeats `GET path` (with `headers`) every 2 ms until it answers 200, and returns that answer
 * and the time from the server's spawn to it: the bench's "start to first 200".
 */
export async function firstOk(server: ServerProcess, path: string, headers: Record<string, string>, timeoutMs: number): Promise<{ answer: HttpAnswer; startToFirstOkMs: number }> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    let last: string;
    try {
      const answer = await fetchOnce(server.url + path, { headers, timeoutMs: Math.max(100, deadline - performance.now()) });
      if (answer.status === 200) return { answer, startToFirstOkMs: performance.now() - server.spawnedAt };
      last = `status ${answer.status}: ${answer.body.slice(0, 200)}`;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    if (performance.now() > deadline) throw new Error(`${server.name}: no 200 for GET ${path} within ${timeoutMs} ms (last: ${last})`);
    await new Promise((resolve) => setTimeout(resolve, 2));
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
