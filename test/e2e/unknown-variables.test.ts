/**
 * A mistyped variable name is not silently ignored: the server starts (the variable may belong to
 * something else) and logs one warning naming it and the variable probably meant.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startMain } from '../support/main-process.ts';

test('a server started with DATABASE_PATHS logs one unknown_variable warning naming DATABASE_PATH, and serves', async (t) => {
  const { child, url, output } = await startMain({ DATABASE_PATH: ':memory:', DATABASE_PATHS: 'data/typo.db' });
  t.after(() => child.kill('SIGTERM'));
  assert.equal((await fetch(`${url}/healthz`)).status, 200);
  const warnings = output().stdout.split('\n').filter((line) => line.includes('"unknown_variable"')).map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.equal(warnings.length, 1);
  assert.equal(warnings[0]!.level, 'warn');
  assert.match(String(warnings[0]!.message), /^DATABASE_PATHS is set, but the service reads no such variable and ignores it: did you mean DATABASE_PATH\?/);
});
