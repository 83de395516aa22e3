/**
 * The storage contract (store-contract.ts, orders-contract.ts, webhooks-contract.ts) on SQLite as the server runs it:
 * a file opened by the engine opener (src/storage/sqlite/engine.ts), its stores reading on their
 * connection and writing either inline on it or through the writer thread (the tests' entry,
 * test/support/writer-thread.ts, which is src/writer.ts with a way to fault its connection).
 * Keys are made on a connection of their own, as the keys command makes them (the engine's
 * stores only read keys).
 */
import { describe } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { closeDatabase, openDatabase } from '../../src/storage/sqlite/database.ts';
import { openSqliteEngine } from '../../src/storage/sqlite/engine.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import { systemClock } from '../../src/clock.ts';
import type { KeysStore } from '../../src/storage/keys.ts';
import { runOrdersContract } from './orders-contract.ts';
import { runStoreContract } from './store-contract.ts';
import { runWebhooksContract } from './webhooks-contract.ts';
import { TEST_WRITER_ENTRY, writerFaults } from '../support/test-server.ts';
import { FULL_DISK } from '../support/full-disk.ts';

async function open(t: { after(fn: () => unknown): void }, writer: 'inline' | 'thread') {
  const dir = mkdtempSync(join(tmpdir(), 'pets-engine-contract-'));
  const path = join(dir, 'pets.db');
  const { engine } = await openSqliteEngine({
    path, writer, threadEntry: TEST_WRITER_ENTRY, log: () => {},
    stores: { appEnv: 'development', clock: systemClock, banThreshold: 30, banSeconds: 900 },
  }, () => null);
  const keysDb = openDatabase(path);
  t.after(async () => {
    closeDatabase(keysDb);
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });
  // The keys command's connection writes; the engine's keys store reads them (and sees its commits).
  const written = createKeysStore(keysDb, { appEnv: 'development' });
  const read = engine.stores.keys;
  const keys: KeysStore = {
    findByKey: (key, now) => read.findByKey(key, now),
    findByHash: (hash, now) => read.findByHash(hash, now),
    get: (id) => read.get(id),
    list: () => read.list(),
    create: (input) => written.create(input),
    createFirst: (input) => written.createFirst(input),
    revoke: (id, now) => written.revoke(id, now),
    rotate: (id, grace, now) => written.rotate(id, grace, now),
    setScopes: (id, scopes) => written.setScopes(id, scopes),
  };
  // On the connection that writes: the inline writer's is the engine's, the thread's is reached through its channel.
  const fillDisk = async () => {
    if (engine.kind !== 'thread') return void engine.db.exec(FULL_DISK);
    // A write through the thread first: its module has loaded, so it listens for the statement.
    await engine.stores.pets.purgeIdempotencyRecords(0, 0);
    await writerFaults(path)(FULL_DISK);
  };
  // Through the keys command's connection: a commit the engine's connections did not make.
  const putPet = async (id: bigint) => void keysDb.prepare("INSERT INTO pets (id, name, category_id, status) VALUES (?, 'by hand', 1, 'available')").run(id);
  return { keys, pets: engine.stores.pets, orders: engine.stores.orders, webhooks: engine.stores.webhooks, events: engine.stores.events, fillDisk, putPet };
}

for (const writer of ['inline', 'thread'] as const) {
  describe(`a file with the ${writer} writer`, () => {
    runStoreContract({ open: (t) => open(t, writer) });
    runOrdersContract({ open: async (t) => ({ ...(await open(t, writer)), settle: async () => {} }) });
    runWebhooksContract({ open: (t) => open(t, writer) });
  });
}
