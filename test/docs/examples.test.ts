/**
 * The pages' console examples are what the service answers today: the README's two walk-throughs,
 * run back to back against a server started as the README says, and the keys command's example
 * of docs/keys-and-limits.md, each compared answer by answer with the page (see examples.ts for
 * how they are run and what is masked). A change of behaviour fails here with the difference; if
 * it is meant, `node_modules/.bin/node test/docs/examples.ts --write` writes the real answers into
 * the pages, to be read over in the diff.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { markdownFiles, readRepoFile } from '../support/markdown.ts';
import { consoleBlocks } from '../support/recipes.ts';
import { allowRefill, mask, renderBlock, runKeysPage, runReadme, shorten, type PageRun } from './examples.ts';

/** Why the examples cannot run here (they call curl, as the pages do), or undefined. Throws under CI=true. */
const curlSkip: string | undefined = (() => {
  if (spawnSync('curl', ['--version'], { stdio: 'ignore' }).status === 0) return undefined;
  if (process.env.CI === 'true') throw new Error('CI=true but curl is not installed; .ci/run installs it');
  return 'curl is not installed: apt-get install curl to run this test';
})();

const REGENERATE = 'if the change is meant, node_modules/.bin/node test/docs/examples.ts --write writes the real answers into the page';

function assertMatches(run: PageRun): void {
  for (const [index, { shown, ran }] of run.blocks.entries()) {
    // The parser reads the page's block whole: nothing of it escapes the comparison.
    assert.equal(renderBlock(shown.entries), run.text.slice(shown.start, shown.end), `${run.page}: console block ${index + 1} is read back as written`);
    assert.equal(mask(shorten(renderBlock(ran))), mask(renderBlock(shown.entries)), `${run.page}: console block ${index + 1} differs from a real run (- the page, + the run); ${REGENERATE}`);
  }
  if (run.printed !== null) assert.equal(mask(shorten(run.printed.ran)), mask(run.printed.shown), `${run.page}: the first start prints something else; ${REGENERATE}`);
}

test('the README\'s walk-throughs, run back to back against a server started as the README says, answer what the README shows', { skip: curlSkip }, async () => {
  const run = await runReadme();
  assert.equal(run.blocks.length, 2, 'the API walk-through, then adopting a pet');
  assertMatches(run);
});

test('the keys command\'s example of docs/keys-and-limits.md prints what the page shows, accounts and scopes included', async () => {
  assertMatches(await runKeysPage());
});

test('masking numbers each id and key by its first appearance, so a value shown twice must be the same value twice', () => {
  const page = 'Created key_0123456789abcdef (account acct_0123456789abcdef)\n{"id":"key_0123456789abcdef","placedAt":"2026-11-26T01:01:27.173Z"}';
  const same = 'Created key_fedcba9876543210 (account acct_1111111111111111)\n{"id":"key_fedcba9876543210","placedAt":"2027-01-01T00:00:00.000Z"}';
  const other = 'Created key_fedcba9876543210 (account acct_1111111111111111)\n{"id":"key_aaaaaaaaaaaaaaaa","placedAt":"2027-01-01T00:00:00.000Z"}';
  assert.equal(mask(same), mask(page));
  assert.notEqual(mask(other), mask(page));
  assert.equal(mask('KEY=pk_test_yVjm…'), mask(`KEY=${shorten(`pk_test_${'A'.repeat(49)}`)}`));
  assert.equal(mask('X-RateLimit-Reset: 1795649353\nX-RateLimit-Remaining: 56'), 'X-RateLimit-Reset: <unix time>\nX-RateLimit-Remaining: 56');
});

test('a run slower than a reader may find the minute bucket refilled by a token a second, no more', () => {
  const page = 'X-RateLimit-Remaining: 56\nRateLimit: "minute";r=56;t=4, "day";r=996;t=346';
  const real = 'X-RateLimit-Remaining: 57\nRateLimit: "minute";r=57;t=3, "day";r=996;t=345';
  assert.equal(allowRefill(real, page, 1500), 'X-RateLimit-Remaining: 56\nRateLimit: "minute";r=56;t=3, "day";r=996;t=345');
  assert.equal(allowRefill(real, page, 900), real, 'under a second, the numbers must be the page\'s');
  assert.equal(allowRefill(real.replaceAll('57', '55'), page, 5000), real.replaceAll('57', '55'), 'fewer tokens than the page is never a refill');
  assert.equal(mask(allowRefill(real, page, 1500)), mask(page));
});

test('a console block is read as commands, their continuation lines and their answers', () => {
  const [block] = consoleBlocks('text\n```console\n$ KEY=x\n$ curl -s a \\\n    -d b\n{"ok":1}\n\n# true\n```\n');
  assert.deepEqual(block!.entries, [
    { prompt: '$', command: 'KEY=x', output: '', blankAfter: false },
    { prompt: '$', command: 'curl -s a \\\n    -d b', output: '{"ok":1}', blankAfter: true },
    { prompt: '#', command: 'true', output: '', blankAfter: false },
  ]);
});

test('no console example of a page writes a file into the checkout: keys stay in variables, logs go to a folder outside it', () => {
  const written: string[] = [];
  for (const file of markdownFiles()) {
    for (const { entries } of consoleBlocks(readRepoFile(file))) {
      for (const { command } of entries) {
        for (const [, target] of command.matchAll(/(?<![0-9&])>>?\s*([^\s&|;)]+)/g)) {
          if (!/^(\/|\$)/.test(target!)) written.push(`${file}: ${command.split('\n')[0]}`);
        }
      }
    }
  }
  assert.deepEqual(written, []);
});
