// @ts-check
/**
 * The entry of `npm start`: turns on Node's compile cache, then runs src/main.ts.
 *
 * Node strips the types of each `.ts` file with a WebAssembly stripper that it loads for the first
 * one: about 30 ms, and V8 then optimises that WebAssembly on the same core as the start. With the
 * compile cache, a start whose sources have not changed finds every module's stripped text and
 * compiled code on disk and loads no stripper: start to first 200 went from about 230 to about
 * 75 ms (docs/decisions/0006-compile-cache-entry-point.md). The cache must be on before the first `.ts` file is loaded, and
 * every static import of main.ts is loaded before its body runs: hence this file, in plain
 * JavaScript. `node src/main.ts` still works, only without the cache.
 *
 * The folder is node_modules/.cache/animal-adoption-store (private, see compile-cache.js);
 * NODE_COMPILE_CACHE=dir chooses another, NODE_DISABLE_COMPILE_CACHE=1 turns it off.
 */
import { flushCompileCache } from 'node:module';
import { fileURLToPath } from 'node:url';
import { enablePrivateCompileCache } from './compile-cache.js';

enablePrivateCompileCache(fileURLToPath(new URL('../node_modules/.cache/animal-adoption-store', import.meta.url)));
await import('./main.ts');
// Node writes the cache at exit; writing it now as well keeps it for a server that is killed
// (SIGKILL, out of memory). Free when nothing is new (about 0.05 ms); about 18 ms on a cold start.
flushCompileCache();
