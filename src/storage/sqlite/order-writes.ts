/**
 * The writes of orders on SQLite, made inside a transaction that the caller holds (writes.ts):
 * placing an order takes its pet from `available` to `pending` in the same transaction that
 * stores the order, and each step of an order moves its pet the same way. Each item goes through
 * `isolate` (item-savepoints.ts); the database logs each pet moved for the journal
 * (writer/touched-pets.ts), so that the pets' answer caches drop it at once.
 *
 * Every write first expires the due orders it is about to read (storage/orders.ts): a placement
 * those of its pet and of its account, a step its own order, a change of a pet (pet-writes.ts)
 * the pet's; the sweep (`expire`) the oldest due orders of all.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import type { IdempotencyRecord } from '../idempotency.ts';
import {
  decidePlacement, decideStep, toOrder, withExpiries, type Order, type OrderChange, type OrderChangeOutcome, type OrderPlacement, type OrderRow, type PlacementResult,
} from '../orders.ts';
import { toPet, type Expiry, type PetRow, type PetStatus } from '../pets.ts';
import { createIdempotencyRecords } from './idempotency-records.ts';
import type { IsolateItem } from './item-savepoints.ts';
import { createOrderExpiries } from './order-expiries.ts';
import { ORDER_COLUMNS, PET_COLUMNS } from './columns.ts';

export { ORDER_COLUMNS };

export interface OrderWrites {
  place(placements: readonly OrderPlacement[], isolate: IsolateItem): ItemOutcome<PlacementResult>[];
  change(changes: readonly OrderChange[], isolate: IsolateItem): ItemOutcome<OrderChangeOutcome>[];
  /** The sweep: expires up to `limit` orders due at `now`, oldest hold first; the result is what it expired. */
  expire(items: readonly { now: number; limit: number }[], isolate: IsolateItem): ItemOutcome<Expiry[]>[];
  /** The live record of an API key's Idempotency-Key for placeOrder, or null. */
  recall(apiKeyId: string, key: string, now: number): IdempotencyRecord<Order> | null;
}

/** Prepares the statements of the writes of orders on `db` once. */
export function createOrderWrites(db: DatabaseSync): OrderWrites {
  // Only an available pet is taken: of two placements for one pet, the second finds it pending.
  const takePet = db.prepare(`UPDATE pets SET status = 'pending', version = version + 1 WHERE id = ? AND status = 'available' RETURNING ${PET_COLUMNS}`);
  const petStatus = db.prepare('SELECT status FROM pets WHERE id = ?');
  const insertOrder = db.prepare(`INSERT INTO orders (pet_id, account, status, placed_at, updated_at, expires_at) VALUES (?, ?, 'placed', ?, ?, ?) RETURNING ${ORDER_COLUMNS}`);
  const orderById = db.prepare(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = ?`);
  // Every step leaves `placed`, and with it the hold.
  const setOrder = db.prepare(`UPDATE orders SET status = ?, updated_at = ?, expires_at = NULL, version = version + 1 WHERE id = ? RETURNING ${ORDER_COLUMNS}`);
  const openOrders = db.prepare(`SELECT count(*) AS open FROM orders WHERE account = ? AND status IN ('placed', 'approved')`);
  const expiries = createOrderExpiries(db);
  const setPet = db.prepare(`UPDATE pets SET status = ?, version = version + 1 WHERE id = ? RETURNING ${PET_COLUMNS}`);
  const records = createIdempotencyRecords(db, 'placeOrder');

  function place({ petId, account, now, expiresAt, maxOpen, idempotency }: OrderPlacement): PlacementResult {
    // Another worker may have stored this key since the caller's lookup; the write lock is held,
    // so this second lookup is the last word.
    const taken = idempotency ? records.recall(idempotency.apiKeyId, idempotency.key, idempotency.createdAt) : null;
    if (taken) return { conflict: 'recorded', record: taken };
    // An ended hold on the pet frees it; the account's ended holds no longer count.
    const expired = [...expiries.ofPet(petId, now), ...expiries.ofAccount(account, now)];
    // The writer holds the write lock: the count cannot change before this placement commits.
    const { open } = openOrders.get(account) as { open: number };
    const found = petStatus.get(petId) as { status: PetStatus } | undefined;
    const decided = decidePlacement(found?.status ?? null, open, maxOpen);
    if (decided.kind !== 'take') return withExpiries(decided, expired);
    const petRow = takePet.get(petId) as unknown as PetRow;
    const order = toOrder(insertOrder.get(petId, account, now, now, expiresAt) as unknown as OrderRow);
    if (idempotency) records.remember(idempotency, order);
    return withExpiries({ kind: 'placed', order, pet: toPet(petRow) }, expired);
  }

  function step(change: OrderChange): OrderChangeOutcome {
    // An order whose hold has ended is cancelled before the step is decided.
    const expired = expiries.one(change.id, change.now);
    const row = orderById.get(change.id) as OrderRow | undefined;
    const decided = decideStep(row === undefined ? null : toOrder(row), change);
    if (decided.kind !== 'move') return withExpiries(decided, expired);
    const order = toOrder(setOrder.get(change.to, change.now, change.id) as unknown as OrderRow);
    if (decided.pet === null) return withExpiries({ kind: 'changed', order, pet: null }, expired);
    const petRow = setPet.get(decided.pet, decided.current.petId) as PetRow | undefined;
    return withExpiries({ kind: 'changed', order, pet: petRow === undefined ? null : toPet(petRow) }, expired);
  }

  return {
    place: (placements, isolate) => placements.map((placement) => isolate(() => place(placement))),
    change: (changes, isolate) => changes.map((change) => isolate(() => step(change))),
    expire: (items, isolate) => items.map(({ now, limit }) => isolate(() => expiries.oldest(now, limit))),
    recall: (apiKeyId, key, now) => records.recall(apiKeyId, key, now),
  };
}
