/**
 * The journal of the writes to pets (src/storage/sqlite/writer/journal.ts) and the log it is fed
 * from (touched-pets.ts) keep ids as 64-bit integers: exact beyond 2^53, where a double rounds
 * 2^53 + 1 onto 2^53 and a cached answer covering the ids after 2^53 would miss a write to it.
 * (The service assigns ids from 1, so it never gets there by itself; a row put there by other
 * means must still invalidate what it touches.)
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closeDatabase, openDatabase } from '../../../src/storage/sqlite/database.ts';
import { journalIn, merged, recordWrites, touchedPets, writtenSince } from '../../../src/storage/sqlite/writer.ts';
import { ANY_STATUS, statusBit } from '../../../src/storage/pets.ts';

const TWO_53 = 2n ** 53n;

test('a write to pet 2^53 + 1 is seen by an answer that covers the ids after 2^53, and by none after 2^53 + 1', () => {
  const journal = journalIn();
  recordWrites(journal, [{ from: TWO_53 + 1n, to: TWO_53 + 1n, statuses: ANY_STATUS }]);
  assert.equal(journal.from[0], TWO_53 + 1n);
  assert.equal(journal.to[0], TWO_53 + 1n);
  assert.equal(writtenSince(journal, 0, TWO_53, Infinity), true);
  assert.equal(writtenSince(journal, 0, TWO_53 + 1n, Infinity), false, 'the lower end is exclusive');
  assert.equal(writtenSince(journal, 0, 0n, Number(TWO_53) - 1), false);
});

test('the log merges consecutive ids beyond 2^53 into one touch, and only those', () => {
  const sold = BigInt(statusBit('sold'));
  assert.deepEqual(merged([{ id: TWO_53 + 2n, statuses: sold }, { id: TWO_53 + 1n, statuses: sold }]), [
    { from: TWO_53 + 1n, to: TWO_53 + 2n, statuses: Number(sold) },
  ]);
  // 2^53 + 1 and 2^53 + 3 are 2^53 and 2^53 + 4 as doubles; as integers they are two touches.
  assert.deepEqual(merged([{ id: TWO_53 + 3n, statuses: sold }, { id: TWO_53 + 1n, statuses: sold }]), [
    { from: TWO_53 + 1n, to: TWO_53 + 1n, statuses: Number(sold) },
    { from: TWO_53 + 3n, to: TWO_53 + 3n, statuses: Number(sold) },
  ]);
});

test('the database logs a row beyond 2^53 with its exact id, whoever wrote it on the connection', (t) => {
  const db = openDatabase(':memory:');
  t.after(() => closeDatabase(db));
  const take = touchedPets(db);
  db.exec('BEGIN');
  db.prepare("INSERT INTO pets (id, name, category_id, status) VALUES (?, 'far', 1, 'pending')").run(TWO_53 + 1n);
  db.prepare("UPDATE pets SET status = 'sold' WHERE id = ?").run(TWO_53 + 1n);
  const touches = take();
  db.exec('COMMIT');
  assert.deepEqual(touches, [
    { from: TWO_53 + 1n, to: TWO_53 + 1n, statuses: statusBit('pending') },
    { from: TWO_53 + 1n, to: TWO_53 + 1n, statuses: statusBit('pending') | statusBit('sold') },
  ]);
  const journal = journalIn();
  recordWrites(journal, touches);
  assert.equal(writtenSince(journal, 0, TWO_53, Infinity, statusBit('sold')), true);
  assert.equal(writtenSince(journal, 0, TWO_53, Infinity, statusBit('available')), false, 'neither its old nor its new status');
});
