/** The storage contract (test/contract/store-contract.ts, orders-contract.ts) on a real PostgreSQL, one database per test. */
import { createKeysStore } from '../../src/storage/postgres/keys-store.ts';
import { createOrdersStore } from '../../src/storage/postgres/orders-store.ts';
import { createPetsStore } from '../../src/storage/postgres/pets-store.ts';
import { describeWithPostgres, openTestDatabase } from '../support/postgres.ts';
import { runOrdersContract } from './orders-contract.ts';
import { runStoreContract } from './store-contract.ts';

describeWithPostgres('the storage contract on PostgreSQL', (cluster) => {

  runStoreContract({
    async open(t) {
      const { sql } = await openTestDatabase(t, cluster());
      return { keys: createKeysStore(sql, { appEnv: 'development' }), pets: createPetsStore(sql) };
    },
    // As the driver reports a connection that PostgreSQL closed (a restart, a terminated backend).
    databaseFailure: () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }),
  });

  runOrdersContract({
    async open(t) {
      const { sql } = await openTestDatabase(t, cluster());
      const orders = createOrdersStore(sql);
      // The chore that folds the counts' pending changes, run until nothing is left.
      const settle = async () => { while (await orders.foldCounts(2) > 0); };
      return { keys: createKeysStore(sql, { appEnv: 'development' }), pets: createPetsStore(sql), orders, settle };
    },
  });
});
