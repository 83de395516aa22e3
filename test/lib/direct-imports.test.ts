/**
 * The imports between files of src/ resolved without Node's default resolver (src/lib/direct-imports.js):
 * the rule on its own, then against Node's own resolver for every import of src/, then in a real
 * start through src/start.js.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { sourceFiles } from '../../src/cli/compile-cache.ts';
import { directResolution, resolveImportsDirectly, SOURCE_FOLDER } from '../../src/lib/direct-imports.js';
import { startMain, tempDir } from '../support/main-process.ts';

const FOLDER = 'file:///srv/pets/src/';
const PARENT = `${FOLDER}api/pets/handlers.ts`;

test('a relative import of a .ts or .js file, from a module of the folder to a module of the folder, is that file, read as TypeScript or JavaScript', () => {
  assert.deepEqual(directResolution('./json.ts', PARENT, FOLDER), { url: `${FOLDER}api/pets/json.ts`, format: 'module-typescript' });
  assert.deepEqual(directResolution('../../lib/compile-cache.js', PARENT, FOLDER), { url: `${FOLDER}lib/compile-cache.js`, format: 'module' });
  assert.deepEqual(directResolution('./main.ts', `${FOLDER}start.js`, FOLDER), { url: `${FOLDER}main.ts`, format: 'module-typescript' });
});

test('everything else is left to Node: packages, node: modules, other extensions, queries, escapes, parents elsewhere, and paths out of the folder', () => {
  for (const specifier of ['postgres', 'node:fs', '#internal', '/srv/pets/src/main.ts', 'file:///srv/pets/src/main.ts', './data.json', './folder', './folder/',
    './json.ts?v=1', './json.ts#part', './js%6Fn.ts', './a%2Fb.ts', './a\\b.ts', '../../../node_modules/postgres/src/index.js', '../../../test/x.ts']) {
    assert.equal(directResolution(specifier, PARENT, FOLDER), null, specifier);
  }
  assert.equal(directResolution('./json.ts', undefined, FOLDER), null, 'the entry point');
  assert.equal(directResolution('./json.ts', 'file:///srv/pets/test/x.ts', FOLDER), null, 'a parent outside the folder');
  assert.equal(directResolution('./json.ts', 'file:///srv/pets/src-old/x.ts', 'file:///srv/pets/src/'), null, 'a folder whose name starts the same');
  assert.equal(directResolution('./json.ts', 'data:text/javascript,import "./json.ts"', FOLDER), null);
});

test('the hook answers what the rule finds, final, and passes everything else to the next resolver unchanged', () => {
  type Resolve = (specifier: string, context: { parentURL?: string }, next: (specifier: string, context: { parentURL?: string }) => unknown) => unknown;
  const registered: { resolve?: Resolve }[] = [];
  resolveImportsDirectly(FOLDER, { registerHooks: (hooks: { resolve?: Resolve }) => (registered.push(hooks), { deregister() {} }) } as never);
  assert.equal(registered.length, 1);
  const resolve = registered[0]!.resolve!;
  const passed: [string, { parentURL?: string }][] = [];
  const next = (specifier: string, context: { parentURL?: string }) => (passed.push([specifier, context]), { url: 'node:fs' });
  assert.deepEqual(resolve('./json.ts', { parentURL: PARENT }, next), { url: `${FOLDER}api/pets/json.ts`, format: 'module-typescript', shortCircuit: true });
  assert.deepEqual(passed, []);
  const context = { parentURL: PARENT };
  assert.deepEqual(resolve('node:fs', context, next), { url: 'node:fs' });
  assert.deepEqual(passed, [['node:fs', context]]);
});

/**
 * Run in a child: Node's own resolver on every relative import of src/, static, type-only and
 * dynamic alike. Its load hook reads each module of src/ as Node would (recording the format), then
 * hands Node a stand-in that only imports, statically, every relative module the file names:
 * the whole graph is resolved, and nothing of the service runs.
 */
const RESOLVE_EVERY_IMPORT = `
import { registerHooks } from 'node:module';
import { readFileSync } from 'node:fs';
const [folder, ...files] = process.argv.slice(2);
const edges = [];
const formats = {};
const NAMED = /(?:\\bfrom\\s*|\\bimport\\s*\\(\\s*|\\bimport\\s+)(['"])(\\.{1,2}\\/[^'"]+)\\1/g;
registerHooks({
  resolve(specifier, context, nextResolve) {
    const found = nextResolve(specifier, context);
    if (context.parentURL?.startsWith(folder)) edges.push({ specifier, parent: context.parentURL, url: found.url });
    return found;
  },
  load(url, context, nextLoad) {
    if (!url.startsWith(folder)) return nextLoad(url, context);
    formats[url] = nextLoad(url, context).format;
    const named = [...readFileSync(new URL(url), 'utf8').matchAll(NAMED)].map((match) => match[2]);
    return { format: 'module', source: named.map((specifier) => 'import ' + JSON.stringify(specifier) + ';').join('\\n'), shortCircuit: true };
  },
});
await import('data:text/javascript,' + encodeURIComponent(files.map((url) => 'import ' + JSON.stringify(url) + ';').join('\\n')));
process.stdout.write(JSON.stringify({ edges, formats, files: files.length }));
`;

test('for every import between files of src/, static, type-only or dynamic, the rule finds the file and the format that Node\'s own resolver finds', (t) => {
  const script = join(tempDir(t, 'pets-imports-'), 'resolve-every-import.mjs');
  writeFileSync(script, RESOLVE_EVERY_IMPORT);
  // The files npm run compile-cache compiles: every module of src/.
  const modules = sourceFiles(fileURLToPath(SOURCE_FOLDER)).map((path) => pathToFileURL(path).href);
  const child = spawnSync(process.execPath, [script, SOURCE_FOLDER, ...modules], { encoding: 'utf8' });
  assert.equal(child.status, 0, child.stderr);
  const { edges, formats, files } = JSON.parse(child.stdout) as { edges: { specifier: string; parent: string; url: string }[]; formats: Record<string, string>; files: number };
  t.diagnostic(`${edges.length} imports of ${files} files`);
  // 757 when written: the rule is checked on all of them, or the child saw nothing.
  assert.ok(edges.length > 650, `${edges.length} imports`);
  assert.ok(Object.keys(formats).length === files && files > 150, `${files} files`);
  assert.ok(edges.some((edge) => edge.parent.endsWith('/src/service/service.ts') && edge.specifier === '../api/pets/creations.ts'), 'a dynamic import is among them');
  for (const { specifier, parent, url } of edges) {
    assert.deepEqual(directResolution(specifier, parent, SOURCE_FOLDER), { url, format: formats[url] }, `${specifier} from ${parent}`);
  }
});

test('a start through src/start.js resolves every import of src/ after its own two with the rule: none reaches Node\'s resolver', async (t) => {
  const dir = tempDir(t, 'pets-imports-');
  // Registered before start.js runs, so called only for what the rule leaves to Node (hooks
  // registered later run first).
  const probe = join(dir, 'probe.mjs');
  writeFileSync(probe, [
    "import { registerHooks } from 'node:module';",
    'const relative = [];',
    "registerHooks({ resolve(specifier, context, next) { if (context.parentURL?.includes('/src/') && specifier.startsWith('.')) relative.push(specifier); return next(specifier, context); } });",
    "process.on('exit', () => process.stderr.write(`resolved by Node: ${JSON.stringify(relative)}\\n`));",
  ].join('\n'));
  const server = await startMain({ APP_ENV: 'development', DATABASE_PATH: join(dir, 'pets.db'), WRITER: 'inline', NODE_OPTIONS: `--import=${probe}` }, new URL('../../src/start.js', import.meta.url).pathname);
  t.after(() => server.child.kill('SIGKILL'));
  const key = /^ {2}(\S+)$/m.exec(server.output().stderr)![1]!;
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  assert.equal((await fetch(`${server.url}/v1/pets?limit=20`, { headers })).status, 200);
  // A create loads the write paths by import(): resolved by the rule as well.
  assert.equal((await fetch(`${server.url}/v1/pets`, { method: 'POST', headers, body: JSON.stringify({ name: 'Rex', categoryId: 1 }) })).status, 201);
  server.child.kill('SIGTERM');
  assert.deepEqual(await once(server.child, 'exit'), [0, null]);
  // start.js's own two, resolved before it registers the hook (and seen: the probe works).
  const relative = JSON.parse(/^resolved by Node: (.*)$/m.exec(server.output().stderr)![1]!) as string[];
  assert.deepEqual(relative, ['./lib/compile-cache.js', './lib/direct-imports.js']);
});
