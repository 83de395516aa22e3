/**
 * Expiries of orders on SQLite (the rule is storage/orders.ts's), made inside a write's
 * transaction: each due order is cancelled as at its `expiresAt` and frees its pet; the database
 * logs each pet freed for the journal (writer/touched-pets.ts), so that the readers' cached
 * answers about it go. The writes of orders (order-writes.ts) and of pets (pet-writes.ts) expire the orders they
 * read; the sweep expires the oldest due orders of all.
 */
import type { DatabaseSync } from 'node:sqlite';
import { toOrder, type OrderRow } from '../orders.ts';
import { toPet, type Expiry, type PetRow } from '../pets.ts';
import { ORDER_COLUMNS, PET_COLUMNS } from './columns.ts';

/** An expiry sets what the order's cancellation at its `expiresAt` would have set. */
const EXPIRE = `UPDATE orders SET status = 'cancelled', updated_at = expires_at, expires_at = NULL, version = version + 1`;

/** Expiries of the due orders that one write reads, each freeing its pet; each returns what it expired. */
export interface OrderExpiries {
  /** The pet's order, if it is due at `now` (none or one). */
  ofPet(petId: bigint, now: number): Expiry[];
  ofAccount(account: string, now: number): Expiry[];
  one(orderId: bigint, now: number): Expiry[];
  oldest(now: number, limit: number): Expiry[];
}

/**
 * Prepares the expiries' statements on `db` once. The conditions restate the partial indexes' own
 * (`status IN ('placed', 'approved')` for orders_open_pet), so that SQLite may use them.
 */
export function createOrderExpiries(db: DatabaseSync): OrderExpiries {
  const due = `status = 'placed' AND expires_at <= :now`;
  const ofPet = db.prepare(`${EXPIRE} WHERE pet_id = :key AND status IN ('placed', 'approved') AND ${due} RETURNING ${ORDER_COLUMNS}`);
  const ofAccount = db.prepare(`${EXPIRE} WHERE account = :key AND ${due} RETURNING ${ORDER_COLUMNS}`);
  const one = db.prepare(`${EXPIRE} WHERE id = :key AND ${due} RETURNING ${ORDER_COLUMNS}`);
  const oldest = db.prepare(`${EXPIRE} WHERE id IN (SELECT id FROM orders WHERE ${due} ORDER BY expires_at LIMIT :key) RETURNING ${ORDER_COLUMNS}`);
  // A held pet is pending: its status and its existence belonged to the order.
  const freePet = db.prepare(`UPDATE pets SET status = 'available', version = version + 1 WHERE id = ? AND status = 'pending' RETURNING ${PET_COLUMNS}`);
  const run = (statement: ReturnType<DatabaseSync['prepare']>, key: bigint | string | number, now: number) => {
    const rows = statement.all({ key, now }) as unknown as OrderRow[];
    // In id order, as PostgreSQL expires them, so that both engines log them alike.
    rows.sort((a, b) => Number(a.id) - Number(b.id));
    return rows.map((row): Expiry => {
      const pet = freePet.get(BigInt(row.pet_id)) as PetRow | undefined;
      return { order: toOrder(row), pet: pet === undefined ? null : toPet(pet) };
    });
  };
  return {
    ofPet: (petId, now) => run(ofPet, petId, now),
    ofAccount: (account, now) => run(ofAccount, account, now),
    one: (orderId, now) => run(one, orderId, now),
    oldest: (now, limit) => run(oldest, limit, now),
  };
}
