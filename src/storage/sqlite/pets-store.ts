/**
 * Pets in SQLite. All SQL about pets lives here, behind plain functions that take and return
 * domain values, so another storage engine can stand behind the same functions.
 */
import type { DatabaseSync } from 'node:sqlite';
import { dataVersion, transaction } from './database.ts';
import { IDEMPOTENCY_TTL_MS } from '../../api/idempotency.ts';
import type { IdempotencyRecord, ListOptions, Pet, PetCreation, PetRow, PetsRevision, PetsStore } from '../pets.ts';
import { toPet } from '../pets.ts';

/** The SQLite pets store answers synchronously; its inserts never meet a conflict (see insertMany). */
export interface SqlitePetsStore extends PetsStore {
  insertMany(pets: readonly PetCreation[]): Pet[];
  findIdempotencyRecord(apiKeyId: string, key: string, now: number): IdempotencyRecord | null;
  purgeIdempotencyRecords(now: number, limit: number): number;
  get(id: bigint): Pet | null;
  list(options: ListOptions): Pet[];
  revision(): PetsRevision;
}

interface IdempotencyRow {
  fingerprint: string;
  response_status: number;
  response_headers: string;
  response_body: string;
  created_at: number;
}

/** category_id is read as text so that int64 values above 2^53 keep their exact digits. */
const COLUMNS = 'id, name, CAST(category_id AS TEXT) AS category_id, status';

/** Pets inserted through any store on a connection, shared so every store's revision sees them. */
const counters = new WeakMap<DatabaseSync, { inserts: number }>();
function insertCounter(db: DatabaseSync): { inserts: number } {
  let counter = counters.get(db);
  if (!counter) counters.set(db, (counter = { inserts: 0 }));
  return counter;
}

/** Prepares every statement once; the returned functions are the only way to pets. */
export function createPetsStore(db: DatabaseSync): SqlitePetsStore {
  const insert = db.prepare('INSERT INTO pets (name, category_id, status) VALUES (?, ?, ?) RETURNING id');
  const byId = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id = ?`);
  const page = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE id > ? ORDER BY id LIMIT ?`);
  const pageByStatus = db.prepare(`SELECT ${COLUMNS} FROM pets WHERE status = ? AND id > ? ORDER BY id LIMIT ?`);
  // An expired record that the purge has not reached yet is replaced; a live one never is (the
  // WHERE makes the upsert change nothing, which insertMany turns into a failed transaction).
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
  const counter = insertCounter(db);

  return {
    insertMany(pets) {
      const stored = transaction(db, () =>
        pets.map((creation) => {
          const { id } = insert.get(creation.name, creation.categoryId, creation.status) as { id: number };
          const pet: Pet = { id, name: creation.name, categoryId: creation.categoryId, status: creation.status };
          const record = creation.idempotency;
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
            // The caller checked that no live record exists and holds the key in flight; a live
            // record here means that promise was broken, and the whole batch must not commit.
            if (changes !== 1) throw new Error('a live idempotency record already exists for this key');
          }
          return pet;
        }),
      );
      counter.inserts += stored.length;
      return stored;
    },
    findIdempotencyRecord(apiKeyId, key, now) {
      const row = recall.get(apiKeyId, key, now - IDEMPOTENCY_TTL_MS) as IdempotencyRow | undefined;
      if (!row) return null;
      return {
        fingerprint: row.fingerprint,
        createdAt: row.created_at,
        response: { status: row.response_status, headers: JSON.parse(row.response_headers) as Record<string, string>, body: row.response_body },
      };
    },
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
    revision() {
      return { inserts: counter.inserts, external: externalVersion() };
    },
  };
}

