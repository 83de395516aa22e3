/**
 * One request's conflict or failure never fails another request of its batch: the create and
 * change paths over each engine's real store, with batches formed by hand (an injected schedule)
 * so that which requests share a batch is known, not hoped for. Each request is answered as the
 * service would answer it (toErrorReply for what it throws), and the stored rows are checked.
 *
 * The failing item is a real constraint violation: a store seam turns one request's categoryId
 * into 0, which the table's CHECK refuses (validation keeps it out of real requests).
 */
import { describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createPetCreations } from '../../src/api/pets/creations.ts';
import { createPetChanges } from '../../src/api/pets/changes.ts';
import { toErrorReply } from '../../src/pipeline/errors.ts';
import { openDatabase } from '../../src/storage/sqlite/database.ts';
import { createPetsStore as createSqlitePetsStore } from '../../src/storage/sqlite/pets-store.ts';
import { sqliteErrorOf } from '../../src/storage/sqlite/errors.ts';
import { createPetsStore as createPostgresPetsStore } from '../../src/storage/postgres/pets-store.ts';
import { databaseUnavailableOf, type DatabaseErrorOf } from '../../src/storage/errors.ts';
import type { ChangeOutcome, NewPet, Pet, PetChange, PetCreation, PetsStore } from '../../src/storage/pets.ts';
import type { Reply } from '../../src/http/reply.ts';
import { allSucceeded } from '../../src/lib/item-outcome.ts';
import { describeWithPostgres, openTestDatabase, type PostgresCluster } from '../support/postgres.ts';
import { fakeClock } from '../support/test-server.ts';
import { FULL_DISK, fillPostgresDisk, LARGE } from '../support/full-disk.ts';

interface Engine {
  name: string;
  open(t: TestContext): Promise<{ pets: PetsStore; databaseErrorOf: DatabaseErrorOf; fillDisk(): Promise<void> }>;
}

const sqlite: Engine = {
  name: 'SQLite',
  async open(t) {
    const db = openDatabase(':memory:');
    t.after(() => db.close());
    return {
      pets: createSqlitePetsStore(db),
      databaseErrorOf: sqliteErrorOf,
      fillDisk: async () => void db.exec(FULL_DISK),
    };
  },
};

const postgres = (cluster: () => PostgresCluster): Engine => ({
  name: 'PostgreSQL',
  async open(t) {
    const { sql } = await openTestDatabase(t, cluster());
    return {
      pets: createPostgresPetsStore(sql),
      databaseErrorOf: databaseUnavailableOf,
      fillDisk: () => fillPostgresDisk(sql),
    };
  },
});

const pet = (name: string): NewPet => ({ name, categoryId: 1n, status: 'available' });
const caller = { account: 'default', keyId: 'key_a' };
const otherCaller = { account: 'default', keyId: 'key_b' };

/** A request's answer as the pipeline would give it: the Reply, or the error's Reply. */
interface Answer {
  status: number;
  code?: string;
  replayed?: boolean;
  body: string;
}

function answerOf(reply: Reply): Answer {
  return { status: reply.status, body: reply.body, ...(reply.headers?.['Idempotent-Replayed'] ? { replayed: true } : {}) };
}

/**
 * The paths over `pets` behind a seam: a pet or patch named 'Broken' gets categoryId 0 (a CHECK
 * violation in the store), and one named 'Doomed' gets a record too large for a full disk
 * (test/support/full-disk.ts), which fails as the database does once it is filled. Batches are
 * flushed by `settle`, once every lookup begun has been answered, so each batch holds every
 * request submitted so far; their sizes are kept in `batches`.
 */
function paths(t: TestContext, opened: Awaited<ReturnType<Engine['open']>>) {
  const { pets: real, databaseErrorOf } = opened;
  const batches: number[] = [];
  const logged: Record<string, unknown>[] = [];
  let lookups = 0;
  const broken = <T extends { name?: string; categoryId?: bigint }>(value: T): T => (value.name === 'Broken' ? { ...value, categoryId: 0n } : value);
  const pets: PetsStore = {
    ...real,
    findIdempotencyRecord(...args) {
      const found = real.findIdempotencyRecord(...args);
      if (!(found instanceof Promise)) return found;
      lookups++;
      return found.finally(() => lookups--);
    },
    insertMany(creations: readonly PetCreation[]) {
      batches.push(creations.length);
      return real.insertMany(creations.map((creation) => {
        if (creation.name === 'Doomed' && creation.idempotency) return { ...creation, idempotency: { ...creation.idempotency, fingerprint: 'f'.repeat(LARGE) } };
        return broken(creation);
      }));
    },
    changeMany(changes: readonly PetChange[]) {
      batches.push(changes.length);
      return real.changeMany(changes.map((change) => (change.kind === 'update' ? { ...change, patch: broken(change.patch) } : change)));
    },
  };
  const flushes: (() => void)[] = [];
  const schedule = (flush: () => void) => void flushes.push(flush);
  const clock = fakeClock();
  const creations = createPetCreations({ pets, clock, schedule });
  const changes = createPetChanges({ pets, schedule });
  const answer = (reply: Promise<Reply>): Promise<Answer> => reply.then(answerOf, (error: unknown) => {
    const refused = toErrorReply(error, ({ frames, ...fields }) => {
      // The frames are checked in requests.test.ts; here, what else the line says.
      if (fields.event === 'internal_error') assert.ok(Array.isArray(frames) && frames.length > 0, 'logged with its stack frames');
      logged.push(fields);
    }, databaseErrorOf);
    return { ...answerOf(refused), code: (JSON.parse(refused.body) as { code: string }).code };
  });
  /** Resolves once every lookup begun has been answered and what followed it has run. */
  async function lookedUp(): Promise<void> {
    do await new Promise((resolve) => setImmediate(resolve));
    while (lookups > 0);
  }
  /** Flushes batch after batch, each once every lookup begun was answered, until `pending` are all answered. */
  async function settle<T>(pending: Promise<T>[]): Promise<T[]> {
    let done = false;
    const all = Promise.all(pending).finally(() => (done = true));
    while (!done) {
      await lookedUp();
      if (flushes.length > 0) flushes.shift()!();
    }
    return all;
  }
  t.after(() => t.diagnostic(`batch sizes: ${batches.join(', ')}`));
  return {
    real, clock, batches, logged, settle, lookedUp,
    create: (newPet: NewPet, idempotency: { key: string; fingerprint: string } | null, who = caller) => answer(creations.create(newPet, who, idempotency)),
    change: (change: PetChange) => changes(change).then((outcome): Answer => ({ status: STATUS[outcome.kind], body: outcome.kind }), (error: unknown) => answer(Promise.reject(error))),
  };
}

const STATUS: Record<ChangeOutcome['kind'], number> = { updated: 200, deleted: 204, not_found: 404, version_mismatch: 412, has_open_order: 409 };

/** The names of the stored pets, sorted (a create without a key joins its batch first). */
async function names(pets: PetsStore): Promise<string[]> {
  return (await pets.list({ afterId: 0n, status: undefined, limit: 100 })).map((p) => p.name).sort();
}

function runCases(engine: () => Engine) {
  test('in one batch of creates, a key taken meanwhile and a failing create are answered alone, and every other create is stored', async (t) => {
    const opened = await engine().open(t);
    const { real, create, settle, lookedUp, batches, logged, clock } = paths(t, opened);
    const answers = [
      create(pet('Rex'), { key: 'k1', fingerprint: 'rex' }),
      create(pet('Broken'), { key: 'k2', fingerprint: 'broken' }),
      create(pet('Tom'), null, otherCaller),
      create(pet('Kit'), { key: 'k3', fingerprint: 'kit' }),
    ];
    // Another instance commits k3, with another body, between Kit's lookup and its batch.
    await lookedUp();
    await real.insertMany([{ ...pet('Elsewhere'), idempotency: { apiKeyId: caller.keyId, key: 'k3', fingerprint: 'elsewhere', createdAt: clock() } }]);
    const [rex, broken, tom, kit] = await settle(answers);
    assert.deepEqual(batches, [4], 'the four creates shared one batch');
    assert.equal(rex!.status, 201);
    assert.deepEqual([broken!.status, broken!.code], [500, 'internal_error']);
    assert.equal(tom!.status, 201);
    assert.deepEqual([kit!.status, kit!.code], [422, 'idempotency_key_reused']);
    assert.deepEqual(await names(real), ['Elsewhere', 'Rex', 'Tom']);
    assert.equal(await real.findIdempotencyRecord(caller.keyId, 'k2', clock()), null, 'the failed create left no record');
    assert.deepEqual(logged, [{ level: 'error', event: 'internal_error', error: engine().name === 'SQLite' ? 'Error' : 'PostgresError', ...(engine().name === 'SQLite' ? { sqliteCode: 19 } : {}) }], 'logged by name only');

    const retried = await settle([create({ ...pet('Broken'), categoryId: 2n, name: 'Fixed' }, { key: 'k2', fingerprint: 'fixed' })]);
    assert.equal(retried[0]!.status, 201, 'the key of the failed create is free for a retry');
  });

  test('in one batch of changes, conflicts and a failing change are answered alone, and every other change is applied', async (t) => {
    const opened = await engine().open(t);
    const { real, change, settle, batches } = paths(t, opened);
    const [rex, tom, kit] = allSucceeded(await real.insertMany([pet('Rex'), pet('Tom'), pet('Kit')])) as Pet[];
    const answers = await settle([
      change({ kind: 'update', id: BigInt(rex!.id), patch: { status: 'sold' }, expectedVersion: 1 , now: 0}),
      change({ kind: 'update', id: BigInt(tom!.id), patch: { name: 'Broken' }, expectedVersion: null , now: 0}),
      change({ kind: 'update', id: BigInt(rex!.id), patch: { status: 'pending' }, expectedVersion: 1 , now: 0}),
      change({ kind: 'delete', id: BigInt(kit!.id), expectedVersion: 1 , now: 0}),
      change({ kind: 'delete', id: 999_999n, expectedVersion: null , now: 0}),
    ]);
    assert.deepEqual(batches.slice(-1), [5], 'the five changes shared one batch');
    assert.deepEqual(answers.map((answer) => answer.code ?? answer.status), [200, 'internal_error', 412, 204, 404]);
    assert.deepEqual(await real.list({ afterId: 0n, status: undefined, limit: 10 }), [
      { ...rex!, status: 'sold', version: 2 },
      tom,
    ]);
  });

  test('when the database itself fails, every request of the batch is 503 and nothing is stored; the next batch is served', async (t) => {
    const opened = await engine().open(t);
    const { real, create, settle, batches } = paths(t, opened);
    await opened.fillDisk();
    const answers = await settle([
      create(pet('Rex'), { key: 'k1', fingerprint: 'rex' }),
      create(pet('Tom'), null),
      create(pet('Doomed'), { key: 'k2', fingerprint: 'doomed' }),
    ]);
    assert.deepEqual(batches, [3]);
    assert.deepEqual(answers.map((answer) => answer.code), ['unavailable', 'unavailable', 'unavailable']);
    assert.deepEqual(await names(real), []);
    const again = await settle([create(pet('Rex'), { key: 'k1', fingerprint: 'rex' }), create(pet('Tom'), null)]);
    assert.deepEqual(again.map((answer) => [answer.status, answer.replayed ?? false]), [[201, false], [201, false]]);
  });
}

describeWithPostgres('PostgreSQL: each request of a batch is answered on its own', (cluster) => {
  test('two creates with one key on one instance, beside another client\'s create: one 201, one 409, and the other create is stored', async (t) => {
    const opened = await postgres(cluster).open(t);
    const { real, create, settle, batches } = paths(t, opened);
    // The second create with the key arrives while the first awaits its lookup: before, both
    // passed the in-flight check, reached one batch and failed it, the other client's create too.
    const answers = await settle([
      create(pet('Rex'), { key: 'k', fingerprint: 'rex' }),
      create(pet('Rex'), { key: 'k', fingerprint: 'rex' }),
      create(pet('Tom'), null, otherCaller),
    ]);
    assert.deepEqual(answers.map((answer) => answer.code ?? answer.status), [201, 'idempotency_key_in_flight', 201], JSON.stringify(answers));
    assert.deepEqual(batches, [2], 'the first create and the other client\'s shared one batch');
    assert.deepEqual(await names(real), ['Rex', 'Tom']);
    const [replay] = await settle([create(pet('Rex'), { key: 'k', fingerprint: 'rex' })]);
    assert.deepEqual([replay!.status, replay!.replayed, replay!.body], [201, true, answers[0]!.body]);
  });

  runCases(() => postgres(cluster));
});

describe('SQLite: each request of a batch is answered on its own', () => runCases(() => sqlite));
