/**
 * Orders in SQLite: the reads on one connection, and the writes (placements and steps, each moving
 * its pet in the same transaction: order-writes.ts) made through `submit` (writes.ts), in place or
 * by the writer thread. The pets' counts by status are kept by triggers (migrations.ts), so the
 * inventory is one read of three rows. The sweep of due orders is a write like the others.
 */
import type { DatabaseSync } from 'node:sqlite';
import { allSucceeded, type ItemOutcome } from '../../lib/item-outcome.ts';
import { andThen } from '../../lib/maybe-promise.ts';
import type { IdempotencyRecord } from '../idempotency.ts';
import {
  toOrder, type Inventory, type Order, type OrderChange, type OrderChangeOutcome, type OrderListOptions, type OrderPlacement,
  type OrderRow, type OrdersStore, type PlacementResult,
} from '../orders.ts';
import type { PetStatus } from '../pets.ts';
import { createIdempotencyRecords } from './idempotency-records.ts';
import { ORDER_COLUMNS } from './order-writes.ts';
import { localWrites, type SubmitWrites } from './writer.ts';

/** The SQLite orders store answers synchronously. */
export interface SqliteOrdersStore extends OrdersStore {
  placeMany(placements: readonly OrderPlacement[]): ItemOutcome<PlacementResult>[];
  changeMany(changes: readonly OrderChange[]): ItemOutcome<OrderChangeOutcome>[];
  get(id: bigint): Order | null;
  list(options: OrderListOptions): Order[];
  findIdempotencyRecord(apiKeyId: string, key: string, now: number): IdempotencyRecord<Order> | null;
  inventory(): Inventory;
  expireDue(now: number, limit: number): number;
}

/** The counts that triggers keep in every write's transaction (migration 6); never the pets. */
export const INVENTORY_SQL = 'SELECT status, pets FROM pet_counts';

/** Every read prepared once. */
function statements(db: DatabaseSync) {
  const visible = (filter: string) => `SELECT ${ORDER_COLUMNS} FROM orders WHERE ${filter} id > ? ORDER BY id LIMIT ?`;
  return {
    orderById: db.prepare(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = ?`),
    page: db.prepare(visible('')),
    pageByStatus: db.prepare(visible('status = ? AND')),
    pageOfAccount: db.prepare(visible('account = ? AND')),
    pageOfAccountByStatus: db.prepare(visible('account = ? AND status = ? AND')),
    counts: db.prepare(INVENTORY_SQL),
    anyDue: db.prepare(`SELECT 1 FROM orders WHERE status = 'placed' AND expires_at <= ? LIMIT 1`),
  };
}

/** The orders store of `db`, which makes its own writes: every method answers at once. */
export function createOrdersStore(db: DatabaseSync): SqliteOrdersStore;
/** The orders store of a reading connection `db`, whose writes go to the writer thread through `submit`. */
export function createOrdersStore(db: DatabaseSync, submit: SubmitWrites): OrdersStore;
export function createOrdersStore(db: DatabaseSync, submit: SubmitWrites = localWrites(db)): SqliteOrdersStore {
  const sql = statements(db);
  const records = createIdempotencyRecords(db, 'placeOrder');
  return {
    placeMany: (placements) => submit('placeOrders', placements) as ItemOutcome<PlacementResult>[],
    changeMany: (changes) => submit('changeOrders', changes) as ItemOutcome<OrderChangeOutcome>[],
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
    expireDue(now, limit) {
      // Read here first (an index probe), so that a sweep with nothing due costs the writer nothing.
      if (sql.anyDue.get(now) === undefined) return 0;
      return andThen(submit('expireOrders', [{ now, limit }]), (outcomes) => allSucceeded(outcomes)[0]!.length) as number;
    },
    inventory() {
      const inventory: Inventory = { available: 0, pending: 0, sold: 0 };
      for (const { status, pets } of sql.counts.all() as unknown as { status: PetStatus; pets: number }[]) inventory[status] = pets;
      return inventory;
    },
  };
}
