/**
 * Every relative link of the repository's Markdown resolves: to a file or folder inside the
 * repository, and, with an `#anchor`, to a heading of that Markdown file as GitHub names it. A
 * reader who clones the project must never meet a dead link. Absolute URLs are not checked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { anchors, brokenLinks, markdownFiles, readRepoFile, slug } from '../support/markdown.ts';

test('the documentation is the README and the pages under docs/', () => {
  const files = markdownFiles();
  for (const expected of ['README.md', 'docs/security.md', 'docs/api.md', 'docs/configuration.md', 'docs/decisions/README.md']) {
    assert.ok(files.includes(expected), `${expected} is missing`);
  }
  assert.ok(!files.some((file) => file.startsWith('node_modules/')));
});

test('every relative link and anchor of every Markdown file resolves inside the repository', () => {
  assert.deepEqual(brokenLinks(markdownFiles(), (file) => readRepoFile(file)), []);
});

test('anchors are named as GitHub names them: lower case, punctuation dropped, spaces to hyphens, repeats numbered', () => {
  assert.equal(slug('The reference page: `GET /docs`'), 'the-reference-page-get-docs');
  assert.equal(slug('`GET /v1/pets/{petId}` (deprecated)'), 'get-v1petspetid-deprecated');
  assert.equal(slug('Every core of one machine: `WORKERS`'), 'every-core-of-one-machine-workers');
  assert.equal(slug('What is logged, and what never is'), 'what-is-logged-and-what-never-is');
  assert.equal(slug('snake_case and kebab-case stay'), 'snake_case-and-kebab-case-stay');
  assert.equal(slug('A [linked](other.md) heading'), 'a-linked-heading');
  assert.deepEqual([...anchors('# Notes\n## Notes\n### Notes\n```\n# not a heading\n```\n')], ['notes', 'notes-1', 'notes-2']);
});

/** Writes `files` into a fresh folder and returns what `brokenLinks` finds there. */
function brokenIn(files: Record<string, string>): string[] {
  const root = mkdtempSync(join(tmpdir(), 'links-'));
  try {
    for (const [file, text] of Object.entries(files)) {
      mkdirSync(dirname(join(root, file)), { recursive: true });
      writeFileSync(join(root, file), text);
    }
    const markdown = Object.keys(files).filter((file) => file.endsWith('.md'));
    return brokenLinks(markdown, (file) => readRepoFile(file, root), root);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

test('a link to a missing file, a missing anchor or a place outside the repository is reported', () => {
  const found = brokenIn({
    'README.md': [
      '# Title',
      '## Usage',
      'Fine: [usage](#usage), [api](docs/api.md#errors), [folder](docs/), [code](src/a.ts), [site](https://example.com/#x).',
      'Broken: [gone](docs/gone.md), [anchor](#nowhere), [other](docs/api.md#nowhere), [up](../outside.md).',
      '`[not a link](nowhere.md)`',
      '```',
      '[also not a link](nowhere.md)',
      '```',
    ].join('\n'),
    'docs/api.md': '# API\n## Errors\n',
    'src/a.ts': '',
  });
  assert.deepEqual(found, [
    'README.md:4: docs/gone.md (no such file or folder)',
    'README.md:4: #nowhere (no heading has the anchor #nowhere)',
    'README.md:4: docs/api.md#nowhere (no heading has the anchor #nowhere)',
    'README.md:4: ../outside.md (outside the repository)',
  ]);
});

test('a repeated heading is reached by its numbered anchor', () => {
  assert.deepEqual(brokenIn({ 'a.md': '# A\n## Setup\n## Setup\n[second](#setup-1) [third](#setup-2)\n' }), ['a.md:4: #setup-2 (no heading has the anchor #setup-2)']);
});
