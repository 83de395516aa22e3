/**
 * Orders in SQLite: placing an order takes its pet from `available` to `pending` in the same
 * transaction that stores the order, and each step of an order moves its pet the same way. A
 * batch of placements or steps is one transaction (one fsync); each item is its own unit of
 * success or failure (see item-savepoints.ts). The pets' counts by status are kept by triggers
 * (migrations.ts), so the inventory is one read of three rows.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import type { IdempotencyRecord } from '../idempotency.ts';
import {
  decideStep, toOrder, type Inventory, type Order, type OrderChange, type OrderChangeOutcome, type OrderListOptions, type OrderPlacement,
  type OrderRow, type OrdersStore, type PlacementResult,
} from '../orders.ts';
import { toPet, type PetRow, type PetStatus } from '../pets.ts';
import { createIdempotencyRecords } from './idempotency-records.ts';
import { createBatchRunner } from './item-savepoints.ts';
import { journalOf, recordWrite } from './write-journal.ts';

/** The SQLite orders store answers synchronously. */
export interface SqliteOrdersStore extends OrdersStore {
  placeMany(placements: readonly OrderPlacement[]): ItemOutcome<PlacementResult>[];
  changeMany(changes: readonly OrderChange[]): ItemOutcome<OrderChangeOutcome>[];
  get(id: bigint): Order | null;
  list(options: OrderListOptions): Order[];
  findIdempotencyRecord(apiKeyId: string, key: string, now: number): IdempotencyRecord | null;
  inventory(): Inventory;
}

/** pet_id is read as text so that int64 values above 2^53 keep their exact digits. */
const ORDER_COLUMNS = 'id, CAST(pet_id AS TEXT) AS pet_id, account, status, placed_at, updated_at, version';
const PET_COLUMNS = 'id, name, CAST(category_id AS TEXT) AS category_id, status, version';

/** The counts that triggers keep in every write's transaction (migration 6); never the pets. */
export const INVENTORY_SQL = 'SELECT status, pets FROM pet_counts';

/** Every statement prepared once. */
function statements(db: DatabaseSync) {
  const visible = (filter: string) => `SELECT ${ORDER_COLUMNS} FROM orders WHERE ${filter} id > ? ORDER BY id LIMIT ?`;
  return {
    // Only an available pet is taken: of two placements for one pet, the second finds it pending.
    takePet: db.prepare(`UPDATE pets SET status = 'pending', version = version + 1 WHERE id = ? AND status = 'available' RETURNING ${PET_COLUMNS}`),
    petStatus: db.prepare('SELECT status FROM pets WHERE id = ?'),
    insertOrder: db.prepare(`INSERT INTO orders (pet_id, account, status, placed_at, updated_at) VALUES (?, ?, 'placed', ?, ?) RETURNING ${ORDER_COLUMNS}`),
    orderById: db.prepare(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = ?`),
    setOrder: db.prepare(`UPDATE orders SET status = ?, updated_at = ?, version = version + 1 WHERE id = ? RETURNING ${ORDER_COLUMNS}`),
    setPet: db.prepare(`UPDATE pets SET status = ?, version = version + 1 WHERE id = ? RETURNING ${PET_COLUMNS}`),
    page: db.prepare(visible('')),
    pageByStatus: db.prepare(visible('status = ? AND')),
    pageOfAccount: db.prepare(visible('account = ? AND')),
    pageOfAccountByStatus: db.prepare(visible('account = ? AND status = ? AND')),
    counts: db.prepare(INVENTORY_SQL),
  };
}

/**
 * The orders store over `db` (open and migrated), sharing the connection's write journal with the
 * pets store, so that a pet moved by an order leaves the pets' answer caches at once.
 */
export function createOrdersStore(db: DatabaseSync): SqliteOrdersStore {
  const sql = statements(db);
  const records = createIdempotencyRecords(db, 'placeOrder');
  const journal = journalOf(db);
  const batch = createBatchRunner(db);

  function place({ petId, account, now, idempotency }: OrderPlacement): PlacementResult {
    // Another worker or process may have stored this key since the caller's lookup; BEGIN
    // IMMEDIATE holds the write lock, so this second lookup is the last word.
    const taken = idempotency ? records.recall(idempotency.apiKeyId, idempotency.key, idempotency.createdAt) : null;
    if (taken) return { conflict: 'recorded', record: taken };
    const petRow = sql.takePet.get(petId) as PetRow | undefined;
    if (petRow === undefined) {
      const found = sql.petStatus.get(petId) as { status: PetStatus } | undefined;
      return found === undefined ? { kind: 'pet_not_found' } : { kind: 'pet_not_available', status: found.status };
    }
    const order = toOrder(sql.insertOrder.get(petId, account, now, now) as unknown as OrderRow);
    // The pet changed: its cached answers go (a pet found by id has an id a number holds).
    recordWrite(journal, Number(order.petId), Number(order.petId));
    if (idempotency) records.remember(idempotency, idempotency.respond(order));
    return { kind: 'placed', order, pet: toPet(petRow) };
  }

  function step(change: OrderChange): OrderChangeOutcome {
    const row = sql.orderById.get(change.id) as OrderRow | undefined;
    const decided = decideStep(row === undefined ? null : toOrder(row), change);
    if (decided.kind !== 'move') return decided;
    const order = toOrder(sql.setOrder.get(change.to, change.now, change.id) as unknown as OrderRow);
    if (decided.pet === null) return { kind: 'changed', order, pet: null };
    const petRow = sql.setPet.get(decided.pet, decided.current.petId) as PetRow | undefined;
    recordWrite(journal, Number(decided.current.petId), Number(decided.current.petId));
    return { kind: 'changed', order, pet: petRow === undefined ? null : toPet(petRow) };
  }

  return {
    placeMany: (placements) => batch((isolate) => placements.map((placement) => isolate(() => place(placement)))),
    changeMany: (changes) => batch((isolate) => changes.map((change) => isolate(() => step(change)))),
    get(id) {
      const row = sql.orderById.get(id) as OrderRow | undefined;
      return row === undefined ? null : toOrder(row);
    },
    list({ afterId, status, account, limit }) {
      const rows = account === null
        ? status === undefined ? sql.page.all(afterId, limit) : sql.pageByStatus.all(status, afterId, limit)
        : status === undefined ? sql.pageOfAccount.all(account, afterId, limit) : sql.pageOfAccountByStatus.all(account, status, afterId, limit);
      return (rows as unknown as OrderRow[]).map(toOrder);
    },
    findIdempotencyRecord: (apiKeyId, key, now) => records.recall(apiKeyId, key, now),
    inventory() {
      const inventory: Inventory = { available: 0, pending: 0, sold: 0 };
      for (const { status, pets } of sql.counts.all() as unknown as { status: PetStatus; pets: number }[]) inventory[status] = pets;
      return inventory;
    },
  };
}
