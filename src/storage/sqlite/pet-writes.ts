/**
 * The writes to pets on SQLite, made inside a transaction that the caller holds (writes.ts runs
 * every write of a group in one): inserts with their Idempotency-Key records, changes and
 * deletions. Each item goes through `isolate`, so that it can fail alone (item-savepoints.ts), and
 * the database itself logs which pets each write touched, for the journal (writer/touched-pets.ts).
 */
import type { DatabaseSync } from 'node:sqlite';
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import type { IdempotencyRecord } from '../idempotency.ts';
import type { ChangeOutcome, CreationResult, Pet, PetChange, PetCreation, PetRow, PetStatus } from '../pets.ts';
import { toPet } from '../pets.ts';
import { createIdempotencyRecords } from './idempotency-records.ts';
import type { IsolateItem } from './item-savepoints.ts';
import { createOrderExpiries } from './order-expiries.ts';

import { PET_COLUMNS } from './columns.ts';

export { PET_COLUMNS };

export interface PetWrites {
  /** Inserts the pets (and records), each through `isolate`. */
  insert(creations: readonly PetCreation[], isolate: IsolateItem): ItemOutcome<CreationResult>[];
  /** Applies the changes in order, each through `isolate`. */
  change(changes: readonly PetChange[], isolate: IsolateItem): ItemOutcome<ChangeOutcome>[];
  /** The live record of an API key's Idempotency-Key for createPet, or null. */
  recall(apiKeyId: string, key: string, now: number): IdempotencyRecord<Pet> | null;
}

/** Prepares the statements of the writes to pets on `db` once. */
export function createPetWrites(db: DatabaseSync): PetWrites {
  const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id, version');
  const exists = db.prepare('SELECT 1 FROM pets WHERE id = ?');
  // The version check and the change are one statement: of two changes that expect the same
  // version, the second finds the version already bumped and changes nothing. A null
  // :expected makes the check always true (an unconditional change).
  const update = db.prepare(`
    UPDATE pets SET
      name = coalesce(:name, name), category_id = coalesce(:categoryId, category_id),
      status = coalesce(:status, status), version = version + 1
    WHERE id = :id AND version = coalesce(:expected, version)
    RETURNING ${PET_COLUMNS}`);
  const remove = db.prepare('DELETE FROM pets WHERE id = :id AND version = coalesce(:expected, version) RETURNING status');
  // Whether an open order holds the pet: while one does, its status and its existence belong to
  // the order.
  const before = db.prepare(`
    SELECT status, version, EXISTS (SELECT 1 FROM orders WHERE pet_id = pets.id AND status IN ('placed', 'approved')) AS held
      FROM pets WHERE id = ?`);
  // What an update's fields were, to tell a change from one that sets the values the pet has.
  const current = db.prepare(`SELECT name, CAST(category_id AS TEXT) AS category_id, status FROM pets WHERE id = ?`);
  const records = createIdempotencyRecords(db, 'createPet');
  const expiries = createOrderExpiries(db);

  /** An order whose hold ended by the change's `now` no longer holds the pet: it is expired first. */
  function applyAfterExpiry(change: PetChange): ChangeOutcome {
    const expired = expiries.ofPet(change.id, change.now);
    const outcome = apply(change);
    return expired.length === 0 ? outcome : { ...outcome, expired };
  }

  function apply(change: PetChange): ChangeOutcome {
    const target = { id: change.id, expected: change.expectedVersion };
    // A change of status, or a deletion, of a pet that an open order holds: refused, after the
    // checks of existence and version.
    if (change.kind === 'delete' || change.patch.status !== undefined) {
      const found = before.get(change.id) as { status: PetStatus; version: number; held: number } | undefined;
      if (found?.held) return change.expectedVersion !== null && found.version !== change.expectedVersion ? { kind: 'version_mismatch' } : { kind: 'has_open_order' };
    }
    if (change.kind === 'update') {
      const { name = null, categoryId = null, status = null } = change.patch;
      const old = current.get(change.id) as Pick<PetRow, 'name' | 'category_id' | 'status'> | undefined;
      const row = update.get({ ...target, name, categoryId, status }) as PetRow | undefined;
      if (row) {
        const changed = old === undefined || old.name !== row.name || old.category_id !== row.category_id || old.status !== row.status;
        return { kind: 'updated', pet: toPet(row), changed };
      }
    } else {
      if (remove.get(target)) return { kind: 'deleted' };
    }
    // Nothing was changed: either there is no such pet, or it has another version.
    return exists.get(change.id) ? { kind: 'version_mismatch' } : { kind: 'not_found' };
  }

  return {
    insert(creations, isolate) {
      return creations.map((creation) => isolate((): CreationResult => {
        const record = creation.idempotency;
        // Another request may have stored this key since the caller's lookup (on another worker,
        // or earlier in this very group). The write lock is held, so this second lookup is the
        // last word; one indexed read per idempotent create.
        const taken = record ? records.recall(record.apiKeyId, record.key, record.createdAt) : null;
        if (taken) return { conflict: 'recorded', record: taken };
        const { id, version } = insert.get(creation.name, creation.categoryId, creation.status) as { id: number; version: number };
        const pet: Pet = { id, name: creation.name, categoryId: creation.categoryId, status: creation.status, version };
        if (record) records.remember(record, pet);
        return pet;
      }));
    },
    change: (changes, isolate) => changes.map((change) => isolate(() => applyAfterExpiry(change))),
    recall: (apiKeyId, key, now) => records.recall(apiKeyId, key, now),
  };
}
