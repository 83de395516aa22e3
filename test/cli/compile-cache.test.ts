/**
 * `npm run compile-cache`: compiles every module of src/ into the compile cache and runs none.
 * Its parts in-process, then the command on a copy of the checkout, followed by a real start that
 * must strip nothing (read from Node's own log of its cache, pinned Node 24).
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { join } from 'node:path';
import { compileWithoutRunning, sourceFiles, USAGE } from '../../src/cli/compile-cache.ts';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE } from '../../src/cli/exit-codes.ts';
import { assertNothingStripped, checkoutCopy, startMain, tempDir } from '../support/main-process.ts';

test('compileWithoutRunning compiles modules and their imports without evaluating any', async (t) => {
  const dir = tempDir(t, 'pets-compile-');
  const marker = join(dir, 'evaluated');
  writeFileSync(join(dir, 'side-effect.ts'), `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, '');\nexport const value: number = 1;\n`);
  writeFileSync(join(dir, 'entry.ts'), `import { value } from './side-effect.ts';\nif (value === 1) throw new Error('evaluated');\n`);
  await compileWithoutRunning([join(dir, 'entry.ts')]);
  assert.equal(existsSync(marker), false, 'no module body ran');
});

test('compileWithoutRunning throws what stops a module from compiling: a syntax error, an import that does not resolve', async (t) => {
  const dir = tempDir(t, 'pets-compile-');
  writeFileSync(join(dir, 'broken.ts'), 'export const x: = 1;\n');
  await assert.rejects(compileWithoutRunning([join(dir, 'broken.ts')]), (error: Error) => !error.message.includes('compileCacheRootImportsNothingByThisName'));
  writeFileSync(join(dir, 'lost.ts'), "import './nowhere.ts';\n");
  await assert.rejects(compileWithoutRunning([join(dir, 'lost.ts')]), { code: 'ERR_MODULE_NOT_FOUND' });
});

test('sourceFiles lists every .ts and .js file of a folder and its subfolders, sorted, without .d.ts', (t) => {
  const dir = tempDir(t, 'pets-compile-');
  mkdirSync(join(dir, 'a'));
  for (const name of ['b.ts', 'a/c.js', 'a/d.d.ts', 'e.json', 'a/f.ts']) writeFileSync(join(dir, name), '');
  assert.deepEqual(sourceFiles(dir), ['a/c.js', 'a/f.ts', 'b.ts'].map((name) => join(dir, name)));
});

const checkout = (t: TestContext) => checkoutCopy(t, 'pets-compile-');

function command(dir: string, args: string[] = [], env: Record<string, string> = {}) {
  return spawnSync(process.execPath, [join(dir, 'src/cli/compile-cache.ts'), ...args], { cwd: dir, env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' });
}

test('the command fills the private cache of npm start with every module of src/, runs none of them, and a start then strips nothing, not even on its first write', async (t) => {
  const dir = checkout(t);
  const folder = join(dir, 'node_modules/.cache/animal-adoption-store');
  const result = command(dir);
  assert.equal(result.status, EXIT_OK, result.stderr);
  assert.equal(result.stderr, '');
  const modules = sourceFiles(join(dir, 'src')).length;
  assert.match(result.stdout, new RegExp(`^Compiled ${modules} modules of src/ into ${folder}/v24\\.[^/\\n]+\\n$`));
  assert.equal(statSync(folder).mode & 0o777, 0o700, 'private, as start.js makes it');
  assert.deepEqual(readdirSync(dir).sort(), ['node_modules', 'package.json', 'src'], 'main.ts did not run: no data/ folder, no database');

  const database = join(dir, 'pets.db');
  const keys = spawnSync(process.execPath, [join(dir, 'src/cli/keys.ts'), 'create', '--plan', 'pro', '--scopes', 'pets:read,pets:write', '--create-database'], { env: { PATH: process.env.PATH ?? '', APP_ENV: 'production', DATABASE_PATH: database }, encoding: 'utf8' });
  assert.equal(keys.status, 0, keys.stderr);
  const headers = { Authorization: `Bearer ${keys.stdout.trim()}`, 'Content-Type': 'application/json' };
  const server = await startMain({ APP_ENV: 'production', DATABASE_PATH: database, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' }, join(dir, 'src/start.js'));
  t.after(() => server.child.kill('SIGKILL'));
  assert.equal((await fetch(`${server.url}/v1/pets`, { headers })).status, 200);
  const created = await fetch(`${server.url}/v1/pets`, { method: 'POST', headers, body: JSON.stringify({ name: 'Rex', categoryId: 1 }) });
  assert.equal(created.status, 201, await created.text());
  server.child.kill('SIGTERM');
  assert.deepEqual(await once(server.child, 'exit'), [0, null]);
  const log = server.output().stderr;
  assertNothingStripped(log, 'src/main.ts');
  assertNothingStripped(log, 'src/api/pets/handlers.ts');
});

test('the command exits 1 with one line when the cache is off or a module does not compile, and 2 with its usage when given an argument', (t) => {
  const off = checkout(t);
  mkdirSync(join(off, 'node_modules'));
  // A file where the folder should be: mkdir fails even for root, as on a read-only checkout.
  writeFileSync(join(off, 'node_modules/.cache'), '');
  const refused = command(off);
  assert.equal(refused.status, EXIT_FAILURE);
  assert.equal(refused.stdout, '');
  assert.match(refused.stderr, /^compile-cache: the compile cache is off \(\w+\) for \S+\n$/);

  const broken = checkout(t);
  writeFileSync(join(broken, 'src/lib/broken.ts'), 'export const x: = 1;\n');
  const failed = command(broken);
  assert.equal(failed.status, EXIT_FAILURE);
  assert.equal(failed.stdout, '');
  assert.match(failed.stderr, /^compile-cache: [^\n]+\n$/);

  const usage = command(broken, ['--now']);
  assert.equal(usage.status, EXIT_USAGE);
  assert.equal(usage.stderr, USAGE);
});
