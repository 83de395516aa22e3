/**
 * `npm run --silent compile-cache`: fills the compile cache that `npm start` uses (src/start.js:
 * node_modules/.cache/animal-adoption-store, or NODE_COMPILE_CACHE) with every module of src/,
 * compiled and never run. A start then strips and compiles nothing, not even the modules a first
 * write or a first delivery loads later, so it never loads Node's TypeScript stripper (about
 * 30 ms of a start, and about 14 MiB the process keeps for its life). Made for what cannot fill
 * the cache by running: a container image, whose code (and cache) its service cannot write, or
 * a fresh install before its first start.
 *
 * How nothing runs: every module is imported from one root that also imports a name no module
 * exports. Node fetches and compiles the whole graph first, then links it, and the link fails
 * before any module's body is evaluated; the cache keeps what was compiled.
 *
 * Node keeps one cache per user id (its folder's name ends with the uid): run this as the account
 * the service runs as. Exit codes as the other commands: 0 done, 1 the cache is off or a module
 * does not compile, 2 bad arguments. One line on stdout when done, one on stderr otherwise.
 */
import { flushCompileCache, getCompileCacheDir } from 'node:module';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { enablePrivateCompileCache, SERVICE_CACHE_FOLDER } from '../lib/compile-cache.js';
import { EXIT_FAILURE, EXIT_OK, EXIT_USAGE, type Output } from './exit-codes.ts';

export const USAGE = `Usage: npm run --silent compile-cache

Compiles every module of src/ into the compile cache of npm start (node_modules/.cache/
animal-adoption-store, or NODE_COMPILE_CACHE when set), without running any, so that the next
start strips and compiles nothing. Run it as the account the server runs as: the cache is kept
per user. Takes no arguments.

Exit codes: 0 done, 1 failed (the cache is off, a module does not compile), 2 bad arguments.
`;

/** The name the root imports and no module exports: its link error is the expected end. */
const NO_SUCH_EXPORT = 'compileCacheRootImportsNothingByThisName';

/** Every `.ts` and `.js` file under `folder`, sorted, as absolute paths. */
export function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { recursive: true, encoding: 'utf8' })
    .filter((name) => /\.(ts|js)$/.test(name) && !name.endsWith('.d.ts'))
    .map((name) => join(folder, name))
    .sort();
}

/**
 * Fetches and compiles every file of `files` and their imports, evaluating none: resolves when the
 * graph failed to link on the root's own missing name, as planned; throws any other error (a
 * module that does not parse, an import that does not resolve).
 */
export async function compileWithoutRunning(files: string[]): Promise<void> {
  const root = [
    ...files.map((file) => `import ${JSON.stringify(pathToFileURL(file).href)};`),
    `import { ${NO_SUCH_EXPORT} } from 'node:module';`,
  ].join('\n');
  try {
    await import(`data:text/javascript,${encodeURIComponent(root)}`);
  } catch (error) {
    if (error instanceof SyntaxError && error.message.includes(NO_SUCH_EXPORT)) return;
    throw error;
  }
  throw new Error('the modules were evaluated: the root linked although it imports a name no module exports');
}

export interface CompileCacheIo {
  stdout: Output;
  stderr: Output;
}

export async function runCompileCacheCli(args: string[], io: CompileCacheIo, folder = SERVICE_CACHE_FOLDER): Promise<number> {
  if (args.length > 0) {
    io.stderr.write(USAGE);
    return EXIT_USAGE;
  }
  const cache = enablePrivateCompileCache(folder);
  if (cache.directory === null) {
    io.stderr.write(`compile-cache: the compile cache is off (${cache.reason}) for ${folder}\n`);
    return EXIT_FAILURE;
  }
  // The modules this command loaded before the cache was on (itself, lib/compile-cache.js,
  // exit-codes.ts) are not compiled again, unless NODE_COMPILE_CACHE turned the cache on first; no
  // server reads them from the cache (start.js loads lib/compile-cache.js before turning it on).
  const files = sourceFiles(fileURLToPath(new URL('..', import.meta.url)));
  try {
    await compileWithoutRunning(files);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    io.stderr.write(`compile-cache: ${message.split('\n')[0]}\n`);
    return EXIT_FAILURE;
  }
  flushCompileCache();
  io.stdout.write(`Compiled ${files.length} modules of src/ into ${getCompileCacheDir() ?? cache.directory}\n`);
  return EXIT_OK;
}

if (import.meta.main) {
  process.exitCode = await runCompileCacheCli(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr });
}
