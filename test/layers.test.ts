/**
 * The layers of src/, from the bottom up, and the rule that imports only point down: a file may
 * import from its own layer or a lower one, never from a higher one. A file that needs something
 * from a higher layer is in the wrong place, or the thing it needs is. docs/architecture.md
 * explains each layer; this list is the one place where their order is declared.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

export const LAYERS: readonly (readonly string[])[] = [
  ['config.ts', 'clock.ts', 'lib'],
  ['http'],
  ['keys', 'limits'],
  ['storage'],
  ['api'],
  ['pipeline'],
  ['ops'],
  ['service'],
  ['cluster'],
  ['cli'],
  ['main.ts', 'writer.ts', 'start.js', 'compile-cache.js'],
];

const SRC = join(import.meta.dirname, '..', 'src');

/** The layer of a path relative to src/ (its first segment), or -1 for one that no layer names. */
function layerOf(path: string): number {
  const top = path.split('/')[0]!;
  return LAYERS.findIndex((layer) => layer.includes(top));
}

function sourceFiles(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|js)$/.test(entry.name) ? [path] : [];
  });
}

/**
 * Every relative module a file names: static and type imports, re-exports, import() and new URL()
 * (a worker thread's entry). A URL of something that is not a module (a folder) is not an import.
 */
function relativeImports(text: string): string[] {
  const found = text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|new URL\(\s*)(['"])(\.{1,2}\/[^'"]+\.(?:ts|js))\1/g);
  return [...found].map((match) => match[2]!);
}

const files = sourceFiles(SRC).map((path) => relative(SRC, path));

test('every file of src/ belongs to a declared layer', () => {
  const orphans = files.filter((file) => layerOf(file) === -1);
  assert.deepEqual(orphans, [], 'add the folder to LAYERS, in its place');
});

test('imports only point down the layers (or stay in their own)', () => {
  const upward: string[] = [];
  for (const file of files) {
    const own = layerOf(file);
    for (const specifier of relativeImports(readFileSync(join(SRC, file), 'utf8'))) {
      const target = normalize(join(dirname(file), specifier));
      if (target.startsWith('..')) {
        upward.push(`${file} imports ${specifier}, outside src/`);
        continue;
      }
      if (layerOf(target) > own) upward.push(`${file} -> ${target}`);
    }
  }
  assert.deepEqual(upward, []);
});

test('the layer check is not a rubber stamp: it sees an upward import', () => {
  assert.deepEqual(relativeImports("import type { X } from '../pipeline/pipeline.ts';\nconst w = new URL('./worker.ts', import.meta.url);"), [
    '../pipeline/pipeline.ts',
    './worker.ts',
  ]);
  assert.ok(layerOf('storage/pets.ts') < layerOf('api/schemas.ts'));
  assert.equal(layerOf('nowhere/file.ts'), -1);
});
