/**
 * The service's command line as `npm start` runs it, read from package.json, so that the bench
 * measures exactly that: the entry (src/start.js, with its compile cache) and the node options
 * set for the service (--max-semi-space-size, see docs/decisions/0007-semi-space-cap.md). Only the simple form is accepted,
 * `[exec] node [options] script`, without other shell syntax (`exec` makes the shell npm runs the
 * script in become node, so that npm's SIGTERM reaches the server): a start script that the bench
 * cannot copy exactly stops it rather than measuring something else.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The node options and the script of a `node [options] script` command, the script relative. */
export function parseStartScript(script: string): { nodeOptions: string[]; entry: string } {
  const words = script.trim().replace(/^exec\s+/, '').split(/\s+/);
  const entry = words.at(-1);
  if (words[0] !== 'node' || words.length < 2 || entry === undefined || entry.startsWith('-') || /["'$`&|;<>\\]/.test(script)) {
    throw new Error(`the start script is not of the form "[exec] node [options] script": ${script}`);
  }
  const nodeOptions = words.slice(1, -1);
  if (nodeOptions.some((option) => !option.startsWith('--'))) throw new Error(`the start script has arguments other than node options: ${script}`);
  return { nodeOptions, entry };
}

/** `npm start`'s node options and its entry as an absolute path, from ROOT/package.json. */
export function startCommand(root: string): { nodeOptions: string[]; entry: string } {
  const scripts = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  const { nodeOptions, entry } = parseStartScript(scripts.start ?? '');
  return { nodeOptions, entry: join(root, entry) };
}
