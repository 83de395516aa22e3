/**
 * Expiries of orders on PostgreSQL (the rule is storage/orders.ts's), made inside a write's
 * transaction: each due order is cancelled as at its `expiresAt` and frees its pet, in one
 * statement. The writes of orders (orders-store.ts) and of pets (pet-changes.ts) expire the
 * orders they read; the sweep, run by every instance's chores, the oldest due orders of all.
 */
import { toOrder, type OrderRow } from '../orders.ts';
import { toPet, type Expiry, type PetStatus } from '../pets.ts';
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
 * sweep) and frees their pets, answering each order and its freed pet (for the event log). The orders are locked in id order, so that
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
        FROM due WHERE o.id = due.id
        RETURNING o.id, o.pet_id, o.account, o.status, o.placed_at, o.updated_at, o.expires_at, o.version),
    freed AS (
      UPDATE pets p SET status = 'available', version = p.version + 1
        FROM expired WHERE p.id = expired.pet_id AND p.status = 'pending'
        RETURNING p.id, p.name, p.category_id, p.status, p.version)
    SELECT e.id, e.pet_id::text AS pet_id, e.account, e.status, e.placed_at, e.updated_at, e.expires_at, e.version,
           f.name AS pet_name, f.category_id::text AS pet_category_id, f.status AS pet_status, f.version AS pet_version
      FROM expired e LEFT JOIN freed f ON f.id = e.pet_id ORDER BY e.id`;
}

/** A row of `expiring`: the order, and its pet's columns when it was freed. */
type ExpiredRow = OrderRow & { pet_name: string | null; pet_category_id: string | null; pet_status: PetStatus | null; pet_version: number | null };

/** The expiries of `expiring`'s rows. */
export function toExpiries(rows: readonly ExpiredRow[]): Expiry[] {
  return rows.map((row) => ({
    order: toOrder(row),
    pet: row.pet_name === null ? null : toPet({ id: row.pet_id, name: row.pet_name, category_id: row.pet_category_id!, status: row.pet_status!, version: row.pet_version! }),
  }));
}

/** Expires the due orders `where` selects, in `tx`; `parameters` follow `now`. Resolves with what it expired. */
export async function expireWhere(tx: PostgresSql, where: string, now: number, parameters: readonly string[]): Promise<Expiry[]> {
  return toExpiries(await tx.unsafe<ExpiredRow[]>(expiring(where), [now, ...parameters], { prepare: true }));
}

/** The sweep: expires up to `limit` orders due at `now`, in `tx`, skipping those a write holds. */
export async function sweep(tx: PostgresSql, now: number, limit: number): Promise<Expiry[]> {
  return toExpiries(await tx.unsafe<ExpiredRow[]>(sweepStatement, [now, limit], { prepare: true }));
}

/** The expiry of a pet's order whose hold has ended, for a change of the pet (pet-changes.ts). */
export const expireOfPet = (tx: PostgresSql, petId: string, now: number) => expireWhere(tx, DUE_OF_PET, now, [petId]);

/** The sweep: `$1` now, `$2` the most orders it expires. */
const sweepStatement = expiring(DUE, { skipLocked: true });
