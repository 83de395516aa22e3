/**
 * The layers of src/, from the bottom up, and the rules that keep imports pointing down:
 *
 * - a file imports from its own layer or a lower one, never from a higher one;
 * - inside a layer's folder, the files at its top are what its subfolders build on: they never
 *   import from a subfolder, but for a file's own parts (`cli/keys.ts` and `cli/keys/`);
 * - no files import each other in a loop, type imports included;
 * - around src/: test/support/ builds on src/, bench/ on both, and src/ on neither.
 *
 * A file that needs something from a higher layer is in the wrong place, or the thing it needs
 * is. docs/architecture.md explains each layer; this list is the one place where their order is
 * declared. Every kind of import is counted, and each count has a floor: a pattern weakened by
 * mistake would see fewer, and fail here rather than pass on what it no longer sees.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, normalize, relative } from 'node:path';

export const LAYERS: readonly (readonly string[])[] = [
  ['config.ts', 'clock.ts', 'lib'],
  ['http'],
  ['keys', 'limits', 'webhooks'],
  ['storage'],
  ['api'],
  ['pipeline'],
  ['ops'],
  ['service'],
  ['cluster'],
  ['cli'],
  ['main.ts', 'writer.ts', 'start.js'],
];

/** The parts of the repository whose imports are read, bottom first: each may import its own and lower ones. */
const PARTS = ['src', 'test/support', 'bench'] as const;

/** What the imports of src/, test/support/ and bench/ must at least hold, by kind (about nine tenths of what they held when set). */
const FLOORS = { static: 345, type: 200, dynamic: 12, url: 4 } as const;

const ROOT = join(import.meta.dirname, '..');

/** The layer of a path relative to src/ (its first segment), or -1 for one that no layer names. */
function layerOf(path: string): number {
  const top = path.split('/')[0]!;
  return LAYERS.findIndex((layer) => layer.includes(top));
}

function sourceFiles(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) return entry.name === 'results' ? [] : sourceFiles(path);
    return /\.(ts|js)$/.test(entry.name) && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

type Kind = keyof typeof FLOORS;

/**
 * Every relative module a file names, with the kind of import: static imports and re-exports,
 * type imports, import() and new URL() (a worker thread's entry). A URL of something that is not
 * a module (a folder) is not an import.
 */
function relativeImports(text: string): { specifier: string; kind: Kind }[] {
  const found = text.matchAll(/(\bimport\s+type\b[^'"]*?\bfrom\s*|\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|new URL\(\s*)(['"])(\.{1,2}\/[^'"]+\.(?:ts|js))\2/g);
  return [...found].map((match) => {
    const lead = match[1]!;
    const kind: Kind = /^import\s+type\b/.test(lead) ? 'type' : lead.startsWith('new URL') ? 'url' : /^import\s*\(/.test(lead) ? 'dynamic' : 'static';
    return { specifier: match[3]!, kind };
  });
}

interface Edge {
  from: string;
  to: string;
  kind: Kind;
}

/** The imports of every file of PARTS, as paths relative to the repository. */
function importGraph(): Edge[] {
  return PARTS.flatMap((part) => sourceFiles(part)).flatMap((file) =>
    relativeImports(readFileSync(join(ROOT, file), 'utf8')).map(({ specifier, kind }) => ({ from: file, to: normalize(join(dirname(file), specifier)), kind })),
  );
}

/** The part of the repository a path is in (its longest prefix in PARTS), or -1 for another (a test). */
function partOf(path: string): number {
  let found = -1;
  PARTS.forEach((part, index) => {
    if (path === part || path.startsWith(`${part}/`)) found = index;
  });
  return found;
}

/** `import` is up the layers of src/: to a higher layer, or out of src/. */
function upTheLayers(edge: Edge): boolean {
  if (!edge.to.startsWith('src/')) return true;
  return layerOf(relative('src', edge.to)) > layerOf(relative('src', edge.from));
}

/**
 * Up inside a folder: from a file at a folder's top (`api/idempotent-writes.ts`) into one of its
 * subfolders (`api/pets/json.ts`), unless the subfolder holds that file's own parts
 * (`cli/keys.ts` into `cli/keys/`). Files at the top of src/ are ordered by LAYERS instead.
 */
function upInsideAFolder({ from, to }: Edge): boolean {
  const folder = dirname(from);
  if (folder === 'src' || folder === '.' || !to.startsWith(`${folder}/`)) return false;
  const below = relative(folder, to).split('/');
  return below.length > 1 && below[0] !== basename(from).replace(/\.(ts|js)$/, '');
}

/** The import loops of a graph: each strongly connected set of two files or more (Tarjan). */
function loops(edges: readonly Pick<Edge, 'from' | 'to'>[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file)!);
    stack.push(file);
    onStack.add(file);
    for (const to of next.get(file) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(file, Math.min(low.get(file)!, low.get(to)!));
      } else if (onStack.has(to)) {
        low.set(file, Math.min(low.get(file)!, index.get(to)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const loop: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      loop.push(member);
    } while (member !== file);
    if (loop.length > 1) found.push(loop.sort());
  };
  for (const file of next.keys()) if (!index.has(file)) visit(file);
  return found;
}

const graph = importGraph();
const inSrc = graph.filter((edge) => edge.from.startsWith('src/'));

test('every file of src/ belongs to a declared layer', () => {
  const orphans = sourceFiles('src').map((file) => relative('src', file)).filter((file) => layerOf(file) === -1);
  assert.deepEqual(orphans, [], 'add the folder to LAYERS, in its place');
});

test('imports only point down the layers (or stay in their own)', () => {
  assert.deepEqual(inSrc.filter(upTheLayers).map(({ from, to }) => `${from} -> ${to}`), []);
});

test('inside a layer\'s folder, no file at its top imports from its subfolders', () => {
  assert.deepEqual(inSrc.filter(upInsideAFolder).map(({ from, to }) => `${from} -> ${to}`), []);
});

test('no files import each other in a loop, type imports included, in src/, test/support/ or bench/', () => {
  assert.deepEqual(loops(graph), []);
});

test('test/support/ builds on src/, bench/ on both, and src/ on neither; none imports a test', () => {
  const wrong = graph.filter(({ from, to }) => partOf(to) === -1 || partOf(to) > partOf(from));
  assert.deepEqual(wrong.map(({ from, to }) => `${from} -> ${to}`), []);
});

test('every kind of import is seen, at least as many as the floor of each', (t) => {
  const seen = Object.fromEntries(Object.keys(FLOORS).map((kind) => [kind, graph.filter((edge) => edge.kind === kind).length]));
  for (const [kind, floor] of Object.entries(FLOORS)) assert.ok(seen[kind]! >= floor, `${kind}: ${seen[kind]} imports seen, the floor is ${floor}`);
  t.diagnostic(`imports seen: ${JSON.stringify(seen)}, ${graph.length} in all`);
});

test('the checks are not rubber stamps: each sees what it is there to refuse', () => {
  assert.deepEqual(relativeImports("import type { X } from '../pipeline/pipeline.ts';\nexport { y } from './y.ts';\nconst w = new URL('./worker.ts', import.meta.url);\nawait import('./late.ts');"), [
    { specifier: '../pipeline/pipeline.ts', kind: 'type' },
    { specifier: './y.ts', kind: 'static' },
    { specifier: './worker.ts', kind: 'url' },
    { specifier: './late.ts', kind: 'dynamic' },
  ]);
  assert.ok(layerOf('storage/pets.ts') < layerOf('api/schemas.ts'));
  assert.equal(layerOf('nowhere/file.ts'), -1);
  assert.ok(upTheLayers({ from: 'src/storage/pets.ts', to: 'src/api/schemas.ts', kind: 'type' }));
  assert.ok(upInsideAFolder({ from: 'src/api/idempotent-writes.ts', to: 'src/api/pets/json.ts', kind: 'static' }));
  assert.ok(!upInsideAFolder({ from: 'src/cli/keys.ts', to: 'src/cli/keys/arguments.ts', kind: 'static' }));
  assert.ok(!upInsideAFolder({ from: 'src/api/pets/json.ts', to: 'src/api/operations.ts', kind: 'static' }));
  assert.ok(!upInsideAFolder({ from: 'src/config.ts', to: 'src/lib/ip-address.ts', kind: 'static' }));
  assert.deepEqual(loops([{ from: 'a', to: 'b' }, { from: 'b', to: 'c' }, { from: 'c', to: 'a' }, { from: 'c', to: 'd' }]), [['a', 'b', 'c']]);
  assert.equal(partOf('bench/run.ts'), 2);
  assert.equal(partOf('test/support/postgres.ts'), 1);
  assert.equal(partOf('test/layers.test.ts'), -1);
});
