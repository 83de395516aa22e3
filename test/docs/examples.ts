/**
 * The console examples of the README (both walk-throughs, back to back, and the key printed at the
 * first start) and of docs/keys-and-limits.md (the keys command), run for real: each command of a
 * block is run in one bash session, as a reader would type it, against a server started as the
 * README says (`npm start`, on a database of a temporary folder and a free port), and its answer
 * is written back in the page's format. test/docs/examples.test.ts compares that with the pages,
 * after masking what differs from run to run (keys, the ids of keys and accounts, request ids,
 * times), each masked value numbered by its first appearance, so that a value the page repeats
 * must be repeated by the run too.
 *
 * Run it to see the real answers, or to write them into the pages after a change of behaviour:
 *
 *   node_modules/.bin/node test/docs/examples.ts            # prints the blocks as run
 *   node_modules/.bin/node test/docs/examples.ts --write    # writes them into the pages
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { consoleBlocks, ROOT, startListening, type Block, type Entry, type Listening } from '../support/recipes.ts';

/** A block's text as the page writes it. */
export function renderBlock(entries: Entry[]): string {
  return entries.map(({ prompt, command, output, blankAfter }, index) => {
    const text = `${prompt} ${command}${output === '' ? '' : `\n${output}`}`;
    return index < entries.length - 1 && blankAfter ? `${text}\n` : text;
  }).join('\n');
}

/**
 * The values that differ from run to run, by kind: a key (whole, or cut short with `…`), the ids of
 * keys and accounts, which are numbered by their first appearance (a page that shows one key's id
 * twice must show the same id twice); request ids and times, which are not (two keys created in
 * the same second in one run may be a second apart in another).
 */
const VARYING: [kind: string, pattern: RegExp, numbered: boolean][] = [
  ['key', /pk_(?:test|live)_[A-Za-z0-9_-]+…?/g, true],
  ['key id', /key_[0-9a-f]{16}/g, true],
  ['account', /acct_[0-9a-f]{16}/g, true],
  ['request id', /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, false],
  ['time', /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{3})?Z/g, false],
  ['unix time', /(?<=^X-RateLimit-Reset: )\d+$/gm, false],
  // Seconds until a bucket is full again: the day bucket's move with every 0.09 s the run takes.
  ['seconds', /(?<=^RateLimit: .*;t=)\d+/gm, false],
];

/** `text` with each varying value replaced by its kind (and, for ids and keys, the order of its first appearance). */
export function mask(text: string): string {
  let masked = text;
  for (const [kind, pattern, numbered] of VARYING) {
    const seen = new Map<string, number>();
    masked = masked.replace(pattern, (value) => {
      if (!numbered) return `<${kind}>`;
      if (!seen.has(value)) seen.set(value, seen.size + 1);
      return `<${kind} ${seen.get(value)}>`;
    });
  }
  return masked;
}

/** A key cut short as the pages show it: its prefix, four characters and `…`. */
export function shorten(text: string): string {
  return text.replace(/(pk_(?:test|live)_[A-Za-z0-9_-]{4})[A-Za-z0-9_-]{45}(?![A-Za-z0-9_-])/g, '$1…');
}

/**
 * Pairs the varying values the page shows in an answer with those of the real answer, in order,
 * so that a later command the page writes with a page's value (`rotate key_babb…`) is run with
 * the real one. Answers whose values differ in number teach nothing: the comparison shows them.
 */
function learn(page: string, real: string, values: Map<string, string>): void {
  for (const [, pattern] of VARYING.slice(0, 3)) {
    const shown = page.match(pattern) ?? [];
    const got = real.match(pattern) ?? [];
    if (shown.length === got.length) shown.forEach((value, index) => values.set(value, got[index]!));
  }
}

/**
 * The minute bucket's remaining tokens as the page shows them, when the real ones are more by no
 * more than the bucket refilled while the run went on (one token a second on the free plan): a
 * run on a busy machine may take over a second to send what a reader sends in less. Any other
 * difference stays, for the comparison to show.
 */
export function allowRefill(real: string, page: string, elapsedMs: number): string {
  const refilled = Math.floor(elapsedMs / 1000);
  return real.replace(/^(X-RateLimit-Remaining: |RateLimit: "minute";r=)(\d+)/gm, (line, name: string, tokens: string) => {
    const shown = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(\\d+)`, 'm').exec(page)?.[1];
    const extra = Number(tokens) - Number(shown);
    return shown !== undefined && extra > 0 && extra <= refilled ? `${name}${shown}` : line;
  });
}

/** An answer of `curl -si` cut as the page cuts it: the headers it does not show become `...`. */
function cutHeaders(real: string, page: string): string {
  const [head, ...rest] = real.split('\n\n');
  if (!/^HTTP\/1\.1 \d{3}/.test(head!)) return real;
  const shown = new Set([...page.matchAll(/^([A-Za-z0-9-]+): /gm)].map((match) => match[1]!.toLowerCase()));
  const [status, ...headers] = head!.split('\n');
  const lines = [status!];
  for (const header of headers) {
    if (shown.has(header.slice(0, header.indexOf(':')).toLowerCase())) lines.push(header);
    else if (lines.at(-1) !== '...') lines.push('...');
  }
  const body = rest.join('\n\n');
  return body === '' ? lines.join('\n') : `${lines.join('\n')}\n${body}`;
}

/** One bash session, fed a command at a time; its stdout and stderr as one stream. */
class Shell {
  private readonly child: ChildProcessWithoutNullStreams;
  private buffer = '';
  private count = 0;
  private waiting: (() => void) | undefined;

  constructor(cwd: string, env: Record<string, string>) {
    this.child = spawn('bash', ['--noprofile', '--norc'], { cwd, env });
    this.child.stdout.setEncoding('utf8').on('data', (text: string) => {
      this.buffer += text;
      this.waiting?.();
    });
    this.child.stdin.write('exec 2>&1\n');
  }

  /** Runs `command` in the session (its variables stay for the next one); resolves with its output. */
  async run(command: string, timeoutMs = 60_000): Promise<string> {
    const marker = `--- end of command ${++this.count} ---`;
    // A group, not a subshell: assignments and exports stay. Its stdin is empty, so that no
    // command reads the next ones.
    this.child.stdin.write(`{\n${command}\n} < /dev/null\nprintf '\\n%s\\n' '${marker}'\n`);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const at = this.buffer.indexOf(`\n${marker}\n`);
      if (at >= 0) {
        const output = this.buffer.slice(0, at);
        this.buffer = this.buffer.slice(at + marker.length + 2);
        return output.replace(/\r\n/g, '\n').replace(/\n+$/, '');
      }
      if (Date.now() > deadline) throw new Error(`no end of "${command}" within ${timeoutMs} ms; so far: ${this.buffer}`);
      await new Promise<void>((resolve) => {
        this.waiting = resolve;
        setTimeout(resolve, 1000);
      });
    }
  }

  close(): void {
    this.child.stdin.end();
  }
}

/** Runs a block's commands in `shell` and returns its entries as run, in the page's format. */
async function runBlock(block: Block, shell: Shell, values: Map<string, string>, port: number | null, started: number): Promise<Entry[]> {
  const ran: Entry[] = [];
  for (const entry of block.entries) {
    let command = entry.command;
    for (const [shown, real] of values) command = command.replaceAll(shown, real);
    const typed = port === null ? command : command.replaceAll('127.0.0.1:8080', `127.0.0.1:${port}`);
    const real = await shell.run(typed);
    learn(entry.output, real, values);
    ran.push({ ...entry, command, output: allowRefill(cutHeaders(real, entry.output), entry.output, performance.now() - started) });
  }
  return ran;
}

/** A page's examples: its text, and each of its blocks as the page shows it and as run. */
export type PageRun = { page: string; text: string; blocks: { shown: Block; ran: Entry[] }[]; printed: Printed | null };
/** Output the page shows as an indented block, not as a command's: where, and as run. */
export type Printed = { start: number; end: number; shown: string; ran: string };

/** A folder for the run's database, outside the checkout. */
function scratch(): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'pets-examples-'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

const baseEnv = (dir: string, database: string) => ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? dir, DATABASE_PATH: join(dir, database) });

/**
 * The README's walk-throughs, back to back, against a server started as the Quick start says
 * (`npm start` on an empty database: it prints the development key on stderr).
 */
export async function runReadme(): Promise<PageRun> {
  const text = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const { dir, remove } = scratch();
  let server: Listening | undefined;
  const shell = new Shell(ROOT, baseEnv(dir, 'development.db'));
  try {
    server = await startListening('npm', ['start'], { cwd: ROOT, env: { ...baseEnv(dir, 'development.db'), PORT: '0' } });
    // The Quick start shows that stderr as an indented block; its key is the walk-through's $KEY.
    const found = /^ {4}Created a free development API key.*\n\n {4}.*\S.*$/m.exec(text)!;
    const printed = { start: found.index, end: found.index + found[0].length, shown: found[0].replace(/^ {4}/gm, ''), ran: server.stderr().trim() };
    const values = new Map<string, string>();
    learn(printed.shown, printed.ran, values);
    const blocks = consoleBlocks(text);
    const walkthroughs = blocks.filter((block) => block.entries.some(({ command }) => command.includes('127.0.0.1:8080/v1/')));
    const ran = [];
    const started = performance.now();
    for (const shown of walkthroughs) ran.push({ shown, ran: await runBlock(shown, shell, values, server.port, started) });
    return { page: 'README.md', text, blocks: ran, printed };
  } finally {
    shell.close();
    await server?.stop();
    remove();
  }
}

/** The keys command's example of docs/keys-and-limits.md, on a new database. */
export async function runKeysPage(): Promise<PageRun> {
  const page = 'docs/keys-and-limits.md';
  const text = readFileSync(join(ROOT, page), 'utf8');
  const { dir, remove } = scratch();
  const shell = new Shell(ROOT, baseEnv(dir, 'production.db'));
  try {
    const shown = consoleBlocks(text).find((block) => block.entries.some(({ command }) => command.startsWith('npm run --silent keys -- rotate')))!;
    return { page, text, blocks: [{ shown, ran: await runBlock(shown, shell, new Map(), null, performance.now()) }], printed: null };
  } finally {
    shell.close();
    remove();
  }
}

/** The page's text with each example block replaced by its run, keys cut short. */
export function rewrite(run: PageRun): string {
  const parts = run.blocks.map(({ shown, ran }) => ({ start: shown.start, end: shown.end, text: renderBlock(ran) }));
  if (run.printed !== null) parts.push({ ...run.printed, text: run.printed.ran.replace(/^(?=.)/gm, '    ') });
  let text = run.text;
  for (const { start, end, text: part } of parts.sort((a, b) => b.start - a.start)) text = text.slice(0, start) + shorten(part) + text.slice(end);
  return text;
}

if (import.meta.main) {
  const write = process.argv.includes('--write');
  for (const run of [await runReadme(), await runKeysPage()]) {
    if (write) {
      writeFileSync(join(ROOT, run.page), rewrite(run));
      process.stdout.write(`wrote ${run.page}\n`);
    } else {
      for (const { ran } of run.blocks) process.stdout.write(`${run.page}:\n${shorten(renderBlock(ran))}\n\n`);
    }
  }
}
