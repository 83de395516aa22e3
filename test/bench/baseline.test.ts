import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fetchOnce, startServer } from '../../bench/processes.ts';

const canned = {
  headers: { 'Content-Type': 'application/json; charset=utf-8', 'Cache-Control': 'no-store', 'X-RateLimit-Remaining': '99' },
  body: '[{"id":1,"name":"Rex","categoryId":1,"status":"available"}]',
};

test('the baseline answers any method and path with the canned headers and body, after reading a request body', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'baseline-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'response.json');
  writeFileSync(file, JSON.stringify(canned));
  const baseline = await startServer({
    name: 'baseline',
    args: [join(import.meta.dirname, '..', '..', 'bench', 'baseline.ts'), file],
    env: { PATH: process.env.PATH ?? '', PORT: '0', HOST: '127.0.0.1' },
    timeoutMs: 10_000,
  });
  t.after(() => baseline.stop());
  assert.match(baseline.url, /^http:\/\/127\.0\.0\.1:\d+$/);

  for (const [method, path, body] of [['GET', '/v1/pets?limit=20', undefined], ['POST', '/anything', 'x'.repeat(100_000)]] as const) {
    const answer = await fetchOnce(baseline.url + path, { method, ...(body === undefined ? {} : { body }) });
    assert.equal(answer.status, 200, `${method} ${path}`);
    assert.equal(answer.body, canned.body);
    assert.equal(answer.headers['content-length'], String(Buffer.byteLength(canned.body)));
    assert.equal(answer.headers['x-ratelimit-remaining'], '99');
    assert.equal(answer.headers['cache-control'], 'no-store');
  }
  assert.equal(await baseline.stop(), 0);
});
