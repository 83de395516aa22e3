/**
 * The storage contract (test/contract/store-contract.ts, orders-contract.ts) on a real PostgreSQL,
 * one database per test: directly, and through PgBouncer in transaction pooling mode, where each
 * transaction and each statement outside one may be given another server connection.
 */
import { createKeysStore } from '../../src/storage/postgres/keys-store.ts';
import { createOrdersStore } from '../../src/storage/postgres/orders-store.ts';
import { createPetsStore } from '../../src/storage/postgres/pets-store.ts';
import { describeWithPgbouncer, describeWithPostgres, openTestDatabase, type PostgresCluster } from '../support/postgres.ts';
import { createEventsStore } from '../../src/storage/postgres/event-log.ts';
import { runEventsContract } from './events-contract.ts';
import { runOrdersContract } from './orders-contract.ts';
import { runStoreContract } from './store-contract.ts';
import { runWebhooksContract } from './webhooks-contract.ts';
import { createWebhooksStore } from '../../src/storage/postgres/webhooks-store.ts';
import { fillPostgresDisk } from '../support/full-disk.ts';

/**
 * Both contracts on the databases `database()` makes (a fresh one per test, reached as the test
 * reaches it), set for a pooler in transaction mode or not.
 */
function runContracts(database: () => Promise<string>, cluster: () => PostgresCluster, transactionPooler: boolean): void {
  runStoreContract({
    async open(t) {
      const { sql } = await openTestDatabase(t, cluster(), { url: await database(), transactionPooler });
      const putPet = async (id: bigint) => void await sql`INSERT INTO pets (id, name, category_id, status) OVERRIDING SYSTEM VALUE VALUES (${id.toString()}::bigint, 'by hand', 1, 'available')`;
      return { keys: createKeysStore(sql, { appEnv: 'development' }), pets: createPetsStore(sql), fillDisk: () => fillPostgresDisk(sql), putPet };
    },
  });

  runOrdersContract({
    async open(t) {
      const { sql } = await openTestDatabase(t, cluster(), { url: await database(), transactionPooler });
      const orders = createOrdersStore(sql);
      // The chore that folds the counts' pending changes, run until nothing is left.
      const settle = async () => { while (await orders.foldCounts(2) > 0); };
      return { keys: createKeysStore(sql, { appEnv: 'development' }), pets: createPetsStore(sql), orders, settle };
    },
  });

  runEventsContract({
    async open(t) {
      const { sql } = await openTestDatabase(t, cluster(), { url: await database(), transactionPooler });
      return { keys: createKeysStore(sql, { appEnv: 'development' }), pets: createPetsStore(sql), orders: createOrdersStore(sql), events: createEventsStore(sql) };
    },
  });

  runWebhooksContract({
    async open(t) {
      const { sql } = await openTestDatabase(t, cluster(), { url: await database(), transactionPooler });
      return { keys: createKeysStore(sql, { appEnv: 'development' }), pets: createPetsStore(sql), orders: createOrdersStore(sql), webhooks: createWebhooksStore(sql), events: createEventsStore(sql) };
    },
  });
}

describeWithPostgres('the storage contract on PostgreSQL', (cluster) => {
  runContracts(() => cluster().createDatabase(), cluster, false);
});

describeWithPgbouncer('the storage contract on PostgreSQL through PgBouncer in transaction pooling mode', (cluster, pgbouncer) => {
  runContracts(async () => pgbouncer().url(await cluster().createDatabase()), cluster, true);
});
