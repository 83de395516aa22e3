/**
 * Reading the deployment recipes of docs/deployment/ as data, so that tests run their own lines
 * rather than copies of them: the Dockerfile's instructions by stage, the systemd unit's keys, and
 * the commands of a page's console blocks. Also starting a server the way a recipe starts it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = new URL('../..', import.meta.url).pathname;

export type Instruction = { name: string; args: string };
export type Stage = { from: string; alias: string | undefined; instructions: Instruction[] };

/** The Dockerfile's instructions by stage, comments dropped, continuation lines joined as the builder joins them (the backslash and the line break removed). */
export function dockerfileStages(text: string): Stage[] {
  const logical: string[] = [];
  let pending = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line) || (pending === '' && line.trim() === '')) continue;
    if (line.endsWith('\\')) pending += line.slice(0, -1);
    else {
      logical.push(pending + line);
      pending = '';
    }
  }
  const stages: Stage[] = [];
  for (const entry of logical) {
    const [, name, args] = /^(\w+)\s+([\s\S]*)$/.exec(entry.trim()) ?? [];
    if (name === undefined || args === undefined) throw new Error(`not an instruction: ${entry}`);
    if (name === 'FROM') {
      const [from, as, alias] = args.split(/\s+/);
      stages.push({ from: from!, alias: as?.toUpperCase() === 'AS' ? alias : undefined, instructions: [] });
    } else {
      const stage = stages.at(-1);
      if (stage === undefined) throw new Error(`${name} before FROM`);
      stage.instructions.push({ name, args });
    }
  }
  return stages;
}

/** The variables of ENV instructions (the `KEY=value KEY=value` form, unquoted values). */
export function dockerfileEnv(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { name, args } of stage.instructions) {
    if (name !== 'ENV') continue;
    for (const pair of args.split(/\s+/)) {
      const [key, value] = pair.split('=', 2);
      if (key === undefined || value === undefined) throw new Error(`ENV not in KEY=value form: ${args}`);
      env[key] = value;
    }
  }
  return env;
}

/** The values of `key=` lines of a systemd unit, in order. */
export function unitValues(unit: string, key: string): string[] {
  return unit.split('\n').filter((line) => line.startsWith(`${key}=`)).map((line) => line.slice(key.length + 1));
}

/** One command of a console block, with the answer shown under it. */
export type Entry = { prompt: '$' | '#'; command: string; output: string; blankAfter: boolean };
/** A console block of a page: where it is, and its entries. */
export type Block = { start: number; end: number; entries: Entry[] };

/**
 * The console blocks of `markdown` (fenced ```console at the start of a line), in order: each
 * command (a line starting with the prompt `$ `, or `# ` for root, with its `\\` continuation
 * lines) and the output shown under it.
 */
export function consoleBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  for (const match of markdown.matchAll(/^```console\n([\s\S]*?)^```$/gm)) {
    const start = match.index + '```console\n'.length;
    const body = match[1]!.replace(/\n$/, '');
    const entries: Entry[] = [];
    let continued = false;
    let lines: string[] = [];
    const close = () => {
      const entry = entries.at(-1);
      if (entry === undefined) return;
      entry.blankAfter = lines.at(-1) === '';
      entry.output = lines.join('\n').replace(/\n+$/, '');
    };
    for (const line of body.split('\n')) {
      const entry = entries.at(-1);
      if (continued && entry !== undefined) entry.command += `\n${line}`;
      else if (/^[$#] /.test(line)) {
        close();
        lines = [];
        entries.push({ prompt: line[0] as '$' | '#', command: line.slice(2), output: '', blankAfter: false });
      } else lines.push(line);
      continued = line.endsWith('\\');
    }
    close();
    blocks.push({ start, end: start + body.length, entries });
  }
  return blocks;
}

/** The commands of every console block of a Markdown page, with the output shown under each. */
export function consoleCommands(markdown: string): { command: string; output: string }[] {
  return consoleBlocks(markdown).flatMap(({ entries }) => entries.map(({ command, output }) => ({ command, output })));
}

export function readRoot(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8');
}

export type Listening = { child: ChildProcess; port: number; stdout: () => string; stderr: () => string; stop: () => Promise<number | null> };

/** Starts `command args` and resolves once it logs the address it listens on. */
export async function startListening(command: string, args: string[], options: { cwd: string; env: Record<string, string>; uid?: number; gid?: number }): Promise<Listening> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, uid: options.uid, gid: options.gid, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (text: string) => {
      stdout += text;
      const match = /"event":"listening","url":"http:\/\/[^"]+:(\d+)"/.exec(stdout);
      if (match) resolve(Number(match[1]));
    });
    void exited.then((code) => reject(new Error(`${command} exited ${code} before listening: ${stderr}`)));
  });
  return {
    child, port, stdout: () => stdout, stderr: () => stderr,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
}
