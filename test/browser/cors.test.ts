/**
 * CORS as a real browser enforces it: a page served from an allowed origin reads a
 * list and its rate-limit header through fetch, with the key in `Authorization` (so Chromium sends
 * a preflight first); a page from another origin gets nothing. Both pages are served by tiny
 * servers on 127.0.0.1 on ports of their own, which makes them origins distinct from the API's.
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, Page } from 'playwright-core';
import { chromiumMissing, launchChromium, pageAt } from '../support/chromium.ts';
import { startTestServer, type TestServer } from '../support/test-server.ts';

/** A site that serves one empty page, standing for a shop's own website. */
async function startSite(): Promise<{ server: Server; origin: string }> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><html lang="en"><title>A shop</title><h1>A shop</h1></html>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

interface Outcome {
  ok: boolean;
  status?: number;
  remaining?: string | null;
  link?: string | null;
  location?: string | null;
  body?: unknown;
  error?: string;
}

/** Runs fetch in the page against the API, as the shop's script would, and reports what it could read. */
function fetchFromPage(page: Page, url: string, init: { method?: string; headers?: Record<string, string>; body?: string }): Promise<Outcome> {
  return page.evaluate(async ({ url, init }) => {
    try {
      const response = await fetch(url, init);
      return {
        ok: true,
        status: response.status,
        remaining: response.headers.get('X-RateLimit-Remaining'),
        link: response.headers.get('Link'),
        location: response.headers.get('Location'),
        body: await response.json(),
      };
    } catch (error) {
      return { ok: false, error: String(error) };
    }
  }, { url, init });
}

describe('cross-origin requests in Chromium', { skip: chromiumMissing() }, () => {
  let browser: Browser;
  let allowed: { server: Server; origin: string };
  let other: { server: Server; origin: string };

  before(async () => {
    [browser, allowed, other] = await Promise.all([launchChromium(), startSite(), startSite()]);
  });
  after(async () => {
    for (const site of [allowed, other]) site?.server.close();
    await browser?.close();
  });

  /** The API, allowing the first site's origin only. */
  const startApi = (t: TestContext): Promise<TestServer> => startTestServer(t, { config: { corsAllowedOrigins: [allowed.origin] } });

  /** The (method, status) of every request the API logged for a path. */
  async function logged(api: TestServer, path: string): Promise<string[]> {
    await api.close();
    return api.logs.map((line) => JSON.parse(line)).filter((line) => line.path === path).map((line) => `${line.method} ${line.status} ${line.keyId ?? 'no key'}`);
  }

  const pageOn = (t: TestContext, origin: string) => pageAt(browser, t, `${origin}/`);

  test('a page from an allowed origin reads a list, its X-RateLimit-Remaining and its Link', async (t) => {
    const api = await startApi(t);
    for (const name of ['Rex', 'Whiskers', 'Nemo']) assert.equal((await api.post('/v1/pets', { name, categoryId: 1 })).status, 201);
    const { page, console } = await pageOn(t, allowed.origin);
    const outcome = await fetchFromPage(page, `${api.url}/v1/pets?limit=2`, { headers: { Authorization: `Bearer ${api.freeKey}` } });
    assert.deepEqual(outcome, {
      ok: true,
      status: 200,
      remaining: '59',
      link: '</v1/pets?limit=2&cursor=YWZ0ZXI6Mg>; rel="next"',
      location: null,
      body: [{ id: 1, name: 'Rex', categoryId: 1, status: 'available' }, { id: 2, name: 'Whiskers', categoryId: 1, status: 'available' }],
    });
    // With Authorization the request is not "simple": the browser asked first, and got its answer
    // without a key and without spending a token (remaining was 59 on the first keyed request).
    assert.deepEqual((await logged(api, '/v1/pets')).slice(3), ['OPTIONS 204 no key', `GET 200 ${api.freeKeyId}`]);
    assert.deepEqual(console, []);
  });

  test('a page from an allowed origin creates a pet and reads its Location', async (t) => {
    const own = await startApi(t);
    const { page } = await pageOn(t, allowed.origin);
    const outcome = await fetchFromPage(page, `${own.url}/v1/pets`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${own.key}`, 'Content-Type': 'application/json', 'Idempotency-Key': 'order-1' },
      body: JSON.stringify({ name: 'Rex', categoryId: 7 }),
    });
    assert.deepEqual([outcome.status, outcome.location, outcome.body], [201, '/v1/pets/1', { id: 1, name: 'Rex', categoryId: 7, status: 'available' }]);
  });

  test('a page from another origin is blocked: the preflight fails and the request is never sent', async (t) => {
    const own = await startApi(t);
    const { page, console } = await pageOn(t, other.origin);
    const outcome = await fetchFromPage(page, `${own.url}/v1/pets`, { headers: { Authorization: `Bearer ${own.key}` } });
    assert.deepEqual(outcome, { ok: false, error: 'TypeError: Failed to fetch' });
    assert.ok(console.some((line) => line.startsWith('error:') && line.includes('blocked by CORS policy')), console.join('\n'));
    assert.deepEqual(await logged(own, '/v1/pets'), ['OPTIONS 204 no key'], 'only the preflight reached the server');
  });

  test('a page from another origin cannot read even a simple request the browser does send', async (t) => {
    const own = await startApi(t);
    const { page } = await pageOn(t, other.origin);
    // No key, no JSON body: a "simple" GET, sent without a preflight; the answer is withheld.
    const outcome = await fetchFromPage(page, `${own.url}/v1/pets`, {});
    assert.deepEqual(outcome, { ok: false, error: 'TypeError: Failed to fetch' });
    assert.deepEqual(await logged(own, '/v1/pets'), ['GET 401 no key'], 'the server answered; the browser withheld it');
  });
});
