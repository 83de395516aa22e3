/**
 * Pets and Idempotency-Key records in PostgreSQL, shared by every instance.
 *
 * A batch of creates (group commit) is one INSERT ... SELECT FROM unnest(...) statement. When a
 * batch holds creates with an Idempotency-Key it runs in one transaction that first claims each
 * key with a transaction-level advisory lock: a key claimed by another instance's transaction is
 * "in flight" there (409), a key whose record exists meanwhile is replayed, and the claim ends
 * with the commit or with the connection, so a crashed instance leaves no key stuck.
 *
 * categoryId travels as text both ways (`::bigint` in, `::text` out): no JS number holds it.
 */
import { IDEMPOTENCY_TTL_MS, toIdempotencyRecord, type IdempotencyRecord, type IdempotencyRow } from '../idempotency.ts';
import type { ChangeOutcome, CreationResult, ListOptions, Pet, PetChange, PetCreation, PetRow, PetsStore } from '../pets.ts';
import { createGroupCommit } from '../../lib/group-commit.ts';
import { toPet } from '../pets.ts';
import { guard, guardRead } from './database.ts';
import type { PostgresSql } from './driver.ts';

// id comes as text (the driver leaves int8 alone) and becomes a Number in toPet; casting to float8
// in SQL measured several times slower per row.
const PET_COLUMNS = 'id, name, category_id::text AS category_id, status, version';
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

  async function insertIdempotent(creations: readonly PetCreation[]): Promise<CreationResult[]> {
    return sql.begin(async (transaction) => {
      const tx = transaction as unknown as PostgresSql;
      const claimed = creations.map((creation) => creation.idempotency);
      const slots = claimed.flatMap((record) => (record ? [`${record.apiKeyId} ${record.key}`] : []));
      // One lock per (API key, Idempotency-Key), held until this transaction ends.
      const locks = await tx.unsafe<{ got: boolean }[]>(
        `SELECT pg_try_advisory_xact_lock(hashtextextended(slot, 0)) AS got
           FROM unnest($1::text[]) WITH ORDINALITY AS t(slot, ord) ORDER BY ord`,
        [slots],
        { prepare: true },
      );
      const records = claimed.filter((record) => record !== undefined);
      const existing = await tx.unsafe<(IdempotencyRow & { api_key_id: string; idempotency_key: string })[]>(
        `SELECT k.* FROM idempotency_keys k
           JOIN unnest($1::text[], $2::text[], $3::bigint[]) AS t(api_key_id, idempotency_key, since)
             ON k.api_key_id = t.api_key_id AND k.idempotency_key = t.idempotency_key AND k.created_at > t.since`,
        [records.map((r) => r.apiKeyId), records.map((r) => r.key), records.map((r) => r.createdAt - IDEMPOTENCY_TTL_MS)],
        { prepare: true },
      );
      const recorded = new Map(existing.map((row) => [`${row.api_key_id} ${row.idempotency_key}`, toIdempotencyRecord(row)]));

      const results = new Array<CreationResult | undefined>(creations.length);
      const toInsert: PetCreation[] = [];
      const positions: number[] = [];
      let lock = 0;
      creations.forEach((creation, index) => {
        const record = creation.idempotency;
        if (record) {
          const slot = `${record.apiKeyId} ${record.key}`;
          if (!locks[lock++]!.got) {
            results[index] = { conflict: 'in_flight' };
            return;
          }
          const found = recorded.get(slot);
          if (found) {
            results[index] = { conflict: 'recorded', record: found };
            return;
          }
        }
        toInsert.push(creation);
        positions.push(index);
      });

      const pets = await insertPets(tx, toInsert);
      const remembered = pets.flatMap((pet, i) => {
        const record = toInsert[i]!.idempotency;
        results[positions[i]!] = pet;
        return record ? [{ record, response: record.respond(pet) }] : [];
      });
      if (remembered.length > 0) {
        // An expired record not yet purged is replaced; a live one cannot exist (checked under
        // the lock), and if it did the count would fail the whole batch.
        const written = await tx.unsafe(
          `INSERT INTO idempotency_keys AS k (api_key_id, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
           SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[], $5::text[], $6::text[], $7::bigint[])
           ON CONFLICT (api_key_id, idempotency_key) DO UPDATE SET
             fingerprint = excluded.fingerprint, response_status = excluded.response_status,
             response_headers = excluded.response_headers, response_body = excluded.response_body,
             created_at = excluded.created_at
           WHERE k.created_at <= excluded.created_at - ${IDEMPOTENCY_TTL_MS}`,
          [
            remembered.map((r) => r.record.apiKeyId),
            remembered.map((r) => r.record.key),
            remembered.map((r) => r.record.fingerprint),
            remembered.map((r) => r.response.status),
            remembered.map((r) => JSON.stringify(r.response.headers)),
            remembered.map((r) => r.response.body),
            remembered.map((r) => r.record.createdAt),
          ],
          { prepare: true },
        );
        if (written.count !== remembered.length) throw new Error('a live idempotency record already exists for this key');
      }
      return results as CreationResult[];
    }) as Promise<CreationResult[]>;
  }

  // Reads of one event-loop turn go as one statement each for lookups and for pages, so a busy
  // instance pays a round trip per turn, not per request. Each statement starts after every
  // request in it arrived, so it sees whatever had been committed before.
  const gets = createGroupCommit<string, Pet | null>({
    async commit(ids) {
      const rows = await guardRead(() => sql.unsafe<PetRow[]>(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ANY($1::bigint[])`, [ids as string[]], { prepare: true }));
      const byId = new Map(rows.map((row) => [String(row.id), toPet(row)]));
      return ids.map((id) => byId.get(BigInt(id).toString()) ?? null);
    },
    maxInFlight: READ_BATCHES_IN_FLIGHT,
  });
  const lists = createGroupCommit<ListOptions, Pet[]>({
    async commit(pages) {
      // Each page is its own keyset query (LATERAL), on the primary key or on (status, id); the
      // branch whose condition on q.status is false is not run.
      const rows = await guardRead(() => sql.unsafe<(PetRow & { ord: string })[]>(
        `SELECT q.ord, p.* FROM unnest($1::bigint[], $2::text[], $3::integer[]) WITH ORDINALITY AS q(after_id, status, lim, ord)
         CROSS JOIN LATERAL (
           (SELECT ${PET_COLUMNS} FROM pets WHERE q.status IS NULL AND id > q.after_id ORDER BY id LIMIT q.lim)
           UNION ALL
           (SELECT ${PET_COLUMNS} FROM pets WHERE q.status IS NOT NULL AND status = q.status AND id > q.after_id ORDER BY status, id LIMIT q.lim)
         ) AS p
         ORDER BY q.ord, p.id`,
        [pages.map((page) => page.afterId.toString()), pages.map((page) => page.status ?? null), pages.map((page) => page.limit)],
        { prepare: true },
      ));
      const results = pages.map((): Pet[] => []);
      for (const row of rows) results[Number(row.ord) - 1]!.push(toPet(row));
      return results;
    },
    maxInFlight: READ_BATCHES_IN_FLIGHT,
  });

  return {
    insertMany(creations) {
      return guard(() => (creations.some((creation) => creation.idempotency) ? insertIdempotent(creations) : insertPets(sql, creations)));
    },

    async findIdempotencyRecord(apiKeyId, key, now) {
      const rows = await guardRead(() => sql<IdempotencyRow[]>`
        SELECT * FROM idempotency_keys
         WHERE api_key_id = ${apiKeyId} AND idempotency_key = ${key} AND created_at > ${now - IDEMPOTENCY_TTL_MS}::bigint`);
      return rows.length === 0 ? null : toIdempotencyRecord(rows[0]!);
    },

    async purgeIdempotencyRecords(now, limit) {
      const result = await guard(() => sql`
        DELETE FROM idempotency_keys WHERE (api_key_id, idempotency_key) IN (
          SELECT api_key_id, idempotency_key FROM idempotency_keys
           WHERE created_at <= ${now - IDEMPOTENCY_TTL_MS}::bigint ORDER BY created_at LIMIT ${limit})`);
      return result.count;
    },

    get: (id) => gets.submit(id.toString()),

    list: (options) => lists.submit(options),

    changeMany(changes) {
      return guard(() => sql.begin((tx) => applyChanges(tx as unknown as PostgresSql, changes)) as Promise<ChangeOutcome[]>);
    },

    // Other instances write too, and nothing cheap tells this one when: no answer is cached, so
    // the journal is never asked; were it asked, "anything may have changed" is the safe answer.
    revision: () => null,
    writtenSince: () => true,
  };
}

/**
 * Applies a batch of changes in one transaction. The version check is in each statement's WHERE:
 * a concurrent change by another instance makes this one wait for the row, then find the
 * version bumped, so of two changes expecting one version exactly one applies. Changes run in
 * pet id order (a pet's own changes keep theirs), so two instances' batches lock rows in the same
 * order and never deadlock.
 */
async function applyChanges(tx: PostgresSql, changes: readonly PetChange[]): Promise<ChangeOutcome[]> {
  const order = changes.map((_, index) => index).sort((a, b) => {
    const [x, y] = [changes[a]!.id, changes[b]!.id];
    return x < y ? -1 : x > y ? 1 : a - b;
  });
  const outcomes = new Array<ChangeOutcome>(changes.length);
  for (const index of order) {
    const change = changes[index]!;
    const id = change.id.toString();
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
      if (rows.length === 1) {
        outcomes[index] = { kind: 'updated', pet: toPet(rows[0]!) };
        continue;
      }
    } else {
      const result = await tx.unsafe('DELETE FROM pets WHERE id = $1::bigint AND version = coalesce($2::integer, version)', [id, change.expectedVersion], { prepare: true });
      if (result.count === 1) {
        outcomes[index] = { kind: 'deleted' };
        continue;
      }
    }
    // Nothing was changed: either there is no such pet, or it has another version.
    const exists = await tx.unsafe('SELECT 1 FROM pets WHERE id = $1::bigint', [id], { prepare: true });
    outcomes[index] = exists.length === 1 ? { kind: 'version_mismatch' } : { kind: 'not_found' };
  }
  return outcomes;
}
