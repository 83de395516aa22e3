/** The storage contract (test/contract/store-contract.ts, orders-contract.ts, events-contract.ts, webhooks-contract.ts) on SQLite. */
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createKeysStore } from '../../src/storage/sqlite/keys-store.ts';
import { createOrdersStore } from '../../src/storage/sqlite/orders-store.ts';
import { createPetsStore } from '../../src/storage/sqlite/pets-store.ts';
import { createEventsStore } from '../../src/storage/sqlite/events-store.ts';
import { runEventsContract } from './events-contract.ts';
import { runOrdersContract } from './orders-contract.ts';
import { runStoreContract } from './store-contract.ts';
import { runWebhooksContract } from './webhooks-contract.ts';
import { createWebhooksStore } from '../../src/storage/sqlite/webhooks-store.ts';
import { FULL_DISK } from '../support/full-disk.ts';

function open(t: { after(fn: () => unknown): void }) {
  const db = openDatabase(':memory:');
  t.after(() => db.close());
  return db;
}

runStoreContract({
  async open(t) {
    const db = open(t);
    // The connection writes itself: no page more than it has, as on a full disk.
    const fillDisk = async () => { db.exec(FULL_DISK); };
    const putPet = async (id: bigint) => void db.prepare("INSERT INTO pets (id, name, category_id, status) VALUES (?, 'by hand', 1, 'available')").run(id);
    return { keys: createKeysStore(db, { appEnv: 'development' }), pets: createPetsStore(db), fillDisk, putPet };
  },
});

runOrdersContract({
  async open(t) {
    const db = open(t);
    // Triggers keep SQLite's counts exact in every write: there is nothing to settle.
    return { keys: createKeysStore(db, { appEnv: 'development' }), pets: createPetsStore(db), orders: createOrdersStore(db), settle: async () => {} };
  },
});

runEventsContract({
  async open(t) {
    const db = open(t);
    return { keys: createKeysStore(db, { appEnv: 'development' }), pets: createPetsStore(db), orders: createOrdersStore(db), events: createEventsStore(db) };
  },
});

runWebhooksContract({
  async open(t) {
    const db = open(t);
    return { keys: createKeysStore(db, { appEnv: 'development' }), pets: createPetsStore(db), orders: createOrdersStore(db), webhooks: createWebhooksStore(db), events: createEventsStore(db) };
  },
});
