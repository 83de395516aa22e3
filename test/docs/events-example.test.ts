/**
 * The example client of docs/events.md, run as the page says against a real server: it prints
 * every event once, in order, resumes after the id it saved, and stops on 410.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { json, startTestServer } from '../support/test-server.ts';

const EXAMPLE = new URL('../../docs/examples/follow-events.js', import.meta.url).pathname;

/** Runs the example until it stops; resolves with its exit code and its printed lines. */
function follow(env: Record<string, string>): Promise<{ code: number; lines: string[] }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [EXAMPLE], { env: { PATH: process.env.PATH, ...env }, timeout: 20_000 }, (error, stdout) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, lines: stdout.split('\n').filter((line) => line !== '') });
    });
  });
}

test('the example client prints each event once, in order, resumes after its saved id, and stops on 410', async (t) => {
  const server = await startTestServer(t);
  const folder = mkdtempSync(join(tmpdir(), 'events-example-'));
  t.after(() => rmSync(folder, { recursive: true, force: true }));
  const env = { STORE_URL: server.url, STORE_KEY: server.key, STATE_FILE: join(folder, 'position') };
  for (const name of ['Rex', 'Tom']) await server.post('/v1/pets', { name, categoryId: 1 });
  await server.post('/v1/store/orders', { petId: 1 });

  const first = await follow({ ...env, STOP_AFTER: '3' });
  assert.equal(first.code, 0);
  const feed = await json(await server.request('/v1/events'));
  assert.equal(feed.length, 4);
  assert.deepEqual(first.lines.map((line) => JSON.parse(line)), feed, 'the events as the feed serves them, in order, the whole page');
  assert.equal(readFileSync(env.STATE_FILE, 'utf8'), '4');

  // It waits for the next event: the change comes while it waits.
  const second = follow({ ...env, STOP_AFTER: '1' });
  setTimeout(() => void server.request('/v1/pets/2', { method: 'DELETE' }), 500);
  const resumed = await second;
  assert.equal(resumed.code, 0);
  assert.deepEqual(resumed.lines.map((line) => JSON.parse(line).id), [5], 'after its saved id: nothing twice, nothing missed');

  assert.equal(await server.service.stores.upkeep.purgeEvents!(Date.now() + 60_000, 10), 5);
  await server.post('/v1/pets', { name: 'Kit', categoryId: 1 });
  const expired = await follow({ ...env, STATE_FILE: join(folder, 'position-none'), STOP_AFTER: '1' });
  assert.deepEqual([expired.code, expired.lines.map((line) => JSON.parse(line).id)], [0, [6]], 'without a saved id: from the oldest event kept');
  writeFileSync(env.STATE_FILE, '3');
  const behind = await follow({ ...env, STOP_AFTER: '1' });
  assert.deepEqual([behind.code, behind.lines], [3, []], 'events after 3 were deleted: it stops, printing nothing');
});
