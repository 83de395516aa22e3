/**
 * The interface (docs/api.md), "What does not change", for reads: a change is seen by the next request that
 * starts after its answer was sent (through the answer caches of reply-cache.ts, whether the
 * change came through this server or another connection), and keyset pagination keeps its
 * promise while pets are changed and deleted. Each cache test names the invalidation it guards:
 * removing that invalidation makes it fail (see docs/decisions/0002-exact-answer-caches.md).
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DatabaseSync } from 'node:sqlite';
import { json, startInlineTestServer, startTestServer, startWriterTestServer, type TestServer } from '../support/test-server.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { openRaw } from '../support/raw-http.ts';

type Status = 'available' | 'pending' | 'sold';

async function createMany(server: TestServer, statuses: Status[]): Promise<void> {
  for (const [i, status] of statuses.entries()) {
    assert.equal((await server.post('/v1/pets', { name: `pet ${i + 1}`, categoryId: i + 1, status })).status, 201);
  }
}

function patch(server: TestServer, id: number, body: object) {
  return server.request(`/v1/pets/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function ids(server: TestServer, path: string): Promise<number[]> {
  return ((await json(await server.request(path))) as { id: number }[]).map((pet) => pet.id);
}

function nextOf(response: Response): string | null {
  const link = response.headers.get('link');
  return link ? /^<([^>]+)>; rel="next"$/.exec(link)![1]! : null;
}

/**
 * Counts the reads that reach the server's pets store: an answer from a cache reads nothing.
 * (The handlers call the store's methods as they are at each call.)
 */
function storeReads(server: TestServer): string[] {
  const reads: string[] = [];
  const pets = server.service.stores.pets;
  const { list, get } = pets;
  pets.list = ((options) => (reads.push(`list after ${options.afterId}${options.status ? ` ${options.status}` : ''}`), list(options))) as typeof list;
  pets.get = ((id) => (reads.push(`get ${id}`), get(id))) as typeof get;
  return reads;
}

/** A file database with a second connection on it, as another process would have. */
function sharedFile(t: { after(fn: () => void): void }) {
  const dir = mkdtempSync(join(tmpdir(), 'pets-lifecycle-'));
  const db = openDatabase(join(dir, 'pets.db'));
  const other = openDatabase(join(dir, 'pets.db'));
  t.after(() => {
    other.close();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { db, other };
}

/** The ways the server writes: in place (`:memory:`), through the writer thread and inline (a file). */
const MODES = [
  { name: 'writes in place', writerThread: false, inlineWriter: false },
  { name: 'writes through the writer thread', writerThread: true, inlineWriter: false },
  { name: 'writes inline on a file', writerThread: false, inlineWriter: true },
] as const;

for (const { name, writerThread, inlineWriter } of MODES) describe(name, () => {
  const start = (t: TestContext) => startTestServer(t, { writerThread, inlineWriter });

  /** The server, and another connection on its file, as another process would have. */
  async function withOther(t: TestContext): Promise<{ server: TestServer; other: DatabaseSync }> {
    if (inlineWriter) {
      const server = await startInlineTestServer(t);
      const other = openDatabase(server.path);
      t.after(() => other.close());
      return { server, other };
    }
    if (!writerThread) {
      const { db, other } = sharedFile(t);
      return { server: await startTestServer(t, { db }), other };
    }
    const server = await startWriterTestServer(t);
    const other = openDatabase(server.path);
    t.after(() => other.close());
    return { server: server as unknown as TestServer, other };
  }

  // --- the answer caches ------------------------------------------------------------------------

  test('a cached pet is answered anew after it was changed (journal of changes; coverage of one pet)', async (t) => {
    const server = await start(t);
    await createMany(server, ['available', 'available']);
    const before = await server.request('/v1/pets/2');
    assert.equal((await json(before)).name, 'pet 2');
    await server.request('/v1/pets/02'); // the same pet under another cache key
    const changed = await patch(server, 2, { name: 'renamed' });
    for (const path of ['/v1/pets/2', '/v1/pets/02']) {
      const after = await server.request(path);
      assert.equal((await json(after)).name, 'renamed', path);
      assert.equal(after.headers.get('etag'), changed.headers.get('etag'), path);
    }
  });

  test('a cached page is answered anew after a pet on it was changed (journal of changes; coverage of a page)', async (t) => {
    const server = await start(t);
    await createMany(server, ['available', 'available', 'available', 'available']);
    assert.equal((await json(await server.request('/v1/pets?limit=2')))[1].name, 'pet 2');
    await patch(server, 2, { name: 'renamed' });
    assert.equal((await json(await server.request('/v1/pets?limit=2')))[1].name, 'renamed');
  });

  test('a status change moves the pet between cached filtered pages at once', async (t) => {
    const server = await start(t);
    await createMany(server, ['sold', 'available', 'sold', 'available', 'sold']);
    assert.deepEqual(await ids(server, '/v1/pets?status=sold'), [1, 3, 5]);
    assert.deepEqual(await ids(server, '/v1/pets?status=available'), [2, 4]);
    await patch(server, 3, { status: 'available' });
    assert.deepEqual(await ids(server, '/v1/pets?status=sold'), [1, 5]);
    assert.deepEqual(await ids(server, '/v1/pets?status=available'), [2, 3, 4]);
  });

  test('a change of the row after a full page, which decides its next link, is seen (coverage up to the extra row)', async (t) => {
    const server = await start(t);
    await createMany(server, ['sold', 'sold', 'available', 'sold']);
    const full = await server.request('/v1/pets?status=sold&limit=2');
    assert.deepEqual(((await json(full)) as { id: number }[]).map((pet) => pet.id), [1, 2]);
    assert.ok(nextOf(full), 'pet 4 follows');
    await patch(server, 4, { status: 'pending' });
    const last = await server.request('/v1/pets?status=sold&limit=2');
    assert.deepEqual(((await json(last)) as { id: number }[]).map((pet) => pet.id), [1, 2]);
    assert.equal(nextOf(last), null, 'no sold pet follows any more');
    await patch(server, 3, { status: 'sold' });
    assert.ok(nextOf(await server.request('/v1/pets?status=sold&limit=2')), 'and a new one between the page and the old extra row brings the link back');
  });

  test('a deleted pet leaves cached pages and lookups at once (journal of deletions)', async (t) => {
    const server = await start(t);
    await createMany(server, ['available', 'available', 'available']);
    assert.deepEqual(await ids(server, '/v1/pets?limit=2'), [1, 2]);
    assert.equal((await server.request('/v1/pets/2')).status, 200);
    assert.equal((await server.request('/v1/pets/2', { method: 'DELETE' })).status, 204);
    assert.deepEqual(await ids(server, '/v1/pets?limit=2'), [1, 3]);
    assert.equal((await server.request('/v1/pets/2')).status, 404);
  });

  test('a new pet appears on the cached last page at once (journal of inserts; last page without an end)', async (t) => {
    const server = await start(t);
    await createMany(server, ['available', 'available', 'available']);
    const fullBefore = await (await server.request('/v1/pets?limit=2')).text();
    assert.deepEqual(await ids(server, '/v1/pets?limit=2&cursor=YWZ0ZXI6Mg'), [3]);
    await createMany(server, ['available']);
    assert.deepEqual(await ids(server, '/v1/pets?limit=2&cursor=YWZ0ZXI6Mg'), [3, 4]);
    assert.equal(await (await server.request('/v1/pets?limit=2')).text(), fullBefore);
  });

  test('a change or deletion by another connection is seen by the next list and get (PRAGMA data_version)', async (t) => {
    const { server, other } = await withOther(t);
    await createMany(server, ['available', 'available', 'available']);
    assert.equal((await json(await server.request('/v1/pets/1'))).status, 'available');
    assert.deepEqual(await ids(server, '/v1/pets?limit=2'), [1, 2]);
    other.exec("UPDATE pets SET status = 'sold', version = version + 1 WHERE id = 1");
    const changed = await server.request('/v1/pets/1');
    assert.equal((await json(changed)).status, 'sold');
    assert.equal(changed.headers.get('etag'), '"1.2"');
    other.exec('DELETE FROM pets WHERE id = 2');
    assert.deepEqual(await ids(server, '/v1/pets?limit=2'), [1, 3]);
    assert.equal((await server.request('/v1/pets/1', { method: 'DELETE' })).status, 204);
    other.exec('DELETE FROM pets WHERE id = 3');
    assert.deepEqual(await ids(server, '/v1/pets'), []);
  });

  test('a change by another connection is seen by a request pipelined after it, even one read in the same turn', async (t) => {
    // data_version is read once per callback from the event loop, not once per turn: a request read
    // later in the same turn may have been sent after that read. Here another connection commits
    // while the server handles the first request of a turn, and then the client pipelines a request
    // behind one it had already sent on a second connection, which the same turn reads next.
    const { server, other } = await withOther(t);
    await createMany(server, ['available']);
    const request = (step: string) => `GET /v1/pets/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${server.key}\r\nX-Step: ${step}\r\n\r\n`;
    // Which turn of the event loop each request arrived in.
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const turns = new Map<string, number>();
    let onFirst = (_step: string) => {};
    const http = server.service.server;
    const watch = (req: { headers: Record<string, string | string[] | undefined> }) => {
      const step = String(req.headers['x-step']);
      turns.set(step, turn);
      if (step.startsWith('first')) onFirst(step);
    };
    // Runs after the app's own listener, which has read data_version by then (GET is synchronous).
    http.on('request', watch);
    t.after(() => {
      ticking = false;
      http.off('request', watch);
    });

    let exercised = 0;
    for (let attempt = 0; attempt < 20 && exercised < 3; attempt++) {
      other.exec("UPDATE pets SET name = 'before', version = version + 1 WHERE id = 1");
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal((await json(await server.request('/v1/pets/1'))).name, 'before', 'cached as it was before');
      const first = await openRaw(server.url);
      const second = await openRaw(server.url);
      onFirst = () => {
        onFirst = () => {};
        other.exec("UPDATE pets SET name = 'after', version = version + 1 WHERE id = 1");
        second.write(request(`pipelined-${attempt}`));
      };
      // Both connections are readable in the same poll, the first one first.
      first.write(request(`first-${attempt}`));
      second.write(request(`opener-${attempt}`));
      for (let wait = 0; wait < 200 && second.received().split('HTTP/1.1 ').length < 3; wait++) await new Promise((resolve) => setTimeout(resolve, 5));
      const answers = second.received().split('HTTP/1.1 ').slice(1);
      first.socket.destroy();
      second.socket.destroy();
      assert.equal(answers.length, 2, 'both requests of the second connection were answered');
      const pipelined = JSON.parse(answers[1]!.slice(answers[1]!.indexOf('\r\n\r\n') + 4)) as { name: string };
      assert.equal(pipelined.name, 'after', 'a request sent after the commit sees it');
      if (turns.get(`first-${attempt}`) === turns.get(`pipelined-${attempt}`)) exercised++;
    }
    assert.ok(exercised > 0, 'the pipelined request was read in the turn of the first one at least once');
  });

  test('a cached answer survives writes that cannot change it (no needless reads)', async (t) => {
    const server = await start(t);
    const reads = storeReads(server);
    await createMany(server, ['available', 'available', 'available', 'available', 'available', 'available']);
    await server.request('/v1/pets?limit=2');
    await server.request('/v1/pets/1');
    reads.length = 0;
    await patch(server, 5, { status: 'sold' }); // beyond the page's extra row (3) and not pet 1
    await server.request('/v1/pets/6', { method: 'DELETE' });
    await createMany(server, ['available']);
    reads.length = 0;
    await server.request('/v1/pets?limit=2');
    await server.request('/v1/pets/1');
    assert.deepEqual(reads, [], 'both answers came from the caches');
    await patch(server, 3, { status: 'sold' });
    reads.length = 0;
    await server.request('/v1/pets?limit=2');
    await server.request('/v1/pets/1');
    assert.deepEqual(reads, ['list after 0'], 'the page covers its extra row; pet 1 is untouched');
  });

  test('a filtered page survives the writes to pets that neither had nor have its status (journal of statuses)', async (t) => {
    const server = await start(t);
    await createMany(server, ['sold', 'available', 'sold', 'available']);
    assert.deepEqual(await ids(server, '/v1/pets?status=sold'), [1, 3]);
    const reads = storeReads(server);
    await createMany(server, ['available']); // a new pet, in the page's open range, of another status
    await patch(server, 4, { name: 'renamed' }); // an available pet in range
    await patch(server, 2, { status: 'pending' }); // from one other status to another
    reads.length = 0;
    assert.deepEqual(await ids(server, '/v1/pets?status=sold'), [1, 3]);
    assert.deepEqual(reads, [], 'answered from the cache');
    await patch(server, 4, { status: 'sold' }); // joins the filter
    assert.deepEqual(await ids(server, '/v1/pets?status=sold'), [1, 3, 4]);
    await createMany(server, ['sold']);
    assert.deepEqual(await ids(server, '/v1/pets?status=sold'), [1, 3, 4, 6]);
    await patch(server, 1, { status: 'available' }); // leaves it
    assert.deepEqual(await ids(server, '/v1/pets?status=sold'), [3, 4, 6]);
  });

  test('an order moves its pet: the pet by id and the pages that hold it are answered anew at once (journal of orders)', async (t) => {
    const server = await start(t);
    await createMany(server, ['available', 'available', 'available']);
    assert.equal((await json(await server.request('/v1/pets/2'))).status, 'available');
    assert.deepEqual(await ids(server, '/v1/pets?status=available'), [1, 2, 3]);
    assert.deepEqual(await ids(server, '/v1/pets?status=pending'), []);
    const placed = await server.post('/v1/store/orders', { petId: 2 });
    assert.equal(placed.status, 201);
    assert.equal((await json(await server.request('/v1/pets/2'))).status, 'pending');
    assert.deepEqual(await ids(server, '/v1/pets?status=available'), [1, 3]);
    assert.deepEqual(await ids(server, '/v1/pets?status=pending'), [2]);
    const order = (await json(placed)).id as number;
    const step = (status: string) => server.request(`/v1/store/orders/${order}`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify({ status }) });
    assert.equal((await step('approved')).status, 200);
    assert.equal((await step('completed')).status, 200);
    assert.equal((await json(await server.request('/v1/pets/2'))).status, 'sold');
    assert.deepEqual(await ids(server, '/v1/pets?status=pending'), []);
    assert.deepEqual(await ids(server, '/v1/pets?status=sold'), [2]);
  });

  // --- keyset pagination under changes and deletions --------------------------------------------

  /** Follows next links from `first`, calling `between(pageNumber)` after each page is read. */
  async function traverse(server: TestServer, first: string, between: (page: number) => Promise<void>) {
    const seen: { id: number; name: string; status: string }[] = [];
    let next: string | null = first;
    for (let page = 1; next; page++) {
      const response: Response = await server.request(next);
      assert.equal(response.status, 200);
      seen.push(...((await json(response)) as typeof seen));
      next = nextOf(response);
      await between(page);
    }
    return seen;
  }

  test('a traversal sees every pet that still exists when its page is read, exactly once, with the values of that moment', async (t) => {
    const server = await start(t);
    await createMany(server, Array.from({ length: 12 }, () => 'available' as const));
    const seen = await traverse(server, '/v1/pets?limit=3', async (page) => {
      if (page === 1) {
        // Behind the traversal (already read) and ahead of it (not yet read).
        await server.request('/v1/pets/2', { method: 'DELETE' });
        await server.request('/v1/pets/5', { method: 'DELETE' });
        await patch(server, 1, { name: 'changed behind' });
        await patch(server, 7, { name: 'changed ahead' });
      }
      if (page === 2) await server.request('/v1/pets/9', { method: 'DELETE' });
    });
    assert.deepEqual(seen.map((pet) => pet.id), [1, 2, 3, 4, 6, 7, 8, 10, 11, 12]);
    assert.equal(seen.find((pet) => pet.id === 1)!.name, 'pet 1', 'read before it changed');
    assert.equal(seen.find((pet) => pet.id === 7)!.name, 'changed ahead', 'read after it changed');
  });

  test('deleting the pet a cursor points at does not lose or repeat the pets after it', async (t) => {
    const server = await start(t);
    await createMany(server, Array.from({ length: 7 }, () => 'available' as const));
    const seen = await traverse(server, '/v1/pets?limit=3', async (page) => {
      if (page === 1) await server.request('/v1/pets/3', { method: 'DELETE' }); // the last pet of page 1, where the cursor points
    });
    assert.deepEqual(seen.map((pet) => pet.id), [1, 2, 3, 4, 5, 6, 7]);
  });

  test('a filtered traversal sees a pet whose status changes while it runs at most once', async (t) => {
    const server = await start(t);
    await createMany(server, Array.from({ length: 10 }, () => 'sold' as const));
    const seen = await traverse(server, '/v1/pets?status=sold&limit=2', async (page) => {
      if (page === 1) {
        await patch(server, 2, { status: 'available' }); // already seen: leaves
        await patch(server, 2, { status: 'sold' }); // and comes back behind the cursor: not seen again
        await patch(server, 6, { status: 'pending' }); // ahead: not seen, it no longer matches
      }
      if (page === 2) {
        await patch(server, 6, { status: 'sold' }); // ahead again, matching when its page is read: seen once
        await patch(server, 3, { status: 'available' }); // seen on page 2 already
      }
    });
    assert.deepEqual(seen.map((pet) => pet.id), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert.ok(seen.every((pet) => pet.status === 'sold'), 'every pet was sold when its page was read');
    assert.equal(new Set(seen.map((pet) => pet.id)).size, seen.length, 'no pet twice');
  });

  test('a filtered traversal: pets that leave the filter ahead of it are not seen, pets that join ahead of it are', async (t) => {
    const server = await start(t);
    await createMany(server, ['sold', 'available', 'sold', 'available', 'sold', 'available', 'sold']);
    const seen = await traverse(server, '/v1/pets?status=sold&limit=1', async (page) => {
      if (page === 1) {
        await patch(server, 5, { status: 'available' });
        await patch(server, 6, { status: 'sold' });
      }
    });
    assert.deepEqual(seen.map((pet) => pet.id), [1, 3, 6, 7]);
  });
});
