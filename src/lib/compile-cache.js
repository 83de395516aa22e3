// @ts-check
/**
 * Node's module compile cache in a folder of the service's own. It keeps, per module,
 * the text Node's type stripper made of a `.ts` file and V8's compiled code for it, keyed by the
 * source's hash and Node's version: a start whose sources have not changed loads no stripper and
 * compiles nothing. Plain JavaScript, because it must run before the first `.ts` file is loaded
 * (src/start.js).
 *
 * Only a private folder is used: the cached code is run as if it were the source, so another
 * account that could write there could run code as the service. A missing folder is created 0700;
 * a folder that is not a directory of this account's, or that other accounts can read or enter,
 * is not used. The cache is an optimisation only: whatever goes wrong, the start goes on without it.
 */
// Not ES imports: their views of Node's modules read every export (http/access-log.ts says more).
const module = process.getBuiltinModule('node:module');
const { lstatSync, mkdirSync } = process.getBuiltinModule('node:fs');

/**
 * The service's own cache folder, in the checkout: where start.js and `npm run compile-cache` keep
 * the cache unless NODE_COMPILE_CACHE names another.
 */
export const SERVICE_CACHE_FOLDER = process.getBuiltinModule('node:url').fileURLToPath(new URL('../../node_modules/.cache/animal-adoption-store', import.meta.url));

/** Mode of a compile cache folder this creates, and the only bits one it uses may have. */
export const CACHE_FOLDER_MODE = 0o700;

/**
 * @typedef {object} CompileCacheOutcome
 * @property {string | null} directory The folder now in use (Node's own, when NODE_COMPILE_CACHE
 *   was set, which wins), or null when the cache is off.
 * @property {string | null} reason Why it is off: an errno code, `not private`, or Node's message.
 */

/**
 * @typedef {object} NodeModuleCache What this uses of `node:module`.
 * @property {(directory: string) => { status: number, directory?: string, message?: string }} enableCompileCache
 * @property {() => string | undefined} getCompileCacheDir
 */

/**
 * Turns the compile cache on in `directory` (created 0700 with its missing parents) when that
 * folder is private to this account, unless NODE_COMPILE_CACHE has already turned it on elsewhere.
 * Sets NODE_COMPILE_CACHE in `env` too: worker threads (WORKERS) get the environment, not the
 * cache, and without it each would strip every module again (a start with WORKERS=2 on one core:
 * 414 -> 200 ms to first 200). Never throws.
 * @param {string} directory
 * @param {NodeModuleCache} node `node:module`; injected so that tests do not turn the cache on
 *   in their own process.
 * @param {Record<string, string | undefined>} env
 * @returns {CompileCacheOutcome}
 */
export function enablePrivateCompileCache(directory, node = module, env = process.env) {
  const chosen = node.getCompileCacheDir();
  if (chosen !== undefined) return { directory: chosen, reason: null };
  try {
    mkdirSync(directory, { recursive: true, mode: CACHE_FOLDER_MODE });
    const folder = lstatSync(directory);
    const ownedHere = typeof process.getuid !== 'function' || folder.uid === process.getuid();
    if (!folder.isDirectory() || !ownedHere || (folder.mode & 0o077) !== 0) return { directory: null, reason: 'not private' };
  } catch (error) {
    return { directory: null, reason: /** @type {NodeJS.ErrnoException} */ (error).code ?? 'error' };
  }
  const result = node.enableCompileCache(directory);
  const { ENABLED, ALREADY_ENABLED } = module.constants.compileCacheStatus;
  if (result.status !== ENABLED && result.status !== ALREADY_ENABLED) return { directory: null, reason: result.message ?? 'disabled' };
  env.NODE_COMPILE_CACHE = directory;
  return { directory: result.directory ?? directory, reason: null };
}
