// @ts-check
/**
 * The entry of `npm start`: turns on Node's compile cache and the resolve hook of the imports
 * between files of src/ (lib/direct-imports.js), then runs src/main.ts.
 *
 * Node strips the types of each `.ts` file with a WebAssembly stripper that it loads for the first
 * one: about 30 ms, and V8 then optimises that WebAssembly on the same core as the start. With the
 * compile cache, a start whose sources have not changed finds every module's stripped text and
 * compiled code on disk and loads no stripper: start to first 200 went from about 230 to about
 * 75 ms (docs/decisions/0006-compile-cache-entry-point.md). The cache must be on before the first `.ts` file is loaded, and
 * every static import of main.ts is loaded before its body runs: hence this file, in plain
 * JavaScript. `node src/main.ts` still works, only without the cache.
 *
 * The folder is node_modules/.cache/animal-adoption-store (private, see lib/compile-cache.js);
 * NODE_COMPILE_CACHE=dir chooses another, NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
// Checked before anything else is loaded: the pinned Node 24 is node_modules/.bin/node, and the
// system's may be older (npm runs on it). An older Node would fail on the first TypeScript file
// with a stack trace; this says what to run instead, in one line.
const major = Number(process.versions.node.split('.')[0]);
if (major !== 24) {
  process.stderr.write(`the service needs Node 24 (this is Node ${process.versions.node}); run it with node_modules/.bin/node, which npm install brings, or put a Node 24 of your own first on the PATH\n`);
  process.exit(1);
}
const { flushCompileCache } = process.getBuiltinModule('node:module');
const { enablePrivateCompileCache, SERVICE_CACHE_FOLDER } = await import('./lib/compile-cache.js');
const { resolveImportsDirectly } = await import('./lib/direct-imports.js');

enablePrivateCompileCache(SERVICE_CACHE_FOLDER);
// The imports between files of src/ found without Node's checks on disk: about a fifth of a start
// (lib/direct-imports.js).
resolveImportsDirectly();
await import('./main.ts');
// Node writes the cache at exit; writing it now as well keeps it for a server that is killed
// (SIGKILL, out of memory). Free when nothing is new (about 0.05 ms); about 18 ms on a cold start.
flushCompileCache();
