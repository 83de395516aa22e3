/**
 * The storage contract (store-contract.ts, orders-contract.ts, webhooks-contract.ts) on SQLite as the server runs it:
 * a file opened by the engine opener (src/storage/sqlite/engine.ts), its stores reading on their
 * connection and writing inline on it. Keys are made on a connection of
 * their own, as the keys command makes them (the engine's stores only read keys).
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

async function open(t: { after(fn: () => unknown): void }, writer: 'inline') {
  const dir = mkdtempSync(join(tmpdir(), 'pets-engine-contract-'));
  const path = join(dir, 'pets.db');
  const { engine } = await openSqliteEngine({
    path, writer, threadEntry: new URL('../support/writer-thread.ts', import.meta.url), log: () => {},
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
  return { keys, pets: engine.stores.pets, orders: engine.stores.orders, webhooks: engine.stores.webhooks };
}

describe('a file with the inline writer', () => {
  runStoreContract({
    open: (t) => open(t, 'inline'),
    databaseFailure: () => Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 }),
  });
  runOrdersContract({
    open: async (t) => ({ ...(await open(t, 'inline')), settle: async () => {} }),
  });
  runWebhooksContract({ open: (t) => open(t, 'inline') });
});

// Not on the writer thread: it builds the answer an Idempotency-Key record remembers with the
// API's own functions (a function does not cross threads), not the contracts', so their record
// tests, which remember answers of their own, cannot run on it; the HTTP suites run it
// (test/support/test-server.ts's `writerThread`).
