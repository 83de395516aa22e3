/**
 * Pets in SQLite. All SQL about pets lives here, behind plain functions that take and return
 * domain values, so another storage engine can stand behind the same functions.
 */
import type { DatabaseSync } from 'node:sqlite';
import { dataVersion } from './data-version.ts';
import { createBatchRunner } from './item-savepoints.ts';
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import type { IdempotencyRecord } from '../idempotency.ts';
import { createIdempotencyRecords, purgeExpiredRecords } from './idempotency-records.ts';
import { journalOf, recordWrite, writtenSince } from './write-journal.ts';
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
  // While a pet has an open order, its status and its existence belong to the order.
  const heldByOrder = db.prepare(`
    SELECT version FROM pets
     WHERE id = ? AND EXISTS (SELECT 1 FROM orders WHERE pet_id = pets.id AND status IN ('placed', 'approved'))`);
  const records = createIdempotencyRecords(db, 'createPet');
  const purge = purgeExpiredRecords(db);

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
        if (record) records.remember(record, record.respond(pet));
        return pet;
      }));
      // AUTOINCREMENT ids are above every id ever used, so the batch is one range.
      if (first !== 0) recordWrite(journal, first, last);
      return results;
    });
  }

  const recallRecord = (apiKeyId: string, key: string, now: number): IdempotencyRecord | null => records.recall(apiKeyId, key, now);

  function apply(change: PetChange): ChangeOutcome {
    const target = { id: change.id, expected: change.expectedVersion };
    // A change of status, or a deletion, of a pet that an open order holds: refused, after the
    // checks of existence and version.
    if (change.kind === 'delete' || change.patch.status !== undefined) {
      const held = heldByOrder.get(change.id) as { version: number } | undefined;
      if (held) return change.expectedVersion !== null && held.version !== change.expectedVersion ? { kind: 'version_mismatch' } : { kind: 'has_open_order' };
    }
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
    purgeIdempotencyRecords: purge,
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
          if (outcome.kind === 'updated' || outcome.kind === 'deleted') recordWrite(journal, Number(change.id), Number(change.id));
          return outcome;
        })),
      );
    },
    revision() {
      return { external: externalVersion(), writes: journal.count };
    },
    writtenSince: (since, after, through) => writtenSince(journal, since, after, through),
  };
}

