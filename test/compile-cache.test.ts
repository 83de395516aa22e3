/** The compile cache's folder (src/lib/compile-cache.js): private, or not used at all. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import module from 'node:module';
import { chmodSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CACHE_FOLDER_MODE, enablePrivateCompileCache } from '../src/lib/compile-cache.js';
import { tempDir } from './support/main-process.ts';

const { ENABLED, FAILED } = module.constants.compileCacheStatus;

/** `node:module` as far as the function uses it, recording where the cache was turned on. */
function fakeNode(answer: (directory: string) => { status: number; directory?: string; message?: string } = (directory) => ({ status: ENABLED, directory }), chosen?: string) {
  const enabled: string[] = [];
  return {
    enabled,
    node: {
      getCompileCacheDir: () => chosen,
      enableCompileCache: (directory: string) => {
        enabled.push(directory);
        return answer(directory);
      },
    },
  };
}

test('a missing cache folder is created 0700, with its missing parents, and the cache turned on there', (t) => {
  const directory = join(tempDir(t), 'node_modules', '.cache', 'store');
  const { node, enabled } = fakeNode();
  const env: Record<string, string | undefined> = {};
  assert.deepEqual(enablePrivateCompileCache(directory, node, env), { directory, reason: null });
  assert.deepEqual(enabled, [directory]);
  // Worker threads (WORKERS) inherit the environment, not the cache.
  assert.equal(env.NODE_COMPILE_CACHE, directory);
  assert.equal(statSync(directory).mode & 0o777, CACHE_FOLDER_MODE);
  assert.equal(statSync(join(directory, '..')).mode & 0o777, CACHE_FOLDER_MODE);
});

test('an existing private folder is used as it is', (t) => {
  const directory = join(tempDir(t), 'cache');
  mkdirSync(directory, { mode: 0o700 });
  const { node, enabled } = fakeNode();
  assert.equal(enablePrivateCompileCache(directory, node, {}).directory, directory);
  assert.deepEqual(enabled, [directory]);
});

test('a folder that other accounts can read, enter or write is not used, and not changed', (t) => {
  for (const mode of [0o755, 0o750, 0o701, 0o777]) {
    const directory = join(tempDir(t), 'cache');
    mkdirSync(directory);
    chmodSync(directory, mode);
    const { node, enabled } = fakeNode();
    const env: Record<string, string | undefined> = {};
    assert.deepEqual(enablePrivateCompileCache(directory, node, env), { directory: null, reason: 'not private' }, mode.toString(8));
    assert.deepEqual(enabled, []);
    assert.deepEqual(env, {}, 'worker threads are not sent there either');
    assert.equal(statSync(directory).mode & 0o777, mode);
  }
});

test('a cache folder that cannot be created leaves the cache off, without throwing', (t) => {
  const dir = tempDir(t);
  // A file where a folder should be: mkdir fails even for root, unlike a read-only folder.
  writeFileSync(join(dir, '.cache'), '');
  const { node, enabled } = fakeNode();
  const env: Record<string, string | undefined> = {};
  const outcome = enablePrivateCompileCache(join(dir, '.cache', 'store'), node, env);
  assert.deepEqual(env, {});
  assert.equal(outcome.directory, null);
  assert.match(outcome.reason!, /^E[A-Z]+$/);
  assert.deepEqual(enabled, []);
});

test("Node's refusal (e.g. NODE_DISABLE_COMPILE_CACHE=1) leaves the cache off, with Node's reason", (t) => {
  const directory = join(tempDir(t), 'cache');
  const { node } = fakeNode(() => ({ status: FAILED, message: 'Cannot create cache directory' }));
  const env: Record<string, string | undefined> = {};
  assert.deepEqual(enablePrivateCompileCache(directory, node, env), { directory: null, reason: 'Cannot create cache directory' });
  assert.deepEqual(env, {});
});

test('a cache already turned on by NODE_COMPILE_CACHE wins: no folder of ours is made', (t) => {
  const directory = join(tempDir(t), 'cache');
  const { node, enabled } = fakeNode(undefined, '/somewhere/else');
  const env = { NODE_COMPILE_CACHE: '/somewhere/else' };
  assert.deepEqual(enablePrivateCompileCache(directory, node, env), { directory: '/somewhere/else', reason: null });
  assert.deepEqual(env, { NODE_COMPILE_CACHE: '/somewhere/else' });
  assert.deepEqual(enabled, []);
  assert.throws(() => statSync(directory), { code: 'ENOENT' });
});
