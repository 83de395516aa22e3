/**
 * Real server processes (`node src/main.ts`) for tests of several instances on one database:
 * each on port 0, its URL read from the `listening` line it logs, killed when the test file ends.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface Instance {
  child: ChildProcess;
  url: string;
  /** Lines the instance wrote on stderr. */
  stderr: string[];
  /** Lines the instance wrote on stdout (its log). */
  stdout: string[];
  /** SIGTERM, and resolves with the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Starts `src/main.ts` with `env` (plus PATH and PORT=0) and resolves once it listens. `args`
 * replace the command's arguments (the production command: `npm start`'s node options and `src/start.js`).
 */
export async function startInstance(env: Record<string, string>, args: readonly string[] = ['src/main.ts']): Promise<Instance> {
  const child = spawn(process.execPath, [...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr: string[] = [];
  const stdout: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const lines = createInterface({ input: child.stdout! });
  lines.on('line', (line) => stdout.push(line));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('the instance did not start within 15 s')), 15_000);
    child.once('exit', (code) => reject(new Error(`the instance exited with ${code} before listening: ${stderr.join(' ')}`)));
    lines.on('line', (line) => {
      const match = /"event":"listening","url":"([^"]+)"/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
  });
  return {
    child, url, stderr, stdout,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number | null];
      return code;
    },
  };
}

/** Kills every instance still running (for `after`). */
export function killAll(instances: readonly Instance[]): void {
  for (const { child } of instances) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/**
 * The warnings and errors the instances logged (at most the last 10 of each), for a failure's
 * message: a 503 says only "unavailable", the log says why (a timeout, a deadlock, a lost
 * connection), by code, never SQL.
 */
export function problemsLogged(instances: readonly Instance[]): string {
  return instances.map(({ url, stdout }, index) => {
    const problems = stdout.filter((line) => /"level":"(warn|error)"/.test(line)).slice(-10);
    return `instance ${index} (${url}): ${problems.length === 0 ? 'no warning or error logged' : `\n  ${problems.join('\n  ')}`}`;
  }).join('\n');
}

/** Throws an error whose message is `error`'s followed by what the instances logged (`error` its cause). */
export function withProblemsLogged(instances: readonly Instance[]): (error: unknown) => never {
  return (error) => {
    throw new Error(`${error instanceof Error ? error.message : String(error)}\n${problemsLogged(instances)}`, { cause: error });
  };
}
