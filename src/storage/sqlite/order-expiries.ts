/**
 * Expiries of orders on SQLite (the rule is storage/orders.ts's), made inside a write's
 * transaction: each due order is cancelled as at its `expiresAt` and frees its pet, and each pet
 * freed is a touch for the journal (write-journal.ts), so that the readers' cached answers about
 * it go. The writes of orders (order-writes.ts) and of pets (pet-writes.ts) expire the orders they
 * read; the sweep expires the oldest due orders of all.
 */
import type { DatabaseSync } from 'node:sqlite';
import { statusBit } from '../pets.ts';
import type { Touch } from './write-journal.ts';

/** An expiry sets what the order's cancellation at its `expiresAt` would have set. */
const EXPIRE = `UPDATE orders SET status = 'cancelled', updated_at = expires_at, expires_at = NULL, version = version + 1`;

/** Expiries of the due orders that one write reads, each freeing its pet (a touch each). */
export interface OrderExpiries {
  /** The pet's order, if it is due at `now`; returns how many were expired (0 or 1). */
  ofPet(petId: bigint, now: number, touched: Touch[]): number;
  ofAccount(account: string, now: number, touched: Touch[]): number;
  one(orderId: bigint, now: number, touched: Touch[]): number;
  oldest(now: number, limit: number, touched: Touch[]): number;
}

/**
 * Prepares the expiries' statements on `db` once. The conditions restate the partial indexes' own
 * (`status IN ('placed', 'approved')` for orders_open_pet), so that SQLite may use them.
 */
export function createOrderExpiries(db: DatabaseSync): OrderExpiries {
  const due = `status = 'placed' AND expires_at <= :now`;
  const ofPet = db.prepare(`${EXPIRE} WHERE pet_id = :key AND status IN ('placed', 'approved') AND ${due} RETURNING CAST(pet_id AS TEXT) AS pet_id`);
  const ofAccount = db.prepare(`${EXPIRE} WHERE account = :key AND ${due} RETURNING CAST(pet_id AS TEXT) AS pet_id`);
  const one = db.prepare(`${EXPIRE} WHERE id = :key AND ${due} RETURNING CAST(pet_id AS TEXT) AS pet_id`);
  const oldest = db.prepare(`${EXPIRE} WHERE id IN (SELECT id FROM orders WHERE ${due} ORDER BY expires_at LIMIT :key) RETURNING CAST(pet_id AS TEXT) AS pet_id`);
  // A held pet is pending: its status and its existence belonged to the order.
  const freePet = db.prepare(`UPDATE pets SET status = 'available', version = version + 1 WHERE id = ? AND status = 'pending'`);
  const FREED = statusBit('pending') | statusBit('available');
  const run = (statement: ReturnType<DatabaseSync['prepare']>, key: bigint | string | number, now: number, touched: Touch[]) => {
    const rows = statement.all({ key, now }) as { pet_id: string }[];
    for (const { pet_id } of rows) {
      freePet.run(BigInt(pet_id));
      touched.push({ from: Number(pet_id), to: Number(pet_id), statuses: FREED });
    }
    return rows.length;
  };
  return {
    ofPet: (petId, now, touched) => run(ofPet, petId, now, touched),
    ofAccount: (account, now, touched) => run(ofAccount, account, now, touched),
    one: (orderId, now, touched) => run(one, orderId, now, touched),
    oldest: (now, limit, touched) => run(oldest, limit, now, touched),
  };
}
