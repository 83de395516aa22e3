/**
 * Pets in SQLite: the reads on one connection, and the writes made through `submit` (writer/executor.ts),
 * in place on this connection or by the writer thread. All SQL about pets lives here and in
 * pet-writes.ts, behind plain functions that take and return domain values, so another storage
 * engine can stand behind the same functions.
 */
import type { DatabaseSync } from 'node:sqlite';
import { dataVersion } from './data-version.ts';
import { allSucceeded, type ItemOutcome } from '../../lib/item-outcome.ts';
import { andThen } from '../../lib/maybe-promise.ts';
import type { IdempotencyRecord } from '../idempotency.ts';
import { createIdempotencyRecords } from './idempotency-records.ts';
import { PET_COLUMNS } from './pet-writes.ts';
import { journalOf, localWrites, type SubmitWrites, type WriteJournal, writesRecorded, writtenSince } from './writer.ts';
import type { ChangeOutcome, CreationResult, ListOptions, NewPet, Pet, PetChange, PetCreation, PetRow, PetsRevision, PetsStore } from '../pets.ts';
import { toPet } from '../pets.ts';

/** The SQLite pets store of a connection that makes its own writes answers synchronously. */
export interface SqlitePetsStore extends PetsStore {
  /** Pets without an Idempotency-Key never meet a conflict (seeding, tests), but may fail alone. */
  insertMany(pets: readonly NewPet[]): ItemOutcome<Pet>[];
  insertMany(pets: readonly PetCreation[]): ItemOutcome<CreationResult>[];
  findIdempotencyRecord(apiKeyId: string, key: string, now: number): IdempotencyRecord<Pet> | null;
  purgeIdempotencyRecords(now: number, limit: number): number;
  get(id: bigint): Pet | null;
  list(options: ListOptions): Pet[];
  changeMany(changes: readonly PetChange[]): ItemOutcome<ChangeOutcome>[];
  revision(): PetsRevision;
}

/** Where the writes of a reading connection go, and how it learns of them. */
export interface WritesElsewhere {
  /** The writer thread's writes (writer/client.ts). */
  submit: SubmitWrites;
  /** The journal the writer records into, shared with it. */
  journal: WriteJournal;
  /** Changes only when a connection other than the writer committed (data-version.ts). */
  external: () => number;
}

/** The pets store of `db`, which makes its own writes: every method answers at once. */
export function createPetsStore(db: DatabaseSync): SqlitePetsStore;
/** The pets store of a reading connection `db`, whose writes go to the writer thread. */
export function createPetsStore(db: DatabaseSync, writes: WritesElsewhere): PetsStore & { revision(): PetsRevision };
/** Prepares every read once; the returned functions are the only way to pets. */
export function createPetsStore(db: DatabaseSync, writes?: WritesElsewhere): SqlitePetsStore {
  const byId = db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id = ?`);
  const page = db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`);
  const pageByStatus = db.prepare(`SELECT ${PET_COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`);
  const records = createIdempotencyRecords(db, 'createPet');
  const submit = writes?.submit ?? localWrites(db);
  const journal = writes?.journal ?? journalOf(db);
  const external = writes?.external ?? dataVersion(db);

  return {
    // A creation without an Idempotency-Key never meets a conflict: the overload says so.
    insertMany: ((pets: readonly PetCreation[]) => submit('insertPets', pets)) as SqlitePetsStore['insertMany'],
    findIdempotencyRecord: (apiKeyId, key, now) => records.recall(apiKeyId, key, now),
    // A purge is a write too: one transaction per chunk, like every other.
    purgeIdempotencyRecords: (now, limit) => andThen(submit('purgeRecords', [{ now, limit }]), (outcomes) => allSucceeded(outcomes)[0]!) as number,
    get(id) {
      const row = byId.get(id) as PetRow | undefined;
      return row ? toPet(row) : null;
    },
    list({ afterId, status, limit }) {
      const rows = (status === undefined ? page.all(afterId, limit) : pageByStatus.all(status, afterId, limit)) as unknown as PetRow[];
      return rows.map(toPet);
    },
    changeMany: (changes) => submit('changePets', changes) as ItemOutcome<ChangeOutcome>[],
    revision() {
      return { external: external(), writes: writesRecorded(journal) };
    },
    writtenSince: (since, after, through, statuses) => writtenSince(journal, since, after, through, statuses),
  };
}
