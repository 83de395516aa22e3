/** The storage contract (test/storage/store-contract.ts) on a real PostgreSQL, one database per test. */
import { after, before, describe } from 'node:test';
import { createPostgresKeysStore } from '../../../src/storage/postgres/keys-store.ts';
import { createPostgresPetsStore } from '../../../src/storage/postgres/pets-store.ts';
import { openTestDatabase, postgresSkip, startPostgres, type PostgresCluster } from '../../support/postgres.ts';
import { runStoreContract } from '../store-contract.ts';

describe('the storage contract on PostgreSQL', { skip: postgresSkip }, () => {
  let cluster: PostgresCluster;
  before(async () => {
    cluster = await startPostgres();
  });
  after(() => cluster.remove());

  runStoreContract({
    async open(t) {
      const { sql } = await openTestDatabase(t, cluster);
      return { keys: createPostgresKeysStore(sql, { appEnv: 'development' }), pets: createPostgresPetsStore(sql) };
    },
  });
});
