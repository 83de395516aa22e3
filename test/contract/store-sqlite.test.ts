/** The storage contract (test/contract/store-contract.ts) on SQLite. */
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';
import { runStoreContract } from './store-contract.ts';

runStoreContract({
  async open(t) {
    const db = openDatabase(':memory:');
    t.after(() => db.close());
    return { keys: createKeysStore(db, { appEnv: 'development' }), pets: createPetsStore(db) };
  },
  databaseFailure: () => Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 }),
});
