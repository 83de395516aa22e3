/**
 * The OpenAPI document passes Spectral's OpenAPI ruleset and the OWASP API
 * Security ruleset (spectral.yaml, beside this file) with no error but the two the contract rules out, so it
 * cannot regress. Spectral is run as its command line, on the documents a server serves with and
 * without configured base addresses.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildOpenApiDocument, serializeOpenApiDocument, type OpenApiOptions } from '../../../src/api/openapi/document.ts';
import { tempDir } from '../../support/main-process.ts';

const ROOT = new URL('../../..', import.meta.url).pathname;
const SPECTRAL = join(ROOT, 'node_modules', '@stoplight', 'spectral-cli', 'dist', 'index.js');
const RULESET = join(ROOT, 'test', 'api', 'openapi', 'spectral.yaml');

interface Finding {
  code: string;
  path: string[];
  message: string;
  /** 0 error, 1 warning, 2 information, 3 hint. */
  severity: number;
  source: string;
}

/** The document as a server with these options serves it, parsed. */
const served = (options: OpenApiOptions): any => JSON.parse(serializeOpenApiDocument(buildOpenApiDocument(options)));

/** Spectral's findings for each of `documents` (parsed JSON), linted in one run. */
function lint(dir: string, documents: Record<string, unknown>): Map<string, Finding[]> {
  const files = Object.entries(documents).map(([name, document]) => {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, JSON.stringify(document, null, 2));
    return file;
  });
  const run = spawnSync(process.execPath, [SPECTRAL, 'lint', ...files, '--ruleset', RULESET, '--format', 'json', '--quiet'], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
  });
  // Spectral exits 1 when it found errors; anything else unreadable is a failure of the run.
  assert.ok(run.status === 0 || run.status === 1, `spectral exited ${run.status}: ${run.stderr}`);
  const findings = JSON.parse(run.stdout) as Finding[];
  return new Map(files.map((file, index) => [Object.keys(documents)[index]!, findings.filter((finding) => finding.source === file)]));
}

/** The node of `document` at a Spectral path. */
function at(document: unknown, path: readonly string[]): any {
  return path.reduce<any>((node, segment) => node?.[segment], document);
}

/**
 * The two errors the interface rules out (docs/operations.md, "Metrics"): numeric ids (the
 * seed's int64 `petId`, and the orders' `orderId` and the webhooks' `webhookId`, which the
 * interface makes int64 like it; an order or a webhook of another account is 404 whatever its id,
 * so a guessed id reads nothing), and the rate-limit rule on a response that declares both the seed's
 * `X-RateLimit-*` and the IETF `RateLimit` headers (the rule accepts one family only). A response
 * that declares neither is not excused.
 */
function excused(finding: Finding, document: unknown): boolean {
  if (finding.code === 'owasp:api1:2023-no-numeric-ids') {
    return finding.path.at(-1) === 'schema' && ['petId', 'orderId', 'webhookId'].includes(at(document, finding.path.slice(0, -1))?.name);
  }
  if (finding.code === 'owasp:api4:2023-rate-limit') {
    const headers = at(document, finding.path) ?? {};
    return 'X-RateLimit-Limit' in headers && 'RateLimit' in headers;
  }
  return false;
}

const describe = (finding: Finding) => `${finding.code} at ${finding.path.join('.')}: ${finding.message}`;

test('Spectral (spectral:oas and the OWASP ruleset) finds no error in the document but the two the contract rules out', (t) => {
  const documents = {
    local: served({ appEnv: 'development', publicBaseUrl: null, stagingBaseUrl: null }),
    // Each environment lists only its own base address.
    production: served({ appEnv: 'production', publicBaseUrl: 'https://api.example.com/v1', stagingBaseUrl: 'https://staging.example.com/v1' }),
    staging: served({ appEnv: 'staging', publicBaseUrl: 'https://api.example.com/v1', stagingBaseUrl: 'https://staging.example.com/v1' }),
    'production-unset': served({ appEnv: 'production', publicBaseUrl: null, stagingBaseUrl: null }),
  };
  const results = lint(tempDir(t, 'pets-lint-'), documents);
  for (const [name, findings] of results) {
    const document = documents[name as keyof typeof documents];
    const errors = findings.filter((finding) => finding.severity === 0);
    const unexcused = errors.filter((finding) => !excused(finding, document)).map(describe);
    assert.deepEqual(unexcused, [], `${name}: ${unexcused.length} errors:\n${unexcused.join('\n')}`);
    // Both exceptions really occur, so the excuse above is not dead code.
    assert.ok(errors.some((finding) => finding.code === 'owasp:api1:2023-no-numeric-ids'), name);
    assert.ok(errors.some((finding) => finding.code === 'owasp:api4:2023-rate-limit'), name);
  }
});

test('the lint is not a rubber stamp: a string without maxLength, an integer without bounds and a 4XX without rate-limit headers are errors', (t) => {
  const broken = served({ appEnv: 'development', publicBaseUrl: null, stagingBaseUrl: null });
  delete broken.components.schemas.Pet.properties.name.maxLength;
  delete broken.components.schemas.Pet.properties.id.maximum;
  delete broken.paths['/pets'].get.responses['400'].headers['RateLimit'];
  delete broken.paths['/pets'].get.responses['400'].headers['X-RateLimit-Limit'];
  const [findings] = lint(tempDir(t, 'pets-lint-'), { broken }).values();
  const errors = findings!.filter((finding) => finding.severity === 0 && !excused(finding, broken)).map(describe);
  assert.ok(errors.some((error) => error.startsWith('owasp:api4:2023-string-limit at components.schemas.Pet.properties.name')), errors.join('\n'));
  assert.ok(errors.some((error) => error.startsWith('owasp:api4:2023-integer-limit at components.schemas.Pet.properties.id')), errors.join('\n'));
  assert.ok(errors.some((error) => error.startsWith('owasp:api4:2023-rate-limit at paths./pets.get.responses.400.headers')), errors.join('\n'));
});
