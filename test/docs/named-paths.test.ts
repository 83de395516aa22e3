/**
 * Every file of the repository that a page or a recipe names exists: the tests a recipe's comment
 * says check it, the source a page points a reader to. A renamed or removed file leaves no page
 * naming it, as `test/deployment/dockerfile.test.ts` once stayed in the Dockerfile after the test
 * had another name.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { markdownFiles, readRepoFile } from '../support/markdown.ts';
import { ROOT } from '../support/recipes.ts';

/** Files the pages name that a command writes, not the repository: a bench's result, a client's types. */
const WRITTEN_BY_COMMANDS = new Set(['bench/results/latest.json', 'src/pets-api.d.ts']);

/** The paths under test/, src/ and bench/ that `text` names, globs left out. */
function namedPaths(text: string): string[] {
  return [...text.matchAll(/(?<![\w./-])(?:test|src|bench)\/[\w./-]*[\w/]/g)].map((match) => match[0]).filter((path) => !path.includes('*'));
}

test('every test, source or bench file that a page or a recipe names exists', () => {
  const recipes = readdirSync(join(ROOT, 'docs', 'deployment')).map((name) => `docs/deployment/${name}`);
  const missing: string[] = [];
  for (const file of [...markdownFiles(), ...recipes]) {
    for (const path of namedPaths(readRepoFile(file))) {
      if (!WRITTEN_BY_COMMANDS.has(path) && !existsSync(join(ROOT, path))) missing.push(`${file}: ${path}`);
    }
  }
  assert.deepEqual(missing, []);
});

test('a path is read up to its end, not into the sentence around it', () => {
  assert.deepEqual(namedPaths('# test/deployment/recipes.test.ts lints it; see src/http/, and test/**/*.test.ts. (bench/run.ts)'), ['test/deployment/recipes.test.ts', 'src/http/', 'bench/run.ts']);
  assert.deepEqual(namedPaths('the latest/test/x.ts, node_modules/src/y.ts'), []);
});
