/**
 * The event stream read by a page in Chromium, as a shop's script would: `fetch` with the key in
 * `Authorization` and `Last-Event-ID` (both need the preflight to allow them), its body read as
 * it comes, from a page of an allowed origin served on a port of its own.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser } from 'playwright-core';
import { chromiumMissing, launchChromium, pageAt } from '../support/chromium.ts';
import { startTestServer } from '../support/test-server.ts';

describe('the event stream in Chromium', { skip: chromiumMissing() }, () => {
  let browser: Browser;
  let site: Server;
  let origin: string;

  before(async () => {
    site = createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><html lang="en"><title>A shelter</title><h1>A shelter</h1></html>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    browser = await launchChromium();
  });
  after(async () => {
    site?.close();
    await browser?.close();
  });

  test('a page reads the stream with fetch, after Last-Event-ID, each event as it commits', async (t) => {
    const api = await startTestServer(t, { config: { corsAllowedOrigins: [origin] } });
    for (const name of ['Rex', 'Ada']) assert.equal((await api.post('/v1/pets', { name, categoryId: 1 })).status, 201);
    const { page, console } = await pageAt(browser, t, `${origin}/`);

    // The page reads until it has two events; one of them is written once the stream is open.
    const reading = page.evaluate(async ({ url, key }) => {
      const response = await fetch(url, { headers: { Authorization: `Bearer ${key}`, Accept: 'text/event-stream', 'Last-Event-ID': '1' } });
      const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
      (globalThis as unknown as { opened: boolean }).opened = true;
      let text = '';
      while ((text.match(/\n\n/g) ?? []).length < 2) text += (await reader.read()).value ?? '';
      await reader.cancel();
      return { status: response.status, type: response.headers.get('Content-Type'), remaining: response.headers.get('X-RateLimit-Remaining'), text };
    }, { url: `${api.url}/v1/events`, key: api.key });
    await page.waitForFunction(() => (globalThis as unknown as { opened?: boolean }).opened === true);
    assert.equal((await api.post('/v1/pets', { name: 'Nemo', categoryId: 1 })).status, 201);
    const { status, type, remaining, text } = await reading;
    assert.deepEqual([status, type], [200, 'text/event-stream; charset=utf-8']);
    assert.match(remaining!, /^\d+$/, 'the rate-limit headers are readable, as on every answer');
    const frames = text.trim().split('\n\n').map((frame) => frame.split('\n'));
    assert.deepEqual(frames.map((lines) => lines.slice(0, 2)), [['id: 2', 'event: pet.created'], ['id: 3', 'event: pet.created']]);
    assert.equal(JSON.parse(frames[1]![2]!.slice('data: '.length)).data.name, 'Nemo');
    assert.deepEqual(console, []);
  });
});
