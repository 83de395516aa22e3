/** What only a shared engine meets (another instance holding or having used an Idempotency-Key), and how its batches isolate a failing statement. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPetsStore } from '../../../src/storage/postgres/pets-store.ts';
import { isConflict, type Pet } from '../../../src/storage/pets.ts';
import { allSucceeded, isItemFailure, type ItemOutcome } from '../../../src/lib/item-outcome.ts';
import type { CreationResult } from '../../../src/storage/pets.ts';
import { DatabaseUnavailableError } from '../../../src/storage/errors.ts';
import type { PostgresSql } from '../../../src/storage/postgres/driver.ts';
import type { IdempotencyWrite } from '../../../src/storage/idempotency.ts';
import { describeWithPostgres, openTestDatabase } from '../../support/postgres.ts';

const T0 = Date.UTC(2026, 0, 1);

function remembering(key: string): IdempotencyWrite {
  return { apiKeyId: 'key_a', key, fingerprint: 'fp', createdAt: T0 };
}

/**
 * A seam in the database: inserting a pet named `name` fails with SQLSTATE `code`, and every
 * attempt is counted in a sequence (which no rollback undoes).
 */
async function failInsertsOf(sql: PostgresSql, name: string, code: string): Promise<() => Promise<number>> {
  await sql.unsafe(`
    CREATE SEQUENCE attempts;
    CREATE FUNCTION fail_insert() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.name = '${name}' THEN
          PERFORM nextval('attempts');
          RAISE EXCEPTION 'injected' USING ERRCODE = '${code}';
        END IF;
        RETURN NEW;
      END $$;
    CREATE TRIGGER fail_insert BEFORE INSERT ON pets FOR EACH ROW EXECUTE FUNCTION fail_insert();`);
  return async () => Number((await sql<{ n: string }[]>`SELECT last_value::text AS n FROM attempts WHERE is_called`)[0]?.n ?? 0);
}

/**
 * Another instance's batch between its claim of `key` (the advisory lock createPet takes) and its
 * commit: resolves once the lock is held; `release` lets that transaction commit, and resolves
 * when it has.
 */
async function claimElsewhere(other: PostgresSql, key: string): Promise<{ release(): Promise<void> }> {
  const held = Promise.withResolvers<void>();
  const claimed = Promise.withResolvers<void>();
  const batch = other.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`;
    claimed.resolve();
    await held.promise;
  });
  await claimed.promise;
  return {
    release: async () => {
      held.resolve();
      await batch;
    },
  };
}

function summary(outcome: ItemOutcome<CreationResult>): string {
  if (isItemFailure(outcome)) return `failed ${(outcome.error as { code?: string }).code}`;
  return isConflict(outcome) ? outcome.conflict : outcome.name;
}

describeWithPostgres('PostgreSQL pets: idempotency across instances, and batches whose statements fail', (cluster) => {

  test('a key claimed by another transaction is in flight; once committed it is recorded', async (t) => {
    const { sql, url } = await openTestDatabase(t, cluster());
    const { sql: other } = await openTestDatabase(t, cluster(), { url });
    const pets = createPetsStore(sql);
    const elsewhere = await claimElsewhere(other, 'key_a k1');
    const [during, plain] = allSucceeded(await pets.insertMany([{ name: 'Rex', categoryId: 1n, status: 'available', idempotency: remembering('k1') }, { name: 'Tom', categoryId: 1n, status: 'available' }]));
    assert.deepEqual(during, { conflict: 'in_flight' });
    assert.ok(!isConflict(plain!), 'the rest of the batch is stored');
    await elsewhere.release();
    const [first] = allSucceeded(await pets.insertMany([{ name: 'Rex', categoryId: 1n, status: 'available', idempotency: remembering('k1') }]));
    const [second] = allSucceeded(await pets.insertMany([{ name: 'Rex', categoryId: 1n, status: 'available', idempotency: remembering('k1') }]));
    assert.ok(!isConflict(first!));
    assert.deepEqual(second, { conflict: 'recorded', record: { fingerprint: 'fp', createdAt: T0, made: first } });
  });

  test('the same key sent to three instances at once creates one pet', async (t) => {
    const { url, sql } = await openTestDatabase(t, cluster());
    const stores = await Promise.all([0, 1, 2].map(async () => createPetsStore((await openTestDatabase(t, cluster(), { url })).sql)));
    for (let round = 0; round < 10; round++) {
      const results = allSucceeded((await Promise.all(stores.map((store) => store.insertMany([{ name: `r${round}`, categoryId: 1n, status: 'available', idempotency: remembering(`round-${round}`) }])))).flat());
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
      const outcomes = allSucceeded((await Promise.all(stores.map((store, i) =>
        store.changeMany([{ kind: 'update', id: BigInt(pet!.id), patch: { name: `by ${i}` }, expectedVersion: version, now: 0 }])))).flat());
      assert.equal(outcomes.filter((outcome) => outcome.kind === 'updated').length, 1, `version ${version}`);
      assert.equal(outcomes.filter((outcome) => outcome.kind === 'version_mismatch').length, 2);
    }
    const rows = await sql<{ version: number }[]>`SELECT version FROM pets`;
    assert.equal(rows[0]!.version, 11);
  });

  test('a statement that fails for one creation: the batch runs again one by one, that creation fails alone, and a key held elsewhere stays in flight', async (t) => {
    const { sql, url } = await openTestDatabase(t, cluster());
    const { sql: other } = await openTestDatabase(t, cluster(), { url });
    const attempts = await failInsertsOf(sql, 'Broken', 'P0001');
    const pets = createPetsStore(sql);
    const elsewhere = await claimElsewhere(other, 'key_a held');
    const outcomes = await pets.insertMany([
      { name: 'Rex', categoryId: 1n, status: 'available', idempotency: remembering('k1') },
      { name: 'Broken', categoryId: 1n, status: 'available', idempotency: remembering('k2') },
      { name: 'Held', categoryId: 1n, status: 'available', idempotency: remembering('held') },
      { name: 'Tom', categoryId: 1n, status: 'available' },
      { name: 'Rex', categoryId: 1n, status: 'available', idempotency: remembering('k1') },
    ]);
    await elsewhere.release();
    assert.deepEqual(outcomes.map(summary), ['Rex', 'failed P0001', 'in_flight', 'Tom', 'recorded']);
    assert.equal(await attempts(), 2, 'once together, once in its own savepoint');
    const rows = await sql<{ name: string }[]>`SELECT name FROM pets ORDER BY id`;
    assert.deepEqual(rows.map((row) => row.name), ['Rex', 'Tom']);
    const keys = await sql<{ idempotency_key: string }[]>`SELECT idempotency_key FROM idempotency_keys ORDER BY idempotency_key`;
    assert.deepEqual(keys.map((row) => row.idempotency_key), ['k1']);

    const plain = await pets.insertMany([{ name: 'Kit', categoryId: 1n, status: 'available' }, { name: 'Broken', categoryId: 1n, status: 'available' }]);
    assert.deepEqual(plain.map(summary), ['Kit', 'failed P0001'], 'a batch without keys (one statement) too');
  });

  for (const withKeys of [true, false]) {
    test(`a statement that fails because the database does fails the whole batch ${withKeys ? 'with keys' : 'without keys'}, and is not run again`, async (t) => {
      const { sql } = await openTestDatabase(t, cluster());
      const attempts = await failInsertsOf(sql, 'Unlucky', '40001'); // serialization_failure: retry later
      const pets = createPetsStore(sql);
      const keyed = (name: string, key: string) => ({ name, categoryId: 1n, status: 'available' as const, ...(withKeys ? { idempotency: remembering(key) } : {}) });
      await assert.rejects(async () => pets.insertMany([keyed('Rex', 'k1'), keyed('Unlucky', 'k2'), keyed('Tom', 'k3')]), DatabaseUnavailableError);
      assert.equal(await attempts(), 1);
      const rows = await sql<{ n: string }[]>`SELECT (SELECT count(*) FROM pets) + (SELECT count(*) FROM idempotency_keys) AS n`;
      assert.equal(Number(rows[0]!.n), 0, 'nothing half-written');
    });
  }
});
