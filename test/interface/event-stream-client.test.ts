/**
 * The stream read by the client Node applications use, the `eventsource` package: it sends the
 * key through its `fetch` option, and when a server drains (a deploy) and ends the stream, it
 * reconnects on its own, to the server that replaced it, with `Last-Event-ID`, and misses
 * nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventSource } from 'eventsource';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { json, startTestServer } from '../support/test-server.ts';

test('EventSource reconnects with Last-Event-ID after a drain, to the next server, and sees every event once', async (t) => {
  const db = openDatabase(':memory:');
  t.after(() => db.close());
  // Two servers over one database, as two instances behind a load balancer: the first drains.
  const first = await startTestServer(t, { db });
  const second = await startTestServer(t, { db });
  let serving = first.url;
  const asked: (string | null)[] = [];
  const source = new EventSource(`${first.url}/v1/events`, {
    fetch: (url, init) => {
      const headers = new Headers(init?.headers);
      asked.push(headers.get('last-event-id'));
      headers.set('authorization', `Bearer ${first.key}`);
      return fetch(String(url).replace(first.url, serving), { ...init, headers });
    },
  });
  t.after(() => source.close());
  const received: { id: string; type: string; petId: number }[] = [];
  const arrived = new Map<number, () => void>();
  for (const type of ['pet.created', 'pet.updated']) {
    source.addEventListener(type, (message) => {
      const event = JSON.parse(message.data) as { id: number; data: { id: number } };
      received.push({ id: message.lastEventId, type: message.type, petId: event.data.id });
      arrived.get(event.id)?.();
    });
  }
  const eventArrives = (id: number) => new Promise<void>((resolve) => arrived.set(id, resolve));
  await new Promise((resolve) => source.addEventListener('open', resolve, { once: true }));

  const one = eventArrives(2);
  const pet = await json(await first.post('/v1/pets', { name: 'Rex', categoryId: 1 }));
  await first.post('/v1/pets', { name: 'Ada', categoryId: 1 });
  await one;
  serving = second.url;
  first.service.app.drain();
  // Written while the client is away: it comes once it has reconnected.
  await second.request(`/v1/pets/${pet.id}`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"name":"Rex II"}' });
  await eventArrives(3);
  assert.deepEqual(received, [
    { id: '1', type: 'pet.created', petId: pet.id },
    { id: '2', type: 'pet.created', petId: pet.id + 1 },
    { id: '3', type: 'pet.updated', petId: pet.id },
  ]);
  assert.deepEqual(asked, [null, '2'], 'the reconnection said where it was, on its own');
});
