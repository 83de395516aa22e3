// @ts-check
/**
 * The imports between files of src/ resolved by a module hook, without Node's default resolver.
 *
 * A start resolves about 230 of them before its first answer (one an import statement, not one a
 * module), and the default resolver checks each on disk: it converts the URL to a path, `stat`s
 * it, takes its `realpath`, then reads the `package.json` above it for the file's format. Measured
 * on the 2-core development machine (2026-12-06, alternating starts pinned to one core, the compile
 * cache warm, 31 each): 87 ms to the first answer at the median instead of 111, a bare `node:http`
 * server 75; about 7 ms of the difference is the format given here rather than looked up.
 *
 * Between two files of src/, what the default resolver checks cannot differ from what this
 * assumes: every import names its file with its extension (TypeScript refuses one that does not,
 * `allowImportingTsExtensions`), src/ holds no symbolic link and imports no folder, and the
 * package.json above it says `"type": "module"`, so a `.ts` file is `module-typescript` and a `.js`
 * file `module`. test/lib/direct-imports.test.ts checks, for every import of src/, that this
 * answers the URL and the format Node's own resolver gives. What does differ: an import of a file
 * that does not exist fails when the file is read (`ENOENT`), not when it is resolved
 * (`ERR_MODULE_NOT_FOUND`). Anything else (a package, a `node:` module, a specifier with a query,
 * an import from outside src/ or leading out of it) goes to Node's resolver as before.
 *
 * Plain JavaScript, like lib/compile-cache.js: it must run before the first `.ts` file is
 * resolved (src/start.js). `module.registerHooks` is Node 24's synchronous, in-thread hook (its
 * stability "active development"; the project runs on the Node it pins). The hooks of a thread are
 * its own: worker threads resolve with Node's resolver.
 */
// Not an ES import, whose view of node:module reads every export once.
const module = process.getBuiltinModule('node:module');

/** @typedef {Pick<typeof module, 'registerHooks'>} ModuleHooks What this uses of `node:module`. */

/** src/, as a `file:` URL ending in `/`. */
export const SOURCE_FOLDER = new URL('../', import.meta.url).href;

/**
 * @typedef {object} DirectResolution
 * @property {string} url The file's URL, as Node's resolver would give it.
 * @property {'module' | 'module-typescript'} format How Node reads it, as package.json says.
 */

/**
 * Where `specifier`, imported by the module at `parentURL`, is: a file of `folder` named with its
 * extension, or null to leave it to Node's resolver.
 * @param {string} specifier
 * @param {string | undefined} parentURL
 * @param {string} folder A `file:` URL ending in `/`.
 * @returns {DirectResolution | null}
 */
export function directResolution(specifier, parentURL, folder) {
  if (parentURL === undefined || !parentURL.startsWith(folder)) return null;
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return null;
  // A query, a fragment or an escape is Node's to interpret (and to refuse, for an escaped `/`).
  if (/[?#%\\]/.test(specifier)) return null;
  const format = specifier.endsWith('.ts') ? 'module-typescript' : specifier.endsWith('.js') ? 'module' : null;
  if (format === null) return null;
  const url = new URL(specifier, parentURL).href;
  return url.startsWith(folder) ? { url, format } : null;
}

/**
 * From now on, in this thread, the imports between files of `folder` (src/ unless a test names
 * another) are resolved by `directResolution`.
 * @param {string} folder
 * @param {ModuleHooks} node `node:module`; injected so that tests can see the hook.
 */
export function resolveImportsDirectly(folder = SOURCE_FOLDER, node = module) {
  node.registerHooks({
    resolve(specifier, context, nextResolve) {
      const found = directResolution(specifier, context.parentURL, folder);
      return found === null ? nextResolve(specifier, context) : { ...found, shortCircuit: true };
    },
  });
}
