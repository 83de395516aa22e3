/** What only a shared engine meets: another instance holding or having used an Idempotency-Key. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPetsStore } from '../../../src/storage/postgres/pets-store.ts';
import { isConflict, type Pet } from '../../../src/storage/pets.ts';
import type { IdempotencyWrite } from '../../../src/storage/idempotency.ts';
import { describeWithPostgres, openTestDatabase } from '../../support/postgres.ts';

const T0 = Date.UTC(2026, 0, 1);

function remembering(key: string): IdempotencyWrite<Pet> {
  return { apiKeyId: 'key_a', key, fingerprint: 'fp', createdAt: T0, respond: (pet: Pet) => ({ status: 201, headers: {}, body: String(pet.id) }) };
}

describeWithPostgres('PostgreSQL pets: idempotency across instances', (cluster) => {

  test('a key claimed by another transaction is in flight; once committed it is recorded', async (t) => {
    const { sql, url } = await openTestDatabase(t, cluster());
    const { sql: other } = await openTestDatabase(t, cluster(), { url });
    const pets = createPetsStore(sql);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let claimed!: () => void;
    const isClaimed = new Promise<void>((resolve) => (claimed = resolve));
    // Another instance's batch, between its claim and its commit.
    const otherBatch = other.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(hashtextextended(${'key_a k1'}, 0))`;
      claimed();
      await held;
    });
    await isClaimed;
    const [during, plain] = await pets.insertMany([{ name: 'Rex', categoryId: 1n, status: 'available', idempotency: remembering('k1') }, { name: 'Tom', categoryId: 1n, status: 'available' }]);
    assert.deepEqual(during, { conflict: 'in_flight' });
    assert.ok(!isConflict(plain!), 'the rest of the batch is stored');
    release();
    await otherBatch;
    const [first] = await pets.insertMany([{ name: 'Rex', categoryId: 1n, status: 'available', idempotency: remembering('k1') }]);
    const [second] = await pets.insertMany([{ name: 'Rex', categoryId: 1n, status: 'available', idempotency: remembering('k1') }]);
    assert.ok(!isConflict(first!));
    assert.deepEqual(second, { conflict: 'recorded', record: { fingerprint: 'fp', createdAt: T0, response: { status: 201, headers: {}, body: String((first as Pet).id) } } });
  });

  test('the same key sent to three instances at once creates one pet', async (t) => {
    const { url, sql } = await openTestDatabase(t, cluster());
    const stores = await Promise.all([0, 1, 2].map(async () => createPetsStore((await openTestDatabase(t, cluster(), { url })).sql)));
    for (let round = 0; round < 10; round++) {
      const results = (await Promise.all(stores.map((store) => store.insertMany([{ name: `r${round}`, categoryId: 1n, status: 'available', idempotency: remembering(`round-${round}`) }])))).flat();
      assert.equal(results.filter((result) => !isConflict(result)).length, 1, `round ${round}: ${JSON.stringify(results, (_, v) => (typeof v === 'bigint' ? String(v) : v))}`);
    }
    const rows = await sql<{ count: string }[]>`SELECT count(*)::text AS count FROM pets`;
    assert.equal(rows[0]!.count, '10');
  });

  test('two instances changing one pet with the same expected version: exactly one change applies', async (t) => {
    const { url, sql } = await openTestDatabase(t, cluster());
    const stores = await Promise.all([0, 1, 2].map(async () => createPetsStore((await openTestDatabase(t, cluster(), { url })).sql)));
    const [pet] = (await stores[0]!.insertMany([{ name: 'Rex', categoryId: 1n, status: 'available' }])) as Pet[];
    for (let version = 1; version <= 10; version++) {
      const outcomes = (await Promise.all(stores.map((store, i) =>
        store.changeMany([{ kind: 'update', id: BigInt(pet!.id), patch: { name: `by ${i}` }, expectedVersion: version }])))).flat();
      assert.equal(outcomes.filter((outcome) => outcome.kind === 'updated').length, 1, `version ${version}`);
      assert.equal(outcomes.filter((outcome) => outcome.kind === 'version_mismatch').length, 2);
    }
    const rows = await sql<{ version: number }[]>`SELECT version FROM pets`;
    assert.equal(rows[0]!.version, 11);
  });
});
