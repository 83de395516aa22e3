/**
 * `GET /docs` in a real browser: headless Chromium loads the page from the real server
 * and uses it as a reader would, with the keyboard. One browser for the whole file; each test has
 * its own server and page.
 */
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Browser, Page } from 'playwright-core';
import { chromiumMissing, launchChromium } from '../support/chromium.ts';
import { startTestServer, type TestServer } from '../support/test-server.ts';

// The callbacks given to page.evaluate run in the page. The project is type-checked without the DOM
// library (its code runs in Node, where `document` must not type-check), so the page's globals
// are declared loosely, for this file only.
declare const document: any;
declare function getComputedStyle(element: unknown): { fontSize: string; visibility: string };

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface Watched {
  page: Page;
  /** Console errors, uncaught exceptions and CSP violations, as text. */
  problems: string[];
  /** Every URL the page asked for. */
  requests: string[];
}

describe('the API reference page in Chromium', { skip: chromiumMissing() }, () => {
  let browser: Browser;
  /** One server for the file, with two pets; tests that change data use their own. */
  let shared: TestServer;
  const cleanups: (() => unknown)[] = [];
  before(async () => {
    browser = await launchChromium();
    shared = await startTestServer({ after: (cleanup: () => unknown) => cleanups.push(cleanup) } as unknown as TestContext);
    await addPets(shared);
  });
  after(async () => {
    for (const cleanup of cleanups) await cleanup();
    await browser?.close();
  });

  /** A fresh page that records everything that would show a broken page. */
  async function open(t: TestContext, server: TestServer, viewport = { width: 1280, height: 900 }): Promise<Watched> {
    const context = await browser.newContext({ viewport });
    t.after(() => context.close());
    const page = await context.newPage();
    const problems: string[] = [];
    const requests: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') problems.push(`console ${message.type()}: ${message.text()}`);
    });
    page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
    page.on('request', (request) => requests.push(request.url()));
    // Runs before the page's own script (through the DevTools protocol, not subject to its CSP).
    await page.addInitScript(() => {
      document.addEventListener('securitypolicyviolation', (event: { violatedDirective: string; blockedURI: string }) => {
        console.error(`CSP violation: ${event.violatedDirective} ${event.blockedURI}`);
      });
    });
    const response = await page.goto(`${server.url}/docs`);
    assert.equal(response?.status(), 200);
    return { page, problems, requests };
  }

  async function addPets(server: TestServer): Promise<void> {
    // The second one's categoryId is the largest int64, sent as digits (JSON.stringify has no bigint).
    for (const pet of [{ name: 'Rex', categoryId: 1 }, { name: 'Whiskers', categoryId: 9223372036854775807n, status: 'pending' }]) {
      const body = JSON.stringify(pet, (_key, value) => (typeof value === 'bigint' ? `@${value}` : value)).replace(/"@(\d+)"/, '$1');
      assert.equal((await server.post('/v1/pets', body)).status, 201);
    }
  }

  /** Opens every disclosure and shows every result area, so that checks see the whole page. */
  const unfoldAll = (page: Page) =>
    page.evaluate(() => {
      for (const details of document.querySelectorAll('details')) details.open = true;
    });

  async function axeViolations(page: Page): Promise<string[]> {
    if (!(await page.evaluate(() => 'axe' in globalThis))) await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate(async () => {
      const results = await (globalThis as any).axe.run(document, { resultTypes: ['violations'] });
      return results.violations.map((violation: any) => `${violation.id} (${violation.impact}): ${violation.help}; ${violation.nodes.slice(0, 3).map((node: any) => node.target.join(' ')).join(' | ')}`);
    });
    return violations as string[];
  }

  test('the page loads and is used with no console error, no CSP violation and no request to another host', async (t) => {
    const server = shared;
    const { page, problems, requests } = await open(t, server);
    // Use it, so that the script's own work (fetch, writing the answer) is under the policy too.
    await page.fill('#api-key', server.key);
    await page.locator('#op-listPets form.try button[type="submit"]').click();
    await page.locator('#op-listPets .outcome').filter({ hasText: '200' }).waitFor();
    await unfoldAll(page);
    assert.deepEqual(problems, []);
    const origin = new URL(server.url).origin;
    for (const url of requests) assert.ok(url.startsWith('data:') || new URL(url).origin === origin, url);
    assert.deepEqual(requests.filter((url) => !url.startsWith('data:')).map((url) => new URL(url).pathname), ['/docs', '/v1/pets']);
  });

  test('it shows every operation and every error code of the document, and the deprecation of getPet', async (t) => {
    const openapi = JSON.parse(await shared.service.openapi());
    const { page } = await open(t, shared);
    /** What a reader sees of an element: its text when it is rendered and has a size, else null. */
    const seen = (selectors: string[]) =>
      page.evaluate((list) => list.map((selector) => {
        const element = document.querySelector(selector);
        const box = element?.getBoundingClientRect();
        return element && box && box.width > 0 && box.height > 0 && getComputedStyle(element).visibility === 'visible' ? element.innerText : null;
      }), selectors);
    const operations = Object.entries<any>(openapi.paths).flatMap(([path, item]) =>
      Object.entries<any>(item).map(([method, operation]) => ({ id: operation.operationId as string, endpoint: `${method.toUpperCase()} /v1${path}` })));
    const endpoints = await seen(operations.map(({ id }) => `#op-${id} .endpoint`));
    const contents = await seen(operations.map(({ id }) => `nav a[href="#op-${id}"]`));
    operations.forEach(({ id, endpoint }, i) => {
      assert.equal(endpoints[i], endpoint, id);
      assert.notEqual(contents[i], null, `${id} in the contents`);
    });
    const codes: string[] = openapi.components.schemas.Error.properties.code.enum;
    const rows = await seen(codes.map((code) => `#error-${code}`));
    codes.forEach((code, i) => assert.match(rows[i] ?? '', new RegExp(`^\\d{3}\\s+${code}\\s+\\S`), code));
    const deprecated = page.locator('#op-getPet');
    assert.equal(await deprecated.locator('h3 .badge-deprecated').innerText(), 'DEPRECATED', 'shown in capitals');
    assert.match(await deprecated.locator('[role="note"]').innerText(), /removed on 2030-12-05/);
  });

  test('its try-it forms work from the keyboard with a real key: list, create with a body, get by path', async (t) => {
    const server = await startTestServer(t);
    await addPets(server);
    const { page, problems } = await open(t, server);
    // Paste the key once, at the top.
    await page.focus('#api-key');
    await page.keyboard.insertText(server.key);

    // List: fill a query parameter and press Enter in it.
    const list = page.locator('#op-listPets form.try');
    await list.locator('input[name="limit"]').focus();
    await page.keyboard.type('5');
    await page.keyboard.press('Enter');
    await list.locator('.outcome').filter({ hasText: '200 OK' }).waitFor();
    assert.match(await list.locator('.outcome').innerText(), /^GET \/v1\/pets\?limit=5 answered 200 OK/);
    assert.match(await list.locator('.response-headers').innerText(), /^x-ratelimit-remaining: \d+$/m);
    const listed = await list.locator('.response-text').innerText();
    assert.match(listed, /"name": "Rex"/);
    assert.match(listed, /"categoryId": 9223372036854775807,/, 'int64 digits kept exactly');

    // Create: the body is prefilled with the example; send it with the keyboard.
    const create = page.locator('#op-createPet form.try');
    await create.locator('button[type="submit"]').focus();
    await page.keyboard.press('Enter');
    await create.locator('.outcome').filter({ hasText: '201' }).waitFor();
    assert.match(await create.locator('.response-headers').innerText(), /^location: \/v1\/pets\/3$/m);
    assert.match(await create.locator('.response-text').innerText(), /"id": 3/);

    // Get by id: a path parameter, then a bad one shows the error body.
    const get = page.locator('#op-getPet form.try');
    await get.locator('input[name="petId"]').fill('3');
    await get.locator('button[type="submit"]').press('Enter');
    await get.locator('.outcome').filter({ hasText: '200' }).waitFor();
    assert.match(await get.locator('.response-headers').innerText(), /^deprecation: @\d+$/m);
    await get.locator('input[name="petId"]').fill('x/y');
    await get.locator('button[type="submit"]').press('Enter');
    await get.locator('.outcome').filter({ hasText: '400' }).waitFor();
    assert.match(await get.locator('.outcome').innerText(), /^GET \/v1\/pets\/x%2Fy answered 400/);
    assert.match(await get.locator('.response-text').innerText(), /"code": "invalid_path"/);

    // Without a key, the API answers 401 and the page shows it.
    await page.fill('#api-key', '');
    await list.locator('button[type="submit"]').click();
    await list.locator('.outcome').filter({ hasText: '401' }).waitFor();
    assert.deepEqual(problems.filter((problem) => !/status of 40[01]/.test(problem)), []);
  });

  test('the keyboard reaches the skip link first, and it moves the focus to the reference', async (t) => {
    const { page } = await open(t, shared);
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Skip to the reference');
    await page.keyboard.press('Enter');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'main');
    await page.keyboard.press('Tab');
    assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('href')), '/v1/openapi.json');
    // No positive tabindex reorders the page.
    assert.equal(await page.locator('[tabindex]:not([tabindex="0"]):not([tabindex="-1"])').count(), 0);
  });

  test('axe-core finds no violation, on a desktop and on a phone, with every part unfolded and answered', async (t) => {
    const { page } = await open(t, shared);
    await page.fill('#api-key', shared.key);
    await page.locator('#op-listPets form.try button[type="submit"]').click();
    await page.locator('#op-listPets .outcome').filter({ hasText: '200' }).waitFor();
    await unfoldAll(page);
    for (const viewport of [{ width: 1280, height: 900 }, { width: 375, height: 740 }]) {
      await page.setViewportSize(viewport);
      assert.deepEqual(await axeViolations(page), [], `${viewport.width} px wide`);
    }
  });

  test('on a phone nothing scrolls sideways and the text keeps its size', async (t) => {
    const { page } = await open(t, shared, { width: 360, height: 740 });
    await unfoldAll(page);
    const { scrollWidth, clientWidth, fontSize, wide } = await page.evaluate(() => ({
      scrollWidth: document.documentElement.scrollWidth,
      clientWidth: document.documentElement.clientWidth,
      fontSize: getComputedStyle(document.body).fontSize,
      // Elements sticking out of the viewport, for the message.
      wide: [...document.querySelectorAll('main *')].filter((element: any) => element.getBoundingClientRect().right > document.documentElement.clientWidth + 1).slice(0, 5).map((element: any) => element.outerHTML.slice(0, 80)),
    }));
    assert.ok(scrollWidth <= clientWidth, `page is ${scrollWidth} px wide in ${clientWidth}: ${wide.join('\n')}`);
    assert.equal(fontSize, '16px');
  });
});
