/**
 * The inline writer (src/storage/sqlite/writer/inline.ts): a group is answered only once the
 * `fdatasync` of the WAL that began after its COMMIT has returned; the groups committed meanwhile
 * wait for the next one; a failing `fdatasync` fails every batch waiting and says the server must
 * stop; the event feed shows nothing of a group before it is durable; a batch is committed as soon
 * as the code that submitted it has run, not a turn later; a sync that returns at once (on the event
 * loop) answers in the same turn. The `fdatasync` is the test's, so that the test decides when it
 * returns.
 */
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeDatabase, openDatabase } from '../../../src/storage/sqlite/database.ts';
import { startInlineWriter, type DataSync } from '../../../src/storage/sqlite/writer.ts';
import { DatabaseUnavailableError } from '../../../src/storage/errors.ts';
import { EVENT_TYPES } from '../../../src/storage/events.ts';
import { createEventsStore } from '../../../src/storage/sqlite/events-store.ts';

/** An fdatasync the test lets return, with the error it chooses. */
function heldSync() {
  const calls: ((error: Error | null) => void)[] = [];
  const sync: DataSync = (_fd, done) => void calls.push(done);
  return { sync, calls };
}

function open(t: TestContext, sync: DataSync) {
  const dir = mkdtempSync(join(tmpdir(), 'pets-inline-'));
  const db = openDatabase(join(dir, 'pets.db'));
  const writer = startInlineWriter(db, { sync });
  const other = openDatabase(join(dir, 'pets.db'));
  t.after(() => {
    other.close();
    closeDatabase(db);
    rmSync(dir, { recursive: true, force: true });
  });
  const count = () => (other.prepare('SELECT count(*) AS n FROM pets').get() as { n: number }).n;
  return { db, writer, count };
}

const pet = (name: string) => ({ name, categoryId: 1n, status: 'available' as const });
const turn = () => new Promise((resolve) => setImmediate(resolve));

test('a group is committed at once with synchronous=NORMAL, and answered only once its fdatasync has returned', async (t) => {
  const { sync, calls } = heldSync();
  const { db, writer, count } = open(t, sync);
  assert.equal((db.prepare('PRAGMA synchronous').get() as { synchronous: number }).synchronous, 1);
  let answered = false;
  const first = Promise.resolve(writer.submit('insertPets', [pet('a'), pet('b')]));
  void first.then(() => (answered = true));
  await turn();
  assert.equal(count(), 2, 'committed');
  assert.equal(calls.length, 1, 'one fdatasync started');
  await turn();
  assert.equal(answered, false, 'not answered before the fdatasync returns');
  // A group committed while that fdatasync runs waits for the next one.
  const second = Promise.resolve(writer.submit('insertPets', [pet('c')]));
  await turn();
  assert.equal(count(), 3);
  assert.equal(calls.length, 1, 'one fdatasync at a time');
  calls[0]!(null);
  assert.equal((await first).length, 2);
  assert.equal(calls.length, 2, 'the next fdatasync covers the second group');
  let secondAnswered = false;
  void second.then(() => (secondAnswered = true));
  await turn();
  assert.equal(secondAnswered, false);
  calls[1]!(null);
  assert.equal((await second).length, 1);
  assert.equal(writer.journal.count[0], 2n, 'each group journaled');
  await writer.close();
});

test('a batch submitted in the setImmediate phase, as the create path flushes its turn, is committed and syncing before the event loop goes on', async (t) => {
  const { sync, calls } = heldSync();
  const { writer, count } = open(t, sync);
  const seen = await new Promise<{ rows: number; syncs: number }>((resolve) => {
    setImmediate(() => {
      void writer.submit('insertPets', [pet('a')]);
      // Before the event loop goes on to anything else (a setImmediate here would run only in
      // the next turn, after that turn's sockets are read, as would a commit scheduled so).
      queueMicrotask(() => resolve({ rows: count(), syncs: calls.length }));
    });
  });
  assert.deepEqual(seen, { rows: 1, syncs: 1 }, 'committed, and its fdatasync started, without waiting for a turn');
  calls[0]!(null);
  await writer.close();
});

test('a sync that returns at once, as one on the event loop does, answers its group before the loop goes on', async (t) => {
  let syncs = 0;
  const { writer, count } = open(t, (_fd, done) => {
    syncs++;
    done(null);
  });
  let turned = false;
  setImmediate(() => (turned = true));
  const outcomes = await writer.submit('insertPets', [pet('a'), pet('b')]);
  assert.deepEqual([outcomes.length, count(), syncs, turned], [2, 2, 1, false], 'committed, synced once and answered in the same turn');
  // The next group gets a sync of its own: none is left waiting.
  await writer.submit('insertPets', [pet('c')]);
  assert.equal(syncs, 2);
  await writer.close();
});

test('a failing fdatasync fails every batch waiting for it and those after, and tells the owner to stop', async (t) => {
  const { sync, calls } = heldSync();
  const { writer } = open(t, sync);
  const waiting = Promise.resolve(writer.submit('insertPets', [pet('a')]));
  await turn();
  calls[0]!(Object.assign(new Error('EIO: i/o error, fdatasync'), { code: 'EIO' }));
  await assert.rejects(waiting, (error: unknown) => error instanceof DatabaseUnavailableError && error.reason === 'EIO');
  assert.match(await writer.failed, /could not be made durable/);
  await assert.rejects(Promise.resolve(writer.submit('insertPets', [pet('b')])), DatabaseUnavailableError);
  await writer.close();
});

test('close answers what was submitted, then refuses', async (t) => {
  const { writer } = open(t, (_fd, done) => setImmediate(() => done(null)));
  const submitted = Promise.resolve(writer.submit('insertPets', [pet('a')]));
  await writer.close();
  assert.equal((await submitted).length, 1);
  await assert.rejects(Promise.resolve(writer.submit('insertPets', [pet('b')])), DatabaseUnavailableError);
});

test('the event feed on the writer\'s own connection shows a group\'s events only once its fdatasync has returned', async (t) => {
  const { sync, calls } = heldSync();
  const { db, writer } = open(t, sync);
  const events = createEventsStore(db, writer.submit, writer.durableEventId);
  const everything = { afterId: 0, limit: 100, types: [...EVENT_TYPES], account: null };
  const created = Promise.resolve(writer.submit('insertPets', [pet('a'), pet('b')]));
  await turn();
  assert.equal((db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n, 2, 'committed with the pets');
  assert.deepEqual([await events.page(everything), await events.latestId()], [[], 0], 'not shown before it is durable');
  calls[0]!(null);
  await created;
  assert.deepEqual((await events.page(everything)).map((event) => event.type), ['pet.created', 'pet.created']);
  assert.equal(await events.latestId(), 2);
  await writer.close();
});
