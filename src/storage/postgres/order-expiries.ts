/**
 * Expiries of orders on PostgreSQL (the rule is storage/orders.ts's), made inside a write's
 * transaction: each due order is cancelled as at its `expiresAt` and frees its pet, in one
 * statement. The writes of orders (orders-store.ts) and of pets (pet-changes.ts) expire the
 * orders they read; the sweep, run by every instance's chores, the oldest due orders of all.
 */
import type { PostgresSql } from './driver.ts';

/**
 * Whose orders an expiry reads: `$1` is always `now`. Each condition restates a partial index's
 * own (`status IN ('placed', 'approved')` for orders_open_pet) so that the planner may use it.
 */
const DUE = `status = 'placed' AND expires_at <= $1::bigint`;
export const DUE_OF_ORDER = `id = $2::bigint AND ${DUE}`;
const DUE_OF_PET = `pet_id = $2::bigint AND status IN ('placed', 'approved') AND ${DUE}`;
export const DUE_OF_PET_OR_ACCOUNT = `((pet_id = $2::bigint AND status IN ('placed', 'approved')) OR account = $3::text) AND ${DUE}`;

/**
 * One statement that expires the due orders `where` selects (oldest first, at most $2 for the
 * sweep) and frees their pets, answering how many. The orders are locked in id order, so that
 * writes that expire several never wait on each other in a circle; the sweep skips an order a
 * write holds (that write expires it, or moves it on; the next sweep sees it otherwise). A row
 * changed meanwhile is checked again against `where` once its lock is granted, so an order
 * approved or expired by another transaction is left alone.
 */
function expiring(where: string, { skipLocked = false } = {}): string {
  const due = skipLocked
    ? `SELECT id FROM orders WHERE ${where} ORDER BY expires_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`
    : `SELECT id FROM orders WHERE ${where} ORDER BY id FOR UPDATE`;
  return `WITH due AS (${due}),
    expired AS (
      UPDATE orders o SET status = 'cancelled', updated_at = o.expires_at, expires_at = NULL, version = o.version + 1
        FROM due WHERE o.id = due.id RETURNING o.pet_id),
    freed AS (
      UPDATE pets p SET status = 'available', version = p.version + 1
        FROM expired WHERE p.id = expired.pet_id AND p.status = 'pending' RETURNING p.id)
    SELECT (SELECT count(*) FROM expired)::integer AS expired`;
}

/** Expires the due orders `where` selects, in `tx`; `parameters` follow `now`. Resolves with how many. */
export async function expireWhere(tx: PostgresSql, where: string, now: number, parameters: readonly string[]): Promise<number> {
  const [row] = await tx.unsafe<{ expired: number }[]>(expiring(where), [now, ...parameters], { prepare: true });
  return row!.expired;
}

/** The expiry of a pet's order whose hold has ended, for a change of the pet (pet-changes.ts). */
export const expireOfPet = (tx: PostgresSql, petId: string, now: number) => expireWhere(tx, DUE_OF_PET, now, [petId]);

/** The sweep: `$1` now, `$2` the most orders it expires. */
export const sweepStatement = expiring(DUE, { skipLocked: true });
