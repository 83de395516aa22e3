/**
 * Pets and Idempotency-Key records in PostgreSQL, shared by every instance.
 *
 * A batch of creates (group commit) is one INSERT ... SELECT FROM unnest(...) statement. When a
 * batch holds creates with an Idempotency-Key it runs in one transaction that first claims each
 * key with a transaction-level advisory lock: a key claimed by another instance's transaction is
 * "in flight" there (409), a key whose record exists meanwhile is replayed, and the claim ends
 * with the commit or with the connection, so a crashed instance leaves no key stuck. A key that
 * two creations of one batch carry is written by the first, which the second replays.
 *
 * Each creation and each change is its own unit of success or failure (item-savepoints.ts): every
 * conflict is settled without an error, and should a statement still fail, the batch runs again
 * one item at a time, each in a savepoint, so that only the failing item is refused.
 *
 * categoryId travels as text both ways (`::bigint` in, `::text` out): no JS number holds it.
 */
import { IDEMPOTENCY_TTL_MS, toIdempotencyRecord, type IdempotencyConflict, type IdempotencyRecord, type IdempotencyRow, type IdempotencyWrite } from '../idempotency.ts';
import type { ChangeOutcome, CreationResult, ListOptions, Pet, PetChange, PetCreation, PetRow, PetsStore, PetStatus } from '../pets.ts';
import { createGroupCommit } from '../../lib/group-commit.ts';
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import { toPet } from '../pets.ts';
import { guard, guardRead } from './database.ts';
import type { PostgresSql } from './driver.ts';
import { inSavepoint, togetherOrOneByOne } from './item-savepoints.ts';

// id comes as text (the driver leaves int8 alone) and becomes a Number in toPet; casting to float8
// in SQL measured several times slower per row.
const PET_COLUMNS = 'id, name, category_id::text AS category_id, status, version';

/** The pets of a batch of lookups by id ($1: their ids). */
export const PETS_BY_ID = `SELECT ${PET_COLUMNS} FROM pets WHERE id = ANY($1::bigint[])`;

/**
 * A page's pets as one JSON text of arrays `[id, name, categoryId, status, version]`
 * (categoryId a string, so that its digits stay exact) rather than a row per pet: the driver
 * spends about a microsecond on each row it decodes, JSON.parse far less per pet. Names are
 * quoted by to_json, whose escapes JSON.parse undoes exactly; a status is one of three words (the
 * table's CHECK), quoted as it is. Measured with bench/experiments/postgres-statements.ts: a
 * page of 21 pets cost PostgreSQL 17 us instead of 15, the service 9 instead of 23. A pet by id
 * stays a row: it is one row per request anyway, and as JSON cost PostgreSQL more.
 */
const PET_JSON = `'[' || id || ',' || to_json(name)::text || ',"' || category_id || '","' || status || '",' || version || ']'`;

/**
 * The pages of a batch of lists ($1, $2, $3: each page's cursor id, status or null, and rows),
 * each with its ordinal and its pets as one JSON text (null for an empty page). Each page is its
 * own keyset query, on the primary key or on (status, id); the branch whose condition on
 * q.status is false is not run. No ORDER BY: a sort per page cost PostgreSQL 3 to 4 us, and the
 * order is checked where the text is read (pagesOf).
 */
export const PAGES = `
  SELECT q.ord, (SELECT '[' || string_agg(${PET_JSON}, ',') || ']' FROM (
           (SELECT id, name, category_id, status, version FROM pets WHERE q.status IS NULL AND id > q.after_id ORDER BY id LIMIT q.lim)
           UNION ALL
           (SELECT id, name, category_id, status, version FROM pets WHERE q.status IS NOT NULL AND status = q.status AND id > q.after_id ORDER BY status, id LIMIT q.lim)
         ) AS p) AS pets
    FROM unnest($1::bigint[], $2::text[], $3::integer[]) WITH ORDINALITY AS q(after_id, status, lim, ord)`;

/** The pets of one page's JSON text (PAGES). */
function petsOf(json: string | null): Pet[] {
  if (json === null) return [];
  return (JSON.parse(json) as [number, string, string, PetStatus, number][]).map(([id, name, categoryId, status, version]) => ({
    id, name, categoryId: BigInt(categoryId), status, version,
  }));
}

/** The pages of PAGES's rows, in the order asked, each in id order. */
function pagesOf(rows: readonly { ord: string; pets: string | null }[], count: number): Pet[][] {
  const pages = new Array<Pet[]>(count);
  for (const row of rows) {
    const pets = petsOf(row.pets);
    if (pets.some((pet, index) => index > 0 && pets[index - 1]!.id > pet.id)) pets.sort((a, b) => a.id - b.id);
    pages[Number(row.ord) - 1] = pets;
  }
  return pages;
}

/** Read statements of one instance awaited at once, per kind (lookups, pages). */
const READ_BATCHES_IN_FLIGHT = 3;

/**
 * The pets store over a migrated database. One closure, longer than a screen, because the pool
 * and the batched reads are shared by every method.
 */
export function createPetsStore(sql: PostgresSql): PetsStore {
  /** Inserts the pets in one statement; returns them in the order given. */
  async function insertPets(tx: PostgresSql, creations: readonly PetCreation[]): Promise<Pet[]> {
    if (creations.length === 0) return [];
    // Rows are inserted in `ord` order, so the identity hands out ascending ids in that order.
    const rows = await tx.unsafe<PetRow[]>(
      `INSERT INTO pets (name, category_id, status)
       SELECT name, category_id::bigint, status
         FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS t(name, category_id, status, ord)
        ORDER BY ord
       RETURNING ${PET_COLUMNS}`,
      [creations.map((c) => c.name), creations.map((c) => c.categoryId.toString()), creations.map((c) => c.status)],
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
  async function claimKeys(tx: PostgresSql, creations: readonly PetCreation[]): Promise<(IdempotencyConflict | null)[]> {
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
    const recorded = new Map(existing.map((row) => [`${row.api_key_id} ${row.idempotency_key}`, toIdempotencyRecord(row)]));
    let lock = 0;
    return creations.map((creation): IdempotencyConflict | null => {
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
  async function insertTogether(tx: PostgresSql, creations: readonly PetCreation[], claims: readonly (IdempotencyConflict | null)[]): Promise<CreationResult[]> {
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
    const made = new Map<number, IdempotencyRecord>();
    const remembered: Remembered[] = [];
    pets.forEach((pet, i) => {
      const index = toInsert[i]!;
      results[index] = pet;
      const write = creations[index]!.idempotency;
      if (write) {
        const record = recordOf(write, pet);
        made.set(index, record);
        remembered.push({ write, record });
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
  async function insertOneByOne(tx: PostgresSql, creations: readonly PetCreation[], claims: readonly (IdempotencyConflict | null)[]): Promise<ItemOutcome<CreationResult>[]> {
    const made = new Map<string, IdempotencyRecord>();
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
            const record = recordOf(write, pet!);
            await remember(sp, [{ write, record }]);
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
        remembered.map((r) => r.record.fingerprint),
        remembered.map((r) => r.record.response.status),
        remembered.map((r) => JSON.stringify(r.record.response.headers)),
        remembered.map((r) => r.record.response.body),
        remembered.map((r) => r.record.createdAt),
      ],
      { prepare: true },
    );
    if (written.count !== remembered.length) throw new Error('a live idempotency record already exists for this key');
  }

  // Reads of one event-loop turn go as one statement each for lookups and for pages, so a busy
  // instance pays a round trip per turn, not per request. Each statement starts after every
  // request in it arrived, so it sees whatever had been committed before.
  const gets = createGroupCommit<string, Pet | null>({
    async commit(ids) {
      const rows = await guardRead(() => sql.unsafe<PetRow[]>(PETS_BY_ID, [ids as string[]], { prepare: true }));
      const byId = new Map(rows.map((row) => [String(row.id), toPet(row)]));
      return ids.map((id) => byId.get(BigInt(id).toString()) ?? null);
    },
    maxInFlight: READ_BATCHES_IN_FLIGHT,
  });
  const lists = createGroupCommit<ListOptions, Pet[]>({
    async commit(pages) {
      const rows = await guardRead(() => sql.unsafe<{ ord: string; pets: string | null }[]>(
        PAGES,
        [pages.map((page) => page.afterId.toString()), pages.map((page) => page.status ?? null), pages.map((page) => page.limit)],
        { prepare: true },
      ));
      return pagesOf(rows, pages.length);
    },
    maxInFlight: READ_BATCHES_IN_FLIGHT,
  });

  return {
    insertMany(creations) {
      return guard(() => (creations.some((creation) => creation.idempotency)
        ? togetherOrOneByOne<ItemOutcome<CreationResult>[]>(
          () => inTransaction(sql, async (tx) => insertTogether(tx, creations, await claimKeys(tx, creations))),
          () => inTransaction(sql, async (tx) => insertOneByOne(tx, creations, await claimKeys(tx, creations))),
          'transaction',
        )
        // Without keys the batch is one statement, which commits alone.
        : togetherOrOneByOne<ItemOutcome<CreationResult>[]>(
          () => insertPets(sql, creations),
          () => inTransaction(sql, (tx) => insertOneByOne(tx, creations, creations.map(() => null))),
          'statement',
        )));
    },

    async findIdempotencyRecord(apiKeyId, key, now) {
      const rows = await guardRead(() => sql<IdempotencyRow[]>`
        SELECT * FROM idempotency_keys
         WHERE api_key_id = ${apiKeyId} AND idempotency_key = ${key} AND created_at > ${now - IDEMPOTENCY_TTL_MS}::bigint`);
      return rows.length === 0 ? null : toIdempotencyRecord(rows[0]!);
    },

    async purgeIdempotencyRecords(now, limit) {
      // createPet's records, then placeOrder's (a table of their own, see migration 4), up to `limit` in all.
      let purged = 0;
      for (const table of ['idempotency_keys', 'order_idempotency_keys']) {
        if (purged >= limit) break;
        const result = await guard(() => sql.unsafe(
          `DELETE FROM ${table} WHERE (api_key_id, idempotency_key) IN (
             SELECT api_key_id, idempotency_key FROM ${table} WHERE created_at <= $1::bigint ORDER BY created_at LIMIT $2)`,
          [now - IDEMPOTENCY_TTL_MS, limit - purged],
          { prepare: true },
        ));
        purged += result.count;
      }
      return purged;
    },

    get: (id) => gets.submit(id.toString()),

    list: (options) => lists.submit(options),

    changeMany(changes) {
      return guard(() => togetherOrOneByOne<ItemOutcome<ChangeOutcome>[]>(
        () => inTransaction(sql, (tx) => applyChanges(changes, (change) => applyChange(tx, change))),
        // A change failed: again, each in its own savepoint, so that it fails alone.
        () => inTransaction(sql, (tx) => applyChanges(changes, (change) => inSavepoint(tx, (sp) => applyChange(sp, change)))),
        'transaction',
      ));
    },

    // Other instances write too, and nothing cheap tells this one when: no answer is cached, so
    // the journal is never asked; were it asked, "anything may have changed" is the safe answer.
    revision: () => null,
    writtenSince: () => true,
  };
}

/** Runs `work` in a transaction of its own, committed when it resolves, rolled back if it throws. */
function inTransaction<R>(sql: PostgresSql, work: (tx: PostgresSql) => Promise<R>): Promise<R> {
  return sql.begin((tx) => work(tx as unknown as PostgresSql)) as Promise<R>;
}

/**
 * Applies a batch of changes in one transaction, each with `apply`. The version check is in each
 * statement's WHERE: a concurrent change by another instance makes this one wait for the row,
 * then find the version bumped, so of two changes expecting one version exactly one applies.
 * Changes run in pet id order (a pet's own changes keep theirs), so two instances' batches lock
 * rows in the same order and never deadlock.
 */
async function applyChanges<R>(changes: readonly PetChange[], apply: (change: PetChange) => Promise<R>): Promise<R[]> {
  const order = changes.map((_, index) => index).sort((a, b) => {
    const [x, y] = [changes[a]!.id, changes[b]!.id];
    return x < y ? -1 : x > y ? 1 : a - b;
  });
  const outcomes = new Array<R>(changes.length);
  for (const index of order) outcomes[index] = await apply(changes[index]!);
  return outcomes;
}

/** Applies one change; a version or an id that does not match is an outcome, not an error. */
async function applyChange(tx: PostgresSql, change: PetChange): Promise<ChangeOutcome> {
  const id = change.id.toString();
  if (change.kind === 'delete' || change.patch.status !== undefined) {
    const held = await heldByOrder(tx, id);
    if (held !== null) return change.expectedVersion !== null && held !== change.expectedVersion ? { kind: 'version_mismatch' } : { kind: 'has_open_order' };
  }
  if (change.kind === 'update') {
    const { name = null, categoryId = null, status = null } = change.patch;
    const rows = await tx.unsafe<PetRow[]>(
      `UPDATE pets SET name = coalesce($2, name), category_id = coalesce($3::bigint, category_id),
              status = coalesce($4, status), version = version + 1
        WHERE id = $1::bigint AND version = coalesce($5::integer, version)
        RETURNING ${PET_COLUMNS}`,
      [id, name, categoryId === null ? null : categoryId.toString(), status, change.expectedVersion],
      { prepare: true },
    );
    if (rows.length === 1) return { kind: 'updated', pet: toPet(rows[0]!) };
  } else {
    const result = await tx.unsafe('DELETE FROM pets WHERE id = $1::bigint AND version = coalesce($2::integer, version)', [id, change.expectedVersion], { prepare: true });
    if (result.count === 1) return { kind: 'deleted' };
  }
  // Nothing was changed: either there is no such pet, or it has another version.
  const exists = await tx.unsafe('SELECT 1 FROM pets WHERE id = $1::bigint', [id], { prepare: true });
  return exists.length === 1 ? { kind: 'version_mismatch' } : { kind: 'not_found' };
}

/**
 * The version of a pet that an open order holds, or null (no such pet, or no open order). The
 * pet's row is locked first, and the orders are read by a second statement, whose snapshot is
 * taken after the lock was granted: an order placed meanwhile (its placement held the row until
 * its commit) is seen, and a placement that comes after waits for this transaction.
 */
async function heldByOrder(tx: PostgresSql, id: string): Promise<number | null> {
  const rows = await tx.unsafe<{ version: number }[]>('SELECT version FROM pets WHERE id = $1::bigint FOR UPDATE', [id], { prepare: true });
  if (rows.length === 0) return null;
  const open = await tx.unsafe(`SELECT 1 FROM orders WHERE pet_id = $1::bigint AND status IN ('placed', 'approved')`, [id], { prepare: true });
  return open.length === 0 ? null : rows[0]!.version;
}

/** The advisory lock's and the batch's name for an API key's Idempotency-Key. */
function slotOf(write: IdempotencyWrite<Pet>): string {
  // API key ids contain no space and Idempotency-Keys are visible ASCII, so this is unambiguous.
  return `${write.apiKeyId} ${write.key}`;
}

/** A record to write for a creation just made. */
interface Remembered {
  write: IdempotencyWrite<Pet>;
  record: IdempotencyRecord;
}

/** The record a creation leaves: the same a later lookup of its key finds. */
function recordOf(write: IdempotencyWrite<Pet>, pet: Pet): IdempotencyRecord {
  return { fingerprint: write.fingerprint, createdAt: write.createdAt, response: write.respond(pet) };
}
