/**
 * Pets in SQLite. All SQL about pets lives here, behind plain functions that take and return
 * domain values, so another storage engine can stand behind the same functions.
 */
import type { DatabaseSync } from 'node:sqlite';
import { dataVersion } from './data-version.ts';
import { createBatchRunner } from './item-savepoints.ts';
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import { IDEMPOTENCY_TTL_MS, toIdempotencyRecord, type IdempotencyRecord, type IdempotencyRow } from '../idempotency.ts';
import type { ChangeOutcome, CreationResult, ListOptions, NewPet, Pet, PetChange, PetCreation, PetRow, PetsRevision, PetsStore } from '../pets.ts';
import { toPet } from '../pets.ts';

/** The SQLite pets store answers synchronously. */
export interface SqlitePetsStore extends PetsStore {
  /** Pets without an Idempotency-Key never meet a conflict (seeding, tests), but may fail alone. */
  insertMany(pets: readonly NewPet[]): ItemOutcome<Pet>[];
  insertMany(pets: readonly PetCreation[]): ItemOutcome<CreationResult>[];
  findIdempotencyRecord(apiKeyId: string, key: string, now: number): IdempotencyRecord | null;
  purgeIdempotencyRecords(now: number, limit: number): number;
  get(id: bigint): Pet | null;
  list(options: ListOptions): Pet[];
  changeMany(changes: readonly PetChange[]): ItemOutcome<ChangeOutcome>[];
  revision(): PetsRevision;
}

/** category_id is read as text so that int64 values above 2^53 keep their exact digits. */
const COLUMNS = 'id, name, CAST(category_id AS TEXT) AS category_id, status, version';

/** How many writes the journal remembers; a cache entry last checked longer ago is dropped. */
export const JOURNAL_LENGTH = 1024;

/**
 * The writes through one connection, shared by every store on it, so that every store's caches
 * see them: write n (from 0) touched the ids from[n % JOURNAL_LENGTH] to to[...] (a batch of
 * inserts is one write covering its ids).
 */
interface WriteJournal {
  count: number;
  from: Float64Array;
  to: Float64Array;
}

const journals = new WeakMap<DatabaseSync, WriteJournal>();
function journalOf(db: DatabaseSync): WriteJournal {
  let journal = journals.get(db);
  if (!journal) {
    journal = { count: 0, from: new Float64Array(JOURNAL_LENGTH), to: new Float64Array(JOURNAL_LENGTH) };
    journals.set(db, journal);
  }
  return journal;
}

/**
 * Records a write. Called inside the write's transaction, before COMMIT: should the commit fail,
 * the record only costs some cache entries, and nothing can read the pets between the record and
 * the commit, since node:sqlite is synchronous.
 */
function record(journal: WriteJournal, from: number, to: number): void {
  const slot = journal.count % JOURNAL_LENGTH;
  journal.from[slot] = from;
  journal.to[slot] = to;
  journal.count++;
}

/**
 * Prepares every statement once; the returned functions are the only way to pets. One closure,
 * longer than a screen, because the statements and the write journal are shared by every
 * method; each method is short.
 */
export function createPetsStore(db: DatabaseSync): SqlitePetsStore {
  const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id, version');
  const byId = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id = ?`);
  const exists = db.prepare('SELECT 1 FROM pets WHERE id = ?');
  const page = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`);
  const pageByStatus = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`);
  // The version check and the change are one statement: of two changes that expect the same
  // version, the second finds the version already bumped and changes nothing. A null
  // :expected makes the check always true (an unconditional change).
  const update = db.prepare(`
    UPDATE pets SET
      name = coalesce(:name, name), category_id = coalesce(:categoryId, category_id),
      status = coalesce(:status, status), version = version + 1
    WHERE id = :id AND version = coalesce(:expected, version)
    RETURNING ${COLUMNS}`);
  const remove = db.prepare('DELETE FROM pets WHERE id = :id AND version = coalesce(:expected, version)');
  // An expired record that the purge has not reached yet is replaced; a live one never is (the
  // WHERE makes the upsert change nothing, which insertMany turns into a failed creation).
  const remember = db.prepare(`
    INSERT INTO idempotency_keys (api_key_id, idempotency_key, fingerprint, response_status, response_headers, response_body, created_at)
    VALUES (:apiKeyId, :key, :fingerprint, :status, :headers, :body, :createdAt)
    ON CONFLICT (api_key_id, idempotency_key) DO UPDATE SET
      fingerprint = excluded.fingerprint, response_status = excluded.response_status,
      response_headers = excluded.response_headers, response_body = excluded.response_body,
      created_at = excluded.created_at
    WHERE idempotency_keys.created_at <= excluded.created_at - :ttl`);
  const recall = db.prepare(`
    SELECT fingerprint, response_status, response_headers, response_body, created_at FROM idempotency_keys
    WHERE api_key_id = ? AND idempotency_key = ? AND created_at > ?`);
  const purge = db.prepare(`
    DELETE FROM idempotency_keys WHERE id IN (
      SELECT id FROM idempotency_keys WHERE created_at <= ? ORDER BY created_at LIMIT ?)`);

  const externalVersion = dataVersion(db);
  const journal = journalOf(db);

  const batch = createBatchRunner(db);

  // Should a creation fail, the batch runs again with each in a savepoint: it fails alone.
  function insertMany(pets: readonly PetCreation[]): ItemOutcome<CreationResult>[] {
    return batch((isolate) => {
      let first = 0;
      let last = 0;
      const results = pets.map((creation) => isolate((): CreationResult => {
        const record = creation.idempotency;
        // Several server threads (WORKERS) or processes may write this file: another one may
        // have stored this key since the caller's lookup. BEGIN IMMEDIATE holds the write lock,
        // so this second lookup is the last word; one indexed read per idempotent create.
        const taken = record ? recallRecord(record.apiKeyId, record.key, record.createdAt) : null;
        if (taken) return { conflict: 'recorded', record: taken };
        const { id, version } = insert.get(creation.name, creation.categoryId, creation.status) as { id: number; version: number };
        const pet: Pet = { id, name: creation.name, categoryId: creation.categoryId, status: creation.status, version };
        if (first === 0) first = id;
        last = id;
        if (record) {
          const response = record.respond(pet);
          const { changes } = remember.run({
            apiKeyId: record.apiKeyId,
            key: record.key,
            fingerprint: record.fingerprint,
            status: response.status,
            headers: JSON.stringify(response.headers),
            body: response.body,
            createdAt: record.createdAt,
            ttl: IDEMPOTENCY_TTL_MS,
          });
          // No live record was found just above, in this transaction, so the upsert must write:
          // should that ever break, this creation fails (rolled back alone) rather than
          // overwrite a live record.
          if (changes !== 1) throw new Error('a live idempotency record already exists for this key');
        }
        return pet;
      }));
      // AUTOINCREMENT ids are above every id ever used, so the batch is one range.
      if (first !== 0) record(journal, first, last);
      return results;
    });
  }

  function recallRecord(apiKeyId: string, key: string, now: number): IdempotencyRecord | null {
    const row = recall.get(apiKeyId, key, now - IDEMPOTENCY_TTL_MS) as IdempotencyRow | undefined;
    return row ? toIdempotencyRecord(row) : null;
  }


  function apply(change: PetChange): ChangeOutcome {
    const target = { id: change.id, expected: change.expectedVersion };
    if (change.kind === 'update') {
      const { name = null, categoryId = null, status = null } = change.patch;
      const row = update.get({ ...target, name, categoryId, status }) as PetRow | undefined;
      if (row) return { kind: 'updated', pet: toPet(row) };
    } else if (Number(remove.run(target).changes) === 1) {
      return { kind: 'deleted' };
    }
    // Nothing was changed: either there is no such pet, or it has another version.
    return exists.get(change.id) ? { kind: 'version_mismatch' } : { kind: 'not_found' };
  }

  return {
    // A creation without an Idempotency-Key never meets a conflict: the overload says so.
    insertMany: insertMany as SqlitePetsStore['insertMany'],
    findIdempotencyRecord: recallRecord,
    purgeIdempotencyRecords(now, limit) {
      return Number(purge.run(now - IDEMPOTENCY_TTL_MS, limit).changes);
    },
    get(id) {
      const row = byId.get(id) as PetRow | undefined;
      return row ? toPet(row) : null;
    },
    list({ afterId, status, limit }) {
      const rows = (status === undefined ? page.all(afterId, limit) : pageByStatus.all(status, afterId, limit)) as unknown as PetRow[];
      return rows.map(toPet);
    },
    changeMany(changes) {
      return batch((isolate) =>
        changes.map((change) => isolate(() => {
          const outcome = apply(change);
          if (outcome.kind === 'updated' || outcome.kind === 'deleted') record(journal, Number(change.id), Number(change.id));
          return outcome;
        })),
      );
    },
    revision() {
      return { external: externalVersion(), writes: journal.count };
    },
    writtenSince(since, after, through) {
      if (since === journal.count) return false;
      if (journal.count - since > JOURNAL_LENGTH) return true;
      for (let write = since; write < journal.count; write++) {
        const slot = write % JOURNAL_LENGTH;
        if (journal.from[slot]! <= through && journal.to[slot]! > after) return true;
      }
      return false;
    },
  };
}

