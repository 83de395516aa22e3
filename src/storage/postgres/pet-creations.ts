/**
 * The pets' creations on PostgreSQL, with their Idempotency-Key records. A batch of creates
 * (group commit) is one INSERT ... SELECT FROM unnest(...) statement. When a batch holds creates
 * with an Idempotency-Key it runs in one transaction that first claims each key with a
 * transaction-level advisory lock: a key claimed by another instance's transaction is "in
 * flight" there (409), a key whose record exists meanwhile is replayed, and the claim ends with
 * the commit or with the connection, so a crashed instance leaves no key stuck. A key that two
 * creations of one batch carry is written by the first, which the second replays.
 *
 * Each creation is its own unit of success or failure (item-savepoints.ts): every conflict is
 * settled without an error, and should a statement still fail, the batch runs again one creation
 * at a time, each in a savepoint, so that only the failing one is refused.
 */
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import { IDEMPOTENCY_TTL_MS, madeColumns, toIdempotencyRecord, type IdempotencyConflict, type IdempotencyRecord, type IdempotencyRow, type IdempotencyWrite } from '../idempotency.ts';
import { MADE_FORMS } from '../made-forms.ts';
import { parseStored, storedJson } from '../stored-forms.ts';
import type { CreationResult, Pet, PetCreation, PetRow } from '../pets.ts';
import { toPet } from '../pets.ts';
import { guard } from './database.ts';
import type { PostgresSql } from './driver.ts';
import { inLoggedTransaction, LOG_CREATED_PETS } from './event-log.ts';
import { inSavepoint, togetherOrOneByOne } from './item-savepoints.ts';

/** Creates a batch of pets, each with its record when it carries an Idempotency-Key. */
export function insertMany(sql: PostgresSql, creations: readonly PetCreation[]): Promise<ItemOutcome<CreationResult>[]> {
  return guard(() => (creations.some((creation) => creation.idempotency)
    ? togetherOrOneByOne<ItemOutcome<CreationResult>[]>(
      () => inLoggedTransaction(sql, 'insertPets', creations, async (tx) => insertTogether(tx, creations, await claimKeys(tx, creations))),
      () => inLoggedTransaction(sql, 'insertPets', creations, async (tx) => insertOneByOne(tx, creations, await claimKeys(tx, creations))),
      'transaction',
    )
    // Without keys the batch is one statement, its events included, which commits alone.
    : togetherOrOneByOne<ItemOutcome<CreationResult>[]>(
      () => insertPets(sql, creations, { logged: true }),
      () => inLoggedTransaction(sql, 'insertPets', creations, (tx) => insertOneByOne(tx, creations, creations.map(() => null))),
      'statement',
    )));
}

/**
 * Inserts the pets in one statement; returns them in the order given. With `logged`, the same
 * statement appends their `pet.created` events (event-log.ts's LOG_CREATED_PETS), so that a batch
 * without Idempotency-Keys still commits alone, in one round trip.
 */
async function insertPets(tx: PostgresSql, creations: readonly PetCreation[], { logged = false } = {}): Promise<Pet[]> {
  if (creations.length === 0) return [];
  // Rows are inserted in `ord` order, so the identity hands out ascending ids in that order.
  const insert = `INSERT INTO pets (name, category_id, status)
     SELECT name, category_id::bigint, status
       FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(name, category_id, status, ord)
      ORDER BY ord
     RETURNING id, name, category_id, status, version`;
  const parameters = [creations.map((c) => c.name), creations.map((c) => c.categoryId.toString()), creations.map((c) => c.status)];
  const rows = await tx.unsafe<PetRow[]>(
    `WITH inserted AS (${insert})${logged ? `, ${LOG_CREATED_PETS}` : ''}
     SELECT id, name, category_id::text AS category_id, status, version FROM inserted`,
    logged ? [...parameters, creations.map((c) => c.actor?.account ?? null), creations.map((c) => c.actor?.keyId ?? null)] : parameters,
    { prepare: true },
  );
  const pets = rows.map(toPet).sort((a, b) => a.id - b.id);
  pets.forEach((pet, index) => {
    const creation = creations[index]!;
    if (pet.name !== creation.name || pet.categoryId !== creation.categoryId) throw new Error('inserted pets came back out of order');
  });
  return pets;
}

/**
 * Claims each creation's Idempotency-Key with a transaction-level advisory lock, held until the
 * transaction ends, and looks up its live record: two statements for the whole batch. Returns,
 * per creation, the conflict it meets, or null when it may be made (no key, or a key claimed
 * here with no live record). A key twice in the batch is claimed twice (the lock is re-entrant);
 * the inserts below decide between the two.
 */
async function claimKeys(tx: PostgresSql, creations: readonly PetCreation[]): Promise<(IdempotencyConflict<Pet> | null)[]> {
  const writes = creations.flatMap((creation) => (creation.idempotency ? [creation.idempotency] : []));
  const locks = await tx.unsafe<{ got: boolean }[]>(
    `SELECT pg_try_advisory_xact_lock(hashtextextended(slot, 0)) AS got
       FROM unnest($1::text[]) WITH ORDINALITY AS t(slot, ord) ORDER BY ord`,
    [writes.map(slotOf)],
    { prepare: true },
  );
  const existing = await tx.unsafe<(IdempotencyRow & { api_key_id: string; idempotency_key: string })[]>(
    `SELECT k.* FROM idempotency_keys k
       JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS t(api_key_id, idempotency_key, since)
         ON k.api_key_id = t.api_key_id AND k.idempotency_key = t.idempotency_key AND k.created_at > t.since`,
    [writes.map((w) => w.apiKeyId), writes.map((w) => w.key), writes.map((w) => w.createdAt - IDEMPOTENCY_TTL_MS)],
    { prepare: true },
  );
  const recorded = new Map(existing.map((row) => [`${row.api_key_id} ${row.idempotency_key}`, toIdempotencyRecord(row, READ_PET)]));
  let lock = 0;
  return creations.map((creation): IdempotencyConflict<Pet> | null => {
    const write = creation.idempotency;
    if (!write) return null;
    // Held by another instance's transaction, between its claim and its commit.
    if (!locks[lock++]!.got) return { conflict: 'in_flight' };
    const found = recorded.get(slotOf(write));
    return found ? { conflict: 'recorded', record: found } : null;
  });
}

/**
 * The batch's creations together: one INSERT for the pets, one for their records. Every
 * conflict is settled before them, so only a failure can stop them: a creation whose key an
 * earlier creation of the batch writes is not made, and replays that one once it is.
 */
async function insertTogether(tx: PostgresSql, creations: readonly PetCreation[], claims: readonly (IdempotencyConflict<Pet> | null)[]): Promise<CreationResult[]> {
  const results = new Array<CreationResult>(creations.length);
  const toInsert: number[] = [];
  const writerOf = new Map<string, number>();
  const replays: [index: number, first: number][] = [];
  creations.forEach((creation, index) => {
    const claim = claims[index]!;
    if (claim) {
      results[index] = claim;
      return;
    }
    if (creation.idempotency) {
      const slot = slotOf(creation.idempotency);
      const first = writerOf.get(slot);
      if (first !== undefined) {
        replays.push([index, first]);
        return;
      }
      writerOf.set(slot, index);
    }
    toInsert.push(index);
  });
  const pets = await insertPets(tx, toInsert.map((index) => creations[index]!));
  const made = new Map<number, IdempotencyRecord<Pet>>();
  const remembered: Remembered[] = [];
  pets.forEach((pet, i) => {
    const index = toInsert[i]!;
    results[index] = pet;
    const write = creations[index]!.idempotency;
    if (write) {
      const { record, remembered: columns } = recordOf(write, pet);
      made.set(index, record);
      remembered.push(columns);
    }
  });
  await remember(tx, remembered);
  for (const [index, first] of replays) results[index] = { conflict: 'recorded', record: made.get(first)! };
  return results;
}

/**
 * The batch's creations one at a time, each in its own savepoint (after `insertTogether`
 * failed): a creation whose statement fails is rolled back alone, and one whose key an earlier
 * creation of the batch wrote replays that one.
 */
async function insertOneByOne(tx: PostgresSql, creations: readonly PetCreation[], claims: readonly (IdempotencyConflict<Pet> | null)[]): Promise<ItemOutcome<CreationResult>[]> {
  const made = new Map<string, IdempotencyRecord<Pet>>();
  const outcomes: ItemOutcome<CreationResult>[] = [];
  for (const [index, creation] of creations.entries()) {
    const claim = claims[index]!;
    const write = creation.idempotency;
    const earlier = write ? made.get(slotOf(write)) : undefined;
    if (claim) outcomes.push(claim);
    else if (earlier) outcomes.push({ conflict: 'recorded', record: earlier });
    else {
      outcomes.push(await inSavepoint(tx, async (sp) => {
        const [pet] = await insertPets(sp, [creation]);
        if (write) {
          const { record, remembered } = recordOf(write, pet!);
          await remember(sp, [remembered]);
          made.set(slotOf(write), record);
        }
        return pet!;
      }));
    }
  }
  return outcomes;
}

/** Writes the records of the creations just made. */
async function remember(tx: PostgresSql, remembered: readonly Remembered[]): Promise<void> {
  if (remembered.length === 0) return;
  // An expired record not yet purged is replaced; a live one cannot exist (checked under the
  // lock), and if it did the count would fail the statement's creations, not overwrite it.
  const written = await tx.unsafe(
    `INSERT INTO idempotency_keys AS k (api_key_id, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::text[], $6::text[], $7::bigint[])
     ON CONFLICT (api_key_id, idempotency_key) DO UPDATE SET
       fingerprint = excluded.fingerprint, response_status = excluded.response_status,
       response_headers = excluded.response_headers, response_body = excluded.response_body,
       created_at = excluded.created_at
     WHERE k.created_at <= excluded.created_at - ${IDEMPOTENCY_TTL_MS}`,
    [
      remembered.map((r) => r.write.apiKeyId),
      remembered.map((r) => r.write.key),
      remembered.map((r) => r.write.fingerprint),
      remembered.map((r) => r.columns.status),
      remembered.map((r) => r.columns.headers),
      remembered.map((r) => r.columns.body),
      remembered.map((r) => r.write.createdAt),
    ],
    { prepare: true },
  );
  if (written.count !== remembered.length) throw new Error('a live idempotency record already exists for this key');
}

/** The advisory lock's and the batch's name for an API key's Idempotency-Key. */
function slotOf(write: IdempotencyWrite): string {
  // API key ids contain no space and Idempotency-Keys are visible ASCII, so this is unambiguous.
  return `${write.apiKeyId} ${write.key}`;
}

/** A record to write for a creation just made: its columns. */
interface Remembered {
  write: IdempotencyWrite;
  columns: ReturnType<typeof madeColumns>;
}

/** A creation's record read back: the pet it made. */
const READ_PET = parseStored(MADE_FORMS.createPet);

/** The record a creation leaves, as it is written and as a later lookup of its key finds it. */
function recordOf(write: IdempotencyWrite, pet: Pet): { record: IdempotencyRecord<Pet>; remembered: Remembered } {
  return {
    record: { fingerprint: write.fingerprint, createdAt: write.createdAt, made: pet },
    remembered: { write, columns: madeColumns(storedJson(MADE_FORMS.createPet, pet)) },
  };
}
