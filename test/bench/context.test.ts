import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseStartScript, startCommand } from '../../bench/context.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

test('a start script "node [options] script" gives its node options and its script', () => {
  assert.deepEqual(parseStartScript('node src/start.js'), { nodeOptions: [], entry: 'src/start.js' });
  assert.deepEqual(parseStartScript(' node --max-semi-space-size=16  --foo src/start.js '), { nodeOptions: ['--max-semi-space-size=16', '--foo'], entry: 'src/start.js' });
  assert.deepEqual(parseStartScript('exec node --max-semi-space-size=8 src/start.js'), { nodeOptions: ['--max-semi-space-size=8'], entry: 'src/start.js' }, 'exec: npm\'s signal reaches node');
});

test('a start script the bench could not copy exactly stops it', () => {
  for (const script of ['', 'node', 'tsx src/main.ts', 'FOO=1 node src/start.js', 'node src/start.js --port 1', 'node src/a.js && node src/b.js', 'node "src/start.js"', 'node --x', 'exec', 'exec exec node src/start.js']) {
    assert.throws(() => parseStartScript(script), /start script/, script);
  }
});

test("the bench starts package.json's npm start, and the soak runs with the same node options", () => {
  const { nodeOptions, entry } = startCommand(ROOT);
  assert.equal(entry, join(ROOT, 'src', 'start.js'));
  const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  // The soak runs the service in its own process: it must have the service's heap settings.
  assert.deepEqual(parseStartScript(scripts.soak!).nodeOptions, nodeOptions);
});
