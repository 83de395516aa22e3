/**
 * Pets in SQLite. All SQL about pets lives here, behind plain functions that take and return
 * domain values, so another storage engine can stand behind the same functions.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { PetStatus } from './schemas.ts';
import { transaction } from './database.ts';

export interface NewPet {
  name: string;
  categoryId: bigint;
  status: PetStatus;
}

export interface Pet extends NewPet {
  id: number;
}

export interface ListOptions {
  /** Only ids greater than this (keyset pagination); 0 for the first page. */
  afterId: bigint;
  status: PetStatus | undefined;
  limit: number;
}

export interface PetsStore {
  /** Inserts the pets in one transaction (all or none) and returns them with their ids. */
  insertMany(pets: readonly NewPet[]): Pet[];
  get(id: bigint): Pet | null;
  /** Up to `limit` pets after `afterId`, by id ascending. */
  list(options: ListOptions): Pet[];
}

interface PetRow {
  id: number;
  name: string;
  category_id: string;
  status: PetStatus;
}

/** category_id is read as text so that int64 values above 2^53 keep their exact digits. */
const COLUMNS = 'id, name, CAST(category_id AS TEXT) AS category_id, status';

/** Prepares every statement once; the returned functions are the only way to pets. */
export function createPetsStore(db: DatabaseSync): PetsStore {
  const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id');
  const byId = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id = ?`);
  const page = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`);
  const pageByStatus = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`);

  return {
    insertMany(pets) {
      return transaction(db, () =>
        pets.map((pet) => {
          const { id } = insert.get(pet.name, pet.categoryId, pet.status) as { id: number };
          return { id, name: pet.name, categoryId: pet.categoryId, status: pet.status };
        }),
      );
    },
    get(id) {
      const row = byId.get(id) as PetRow | undefined;
      return row ? toPet(row) : null;
    },
    list({ afterId, status, limit }) {
      const rows = (status === undefined ? page.all(afterId, limit) : pageByStatus.all(status, afterId, limit)) as unknown as PetRow[];
      return rows.map(toPet);
    },
  };
}

function toPet(row: PetRow): Pet {
  return { id: row.id, name: row.name, categoryId: BigInt(row.category_id), status: row.status };
}
