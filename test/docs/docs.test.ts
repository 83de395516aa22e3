/**
 * The documentation keeps in step with the code: each table that describes the code is checked
 * against it, in the page that holds it, and no page points the reader somewhere they cannot go.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { BASE_PATH } from '../../src/api/operation.ts';
import { OPERATIONS } from '../../src/api/operations.ts';
import { ERROR_STATUS } from '../../src/api/errors.ts';
import { OUTSIDE_PATHS } from '../../src/pipeline/routes.ts';
import { createMetrics, renderCounts } from '../../src/ops/metrics.ts';
import { loadConfig } from '../../src/config.ts';
import { markdownFiles, readRepoFile } from '../support/markdown.ts';

const readme = readRepoFile('README.md');
const api = readRepoFile('docs/api.md');
const configuration = readRepoFile('docs/configuration.md');
const keysAndLimits = readRepoFile('docs/keys-and-limits.md');
const operations = readRepoFile('docs/operations.md');

/** Rows `| 400 | `code` | ... |` of the error table in docs/api.md. */
function documentedErrors(): Map<string, number> {
  const documented = new Map<string, number>();
  for (const match of api.matchAll(/^\| (\d{3}) \| `([a-z_]+)` \|/gm)) documented.set(match[2]!, Number(match[1]));
  return documented;
}

/** The text of a page from `heading` up to the next heading of the same or a higher level. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n${heading}\n`);
  assert.notEqual(start, -1, `no heading ${heading}`);
  const level = heading.indexOf(' ');
  const rest = markdown.slice(start + heading.length + 2);
  const next = rest.search(new RegExp(`^#{1,${level}} `, 'm'));
  return next === -1 ? rest : rest.slice(0, next);
}

test('every error code in the code is in the error table of docs/api.md, with its status', () => {
  const documented = documentedErrors();
  for (const [code, status] of Object.entries(ERROR_STATUS)) {
    assert.equal(documented.get(code), status, `docs/api.md error table: ${code}`);
  }
});

test('the error table of docs/api.md lists no error code that the code does not have', () => {
  for (const code of documentedErrors().keys()) assert.ok(Object.hasOwn(ERROR_STATUS, code), `unknown code in docs/api.md: ${code}`);
});

/** Rows `| \`GET /v1/pets\` | yes | yes | What it does |` of the endpoint table of docs/api.md. */
function documentedEndpoints(): { endpoint: string; key: string; limited: string; deprecated: boolean }[] {
  const rows = section(api, '## Endpoints').matchAll(/^\| `([A-Z]+ \/\S*)` \| (yes|no) \| (yes|no) \| (.*) \|$/gm);
  return [...rows].map((row) => ({ endpoint: row[1]!, key: row[2]!, limited: row[3]!, deprecated: /\*\*Deprecated\*\*/.test(row[4]!) }));
}

test('the endpoint table of docs/api.md lists every operation of the table, whether it needs a key, and only those and the paths outside the API', () => {
  const operations = Object.values(OPERATIONS).map((operation) => ({
    endpoint: `${operation.method} ${BASE_PATH}${operation.path}`,
    key: operation.scope === null ? 'no' : 'yes',
    // Every request under the base address is rate limited, with a key or without.
    limited: 'yes',
    deprecated: 'deprecated' in operation,
  }));
  // The probe and the reference page: no key, never limited.
  const outside = Object.values(OUTSIDE_PATHS).map((path) => ({ endpoint: `GET ${path}`, key: 'no', limited: 'no', deprecated: false }));
  assert.deepEqual(documentedEndpoints(), [...operations, ...outside]);
});

test('the README shows the two set-up commands', () => {
  assert.match(readme, /npm install && npm start/);
  assert.match(readme, /npm install && npm test/);
});

test('docs/keys-and-limits.md says the key checksum is for typos and secret scanners, and does not promise more', () => {
  const paragraph = section(keysAndLimits, '### The checksum');
  assert.match(paragraph, /typos/);
  assert.match(paragraph, /secret\s+scanners/);
  assert.match(paragraph, /made-up key with a valid checksum does\s+get a\s+database\s+lookup/);
  for (const file of markdownFiles()) {
    const text = readRepoFile(file);
    assert.doesNotMatch(text, /made-up key is refused without/, file);
    assert.doesNotMatch(text, /invented key be refused/, file);
  }
});

test('docs/configuration.md has a table row for every environment variable that config.ts reads', () => {
  const config = readRepoFile('src/config.ts');
  const names = [...config.matchAll(/\(env, '([A-Z_]+)'/g)].map((match) => match[1]!);
  assert.ok(names.includes('MAX_CONNECTIONS_PER_ADDRESS'));
  assert.ok(names.includes('WORKERS'));
  for (const name of names) assert.match(configuration, new RegExp(`^\\| \`${name}\` \\|`, 'm'), name);
});

test('docs/configuration.md gives the webhook variables\' defaults as config.ts has them', () => {
  const defaults = loadConfig({});
  const row = (name: string) => new RegExp(`^\\| \`${name}\` \\| ([^|]+) \\|`, 'm').exec(configuration)?.[1]?.trim();
  assert.equal(row('WEBHOOK_RETRY_SCHEDULE'), `\`${defaults.webhookRetrySchedule.join(',')}\``);
  assert.deepEqual(defaults.webhookAllowedNetworks, []);
  assert.equal(row('WEBHOOK_ALLOWED_NETWORKS'), 'none');
});

test('the metrics table of docs/operations.md lists exactly the families the service exposes, with their types', () => {
  const probe = { residentMemoryBytes: () => 0, cpuSeconds: () => 0, startTimeSeconds: () => 0, eventLoopDelay: () => ({ count: 0, sumSeconds: 0, maxSeconds: 0, quantiles: [] }) };
  // With the family that only WORKERS above 1 adds (the per-worker request counts).
  const exposed = [...renderCounts(createMetrics(probe).counts(), probe, [0, 0]).matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((match) => `${match[1]} ${match[2]}`);
  const documented = [...operations.matchAll(/^\| `([a-z_]+)` \| (counter|gauge|histogram|summary) \|/gm)].map((match) => `${match[1]} ${match[2]}`);
  assert.deepEqual(documented, exposed);
});

test('no Markdown file points outside the repository or to an issue tracker a reader cannot open', () => {
  const files = markdownFiles();
  assert.ok(files.length >= 10, `found only ${files.join(', ')}`);
  for (const file of files) {
    const text = readRepoFile(file);
    assert.doesNotMatch(text, /CONTRACT\.md/, file);
    assert.doesNotMatch(text, /\.\.\/shared/, file);
    assert.doesNotMatch(text, /\bissues? #\d+/i, file);
    // A bare "#12" or "(#12)" is an issue reference too; anchors are letters and hyphens.
    assert.doesNotMatch(text, /(?:^|[\s(,;])#\d+\b/m, file);
  }
});

test('no source, test or bench file cites an issue tracker or a brief a reader of the repository cannot open', () => {
  const root = new URL('../..', import.meta.url).pathname;
  const sources = ['src', 'test', 'bench'].flatMap((folder) =>
    readdirSync(join(root, folder), { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && /\.(ts|js)$/.test(entry.name) && !entry.parentPath.includes('.generated'))
      .map((entry) => relative(root, join(entry.parentPath, entry.name))));
  assert.ok(sources.length > 100, `found only ${sources.length} files`);
  // Built so that this file does not match itself.
  const brief = new RegExp(['CONTRACT', 'md'].join('\\.') + '|\\.\\./' + 'shared');
  const issue = new RegExp('\\bissues? ' + '#\\d+', 'i');
  for (const file of sources) {
    const text = readRepoFile(file);
    assert.doesNotMatch(text, brief, file);
    assert.doesNotMatch(text, issue, file);
  }
});
