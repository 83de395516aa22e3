/**
 * The writes of orders on SQLite, made inside a transaction that the caller holds (writes.ts):
 * placing an order takes its pet from `available` to `pending` in the same transaction that
 * stores the order, and each step of an order moves its pet the same way. Each item goes through
 * `isolate` (item-savepoints.ts); the database logs each pet moved for the journal
 * (touched-pets.ts), so that the pets' answer caches drop it at once.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import type { IdempotencyRecord } from '../idempotency.ts';
import { decideStep, toOrder, type OrderChange, type OrderChangeOutcome, type OrderPlacement, type OrderRow, type PlacementResult } from '../orders.ts';
import { toPet, type PetRow, type PetStatus } from '../pets.ts';
import { createIdempotencyRecords } from './idempotency-records.ts';
import type { IsolateItem } from './item-savepoints.ts';
import { PET_COLUMNS } from './pet-writes.ts';

/** pet_id is read as text so that int64 values above 2^53 keep their exact digits. */
export const ORDER_COLUMNS = 'id, CAST(pet_id AS TEXT) AS pet_id, account, status, placed_at, updated_at, version';

export interface OrderWrites {
  place(placements: readonly OrderPlacement[], isolate: IsolateItem): ItemOutcome<PlacementResult>[];
  change(changes: readonly OrderChange[], isolate: IsolateItem): ItemOutcome<OrderChangeOutcome>[];
  /** The live record of an API key's Idempotency-Key for placeOrder, or null. */
  recall(apiKeyId: string, key: string, now: number): IdempotencyRecord | null;
}

/** Prepares the statements of the writes of orders on `db` once. */
export function createOrderWrites(db: DatabaseSync): OrderWrites {
  // Only an available pet is taken: of two placements for one pet, the second finds it pending.
  const takePet = db.prepare(`UPDATE pets SET status = 'pending', version = version + 1 WHERE id = ? AND status = 'available' RETURNING ${PET_COLUMNS}`);
  const petStatus = db.prepare('SELECT status FROM pets WHERE id = ?');
  const insertOrder = db.prepare(`INSERT INTO orders (pet_id, account, status, placed_at, updated_at) VALUES (?, ?, 'placed', ?, ?) RETURNING ${ORDER_COLUMNS}`);
  const orderById = db.prepare(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = ?`);
  const setOrder = db.prepare(`UPDATE orders SET status = ?, updated_at = ?, version = version + 1 WHERE id = ? RETURNING ${ORDER_COLUMNS}`);
  const setPet = db.prepare(`UPDATE pets SET status = ?, version = version + 1 WHERE id = ? RETURNING ${PET_COLUMNS}`);
  const records = createIdempotencyRecords(db, 'placeOrder');

  function place({ petId, account, now, idempotency }: OrderPlacement): PlacementResult {
    // Another worker may have stored this key since the caller's lookup; the write lock is held,
    // so this second lookup is the last word.
    const taken = idempotency ? records.recall(idempotency.apiKeyId, idempotency.key, idempotency.createdAt) : null;
    if (taken) return { conflict: 'recorded', record: taken };
    const petRow = takePet.get(petId) as PetRow | undefined;
    if (petRow === undefined) {
      const found = petStatus.get(petId) as { status: PetStatus } | undefined;
      return found === undefined ? { kind: 'pet_not_found' } : { kind: 'pet_not_available', status: found.status };
    }
    const order = toOrder(insertOrder.get(petId, account, now, now) as unknown as OrderRow);
    if (idempotency) records.remember(idempotency, idempotency.respond(order));
    return { kind: 'placed', order, pet: toPet(petRow) };
  }

  function step(change: OrderChange): OrderChangeOutcome {
    const row = orderById.get(change.id) as OrderRow | undefined;
    const decided = decideStep(row === undefined ? null : toOrder(row), change);
    if (decided.kind !== 'move') return decided;
    const order = toOrder(setOrder.get(change.to, change.now, change.id) as unknown as OrderRow);
    if (decided.pet === null) return { kind: 'changed', order, pet: null };
    const petRow = setPet.get(decided.pet, decided.current.petId) as PetRow | undefined;
    return { kind: 'changed', order, pet: petRow === undefined ? null : toPet(petRow) };
  }

  return {
    place: (placements, isolate) => placements.map((placement) => isolate(() => place(placement))),
    change: (changes, isolate) => changes.map((change) => isolate(() => step(change))),
    recall: (apiKeyId, key, now) => records.recall(apiKeyId, key, now),
  };
}
