/** `GET /docs` through the real server: the page, its policy and its place outside the API. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { startTestServer } from '../support/test-server.ts';

const LIMIT_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'ratelimit', 'ratelimit-policy'];

/** The text between `<tag>` and `</tag>` (the page has one of each). */
function inline(page: string, tag: 'script' | 'style'): string {
  const match = new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`).exec(page);
  assert.ok(match, `the page has a <${tag}>`);
  return match[1]!;
}

const directives = (policy: string) => new Map(policy.split(';').map((part) => part.trim().split(/\s+/)).map(([name, ...values]) => [name!, values]));

test('GET /docs is an HTML page, without a key, with the common headers', async (t) => {
  const server = await startTestServer(t);
  const response = await server.request('/docs', { key: null });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.equal(response.headers.get('cache-control'), 'no-store');
  assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(response.headers.get('referrer-policy'), 'no-referrer');
  assert.match(response.headers.get('x-request-id')!, /^[0-9a-f-]{36}$/);
  const page = await response.text();
  assert.match(page, /^<!doctype html>\n<html lang="en">/);
  assert.equal(Number(response.headers.get('content-length')), Buffer.byteLength(page));
});

test('its Content-Security-Policy allows only the page itself: its one script and style by hash, requests to this origin', async (t) => {
  const server = await startTestServer(t);
  const response = await server.request('/docs', { key: null });
  const page = await response.text();
  const policy = directives(response.headers.get('content-security-policy')!);
  const hash = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;
  assert.deepEqual(policy.get('default-src'), ["'none'"]);
  assert.deepEqual(policy.get('script-src'), [hash(inline(page, 'script'))]);
  assert.deepEqual(policy.get('style-src'), [hash(inline(page, 'style'))]);
  assert.deepEqual(policy.get('connect-src'), ["'self'"]);
  assert.deepEqual(policy.get('img-src'), ['data:'], 'only the inline icon');
  assert.deepEqual(policy.get('frame-ancestors'), ["'none'"]);
  assert.deepEqual(policy.get('base-uri'), ["'none'"]);
  assert.deepEqual(policy.get('form-action'), ["'none'"]);
  assert.deepEqual(policy.get('require-trusted-types-for'), ["'script'"]);
  assert.doesNotMatch(response.headers.get('content-security-policy')!, /unsafe|\*|http:|https:/);
  // One script and one style element, no inline handler or style attribute for the policy to allow.
  assert.equal(page.match(/<script/g)!.length, 1);
  assert.equal(page.match(/<style/g)!.length, 1);
  assert.doesNotMatch(page, /\son[a-z]+=|\sstyle=/);
  // Nothing to fetch from anywhere: no src, no stylesheet link, no absolute URL in an attribute.
  assert.doesNotMatch(page, /\ssrc=|rel="stylesheet"|(href|action)="(https?:)?\/\//);
});

test('/docs is the same page on every request (built once, when first asked) and HEAD has no body', async (t) => {
  const server = await startTestServer(t);
  const first = await (await server.request('/docs', { key: null })).text();
  const second = await (await server.request('/docs', { key: 'pk_test_whatever' })).text();
  assert.equal(first, second);
  const head = await server.request('/docs', { key: null, method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(await head.text(), '');
  const post = await server.request('/docs', { key: null, method: 'POST' });
  assert.equal(post.status, 405);
  assert.equal(post.headers.get('allow'), 'GET, HEAD');
});

test('/docs is not rate limited and takes no token from the address', async (t) => {
  const server = await startTestServer(t);
  for (let i = 0; i < 70; i++) {
    const response = await server.request('/docs', { key: null });
    assert.equal(response.status, 200);
    for (const header of LIMIT_HEADERS) assert.equal(response.headers.has(header), false, header);
    await response.body?.cancel();
  }
  assert.equal((await server.request('/v1/pets', { key: null })).headers.get('x-ratelimit-remaining'), '59');
});

test('/docs/ and paths below it are not the page', async (t) => {
  const server = await startTestServer(t);
  for (const path of ['/docs/', '/docs/x', '/v1/docs']) {
    assert.equal((await server.request(path, { key: null })).status, path.startsWith('/v1') ? 401 : 404, path);
  }
});
