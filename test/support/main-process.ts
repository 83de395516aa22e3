/** src/main.ts run for real as a child process, and temporary folders for its files. */
import { spawn } from 'node:child_process';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const MAIN = new URL('../../src/main.ts', import.meta.url).pathname;

/** A fresh folder, removed when the test ends. */
export function tempDir(t: { after(fn: () => void): void }, prefix = 'pets-main-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Starts src/main.ts (or `script`, e.g. src/start.js; PORT=0 unless `env` says otherwise) and
 * resolves once it has logged the address it listens on.
 */
export async function startMain(env: Record<string, string>, script = MAIN) {
  const child = spawn(process.execPath, [script], { env: { PATH: process.env.PATH ?? '', PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
      const match = /"event":"listening","url":"([^"]+)"/.exec(stdout);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
  return { child, url, output: () => ({ stdout, stderr }) };
}

/** A copy of what a start needs (src/ and package.json) in a fresh folder, without node_modules. */
export function checkoutCopy(t: { after(fn: () => void): void }, prefix: string): string {
  const dir = tempDir(t, prefix);
  const root = new URL('../..', import.meta.url).pathname;
  cpSync(join(root, 'src'), join(dir, 'src'), { recursive: true });
  cpSync(join(root, 'package.json'), join(dir, 'package.json'));
  return dir;
}

/**
 * Node's log of its compile cache (`NODE_DEBUG_NATIVE=COMPILE_CACHE`, pinned Node 24) shows that
 * the process read `entry` (a path under src/) and every other module it loaded stripped from the
 * cache, and stripped none itself: it never loaded Node's type stripper.
 */
export function assertNothingStripped(log: string, entry: string): void {
  assert.match(log, new RegExp(`retrieving transpile cache for StrippedTypeScript \\S*/${entry.replaceAll('.', '\\.')}\\.\\.\\.success`), `${entry} was read from the cache`);
  const stripped = log.split('\n').filter((line) => line.includes('no transpile cache for'));
  assert.deepEqual(stripped, [], 'no module stripped');
}
