/** The README is the product's front door: these tests keep it in step with the code. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ERROR_STATUS } from '../src/http/api-error.ts';
import { createMetrics, renderCounts } from '../src/ops/metrics.ts';

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

/** Rows `| 400 | `code` | ... |` of the README's error table. */
function documentedErrors(): Map<string, number> {
  const documented = new Map<string, number>();
  for (const match of readme.matchAll(/^\| (\d{3}) \| `([a-z_]+)` \|/gm)) documented.set(match[2]!, Number(match[1]));
  return documented;
}

test('every error code in the code is in the README table, with its status', () => {
  const documented = documentedErrors();
  for (const [code, status] of Object.entries(ERROR_STATUS)) {
    assert.equal(documented.get(code), status, `README error table: ${code}`);
  }
});

test('the README lists no error code that the code does not have', () => {
  for (const code of documentedErrors().keys()) assert.ok(Object.hasOwn(ERROR_STATUS, code), `unknown code in README: ${code}`);
});

test('the README shows the two set-up commands', () => {
  assert.match(readme, /npm install && npm start/);
  assert.match(readme, /npm install && npm test/);
});

test('the README says the key checksum is for typos and secret scanning, and does not promise more (issue #15)', () => {
  const paragraph = readme.slice(readme.indexOf('## API keys'), readme.indexOf('Each key has an id'));
  assert.match(paragraph, /typos/);
  assert.match(paragraph, /secret\s+scanners/);
  assert.match(paragraph, /made-up key with a valid checksum does\s+get a\s+database\s+lookup/);
  assert.doesNotMatch(readme, /made-up key is refused without/);
  assert.doesNotMatch(readme, /invented key be refused/);
});

test('the README has a table row for every environment variable that config.ts reads', () => {
  const config = readFileSync(new URL('../src/config.ts', import.meta.url), 'utf8');
  const names = [...config.matchAll(/\(env, '([A-Z_]+)'/g)].map((match) => match[1]!);
  assert.ok(names.includes('MAX_CONNECTIONS_PER_ADDRESS'));
  for (const name of names) assert.match(readme, new RegExp(`^\\| \`${name}\` \\|`, 'm'), name);
});

test('the README\'s metrics table lists exactly the families the service exposes, with their types', () => {
  const probe = { residentMemoryBytes: () => 0, cpuSeconds: () => 0, startTimeSeconds: () => 0, eventLoopDelay: () => ({ count: 0, sumSeconds: 0, maxSeconds: 0, quantiles: [] }) };
  // With the family that only WORKERS above 1 adds (the per-worker request counts).
  const exposed = [...renderCounts(createMetrics(probe).counts(), probe, [0, 0]).matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((match) => `${match[1]} ${match[2]}`);
  const documented = [...readme.matchAll(/^\| `([a-z_]+)` \| (counter|gauge|histogram|summary) \|/gm)].map((match) => `${match[1]} ${match[2]}`);
  assert.deepEqual(documented, exposed);
});
