/**
 * The pets' changes and deletions on PostgreSQL: a batch in one transaction, each change its own
 * unit of success or failure (item-savepoints.ts), the version check in each statement's WHERE.
 */
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import type { ChangeOutcome, PetChange, PetRow } from '../pets.ts';
import { toPet } from '../pets.ts';
import { guard } from './database.ts';
import type { PostgresSql } from './driver.ts';
import { inSavepoint, inTransaction, togetherOrOneByOne } from './item-savepoints.ts';
import { expireOfPet } from './order-expiries.ts';
import { PET_COLUMNS } from './pet-reads.ts';

/** Applies a batch of changes; should one fail, again each in its own savepoint, so that it fails alone. */
export function changeMany(sql: PostgresSql, changes: readonly PetChange[]): Promise<ItemOutcome<ChangeOutcome>[]> {
  return guard(() => togetherOrOneByOne<ItemOutcome<ChangeOutcome>[]>(
    () => inTransaction(sql, (tx) => applyChanges(changes, (change) => applyChange(tx, change))),
    () => inTransaction(sql, (tx) => applyChanges(changes, (change) => inSavepoint(tx, (sp) => applyChange(sp, change)))),
    'transaction',
  ));
}

/**
 * Applies a batch of changes in one transaction, each with `apply`. The version check is in each
 * statement's WHERE: a concurrent change by another instance makes this one wait for the row,
 * then find the version bumped, so of two changes expecting one version exactly one applies.
 * Changes run in pet id order (a pet's own changes keep theirs), so two instances' batches lock
 * rows in the same order and never deadlock.
 */
async function applyChanges<R>(changes: readonly PetChange[], apply: (change: PetChange) => Promise<R>): Promise<R[]> {
  const order = changes.map((_, index) => index).sort((a, b) => {
    const [x, y] = [changes[a]!.id, changes[b]!.id];
    return x < y ? -1 : x > y ? 1 : a - b;
  });
  const outcomes = new Array<R>(changes.length);
  for (const index of order) outcomes[index] = await apply(changes[index]!);
  return outcomes;
}

/**
 * Applies one change, after expiring the order whose hold on the pet ended by the change's `now`
 * (its row locked before the pet's, as every write of orders does).
 */
async function applyChange(tx: PostgresSql, change: PetChange): Promise<ChangeOutcome> {
  const expired = await expireOfPet(tx, change.id.toString(), change.now);
  const outcome = await applyUnheld(tx, change);
  return expired === 0 ? outcome : { ...outcome, expired };
}

/** Applies one change; a version or an id that does not match is an outcome, not an error. */
async function applyUnheld(tx: PostgresSql, change: PetChange): Promise<ChangeOutcome> {
  const id = change.id.toString();
  if (change.kind === 'delete' || change.patch.status !== undefined) {
    const held = await heldByOrder(tx, id);
    if (held !== null) return change.expectedVersion !== null && held !== change.expectedVersion ? { kind: 'version_mismatch' } : { kind: 'has_open_order' };
  }
  if (change.kind === 'update') {
    const { name = null, categoryId = null, status = null } = change.patch;
    const rows = await tx.unsafe<PetRow[]>(
      `UPDATE pets SET name = coalesce($2, name), category_id = coalesce($3::bigint, category_id),
              status = coalesce($4, status), version = version + 1
        WHERE id = $1::bigint AND version = coalesce($5::integer, version)
        RETURNING ${PET_COLUMNS}`,
      [id, name, categoryId === null ? null : categoryId.toString(), status, change.expectedVersion],
      { prepare: true },
    );
    if (rows.length === 1) return { kind: 'updated', pet: toPet(rows[0]!) };
  } else {
    const result = await tx.unsafe('DELETE FROM pets WHERE id = $1::bigint AND version = coalesce($2::integer, version)', [id, change.expectedVersion], { prepare: true });
    if (result.count === 1) return { kind: 'deleted' };
  }
  // Nothing was changed: either there is no such pet, or it has another version.
  const exists = await tx.unsafe('SELECT 1 FROM pets WHERE id = $1::bigint', [id], { prepare: true });
  return exists.length === 1 ? { kind: 'version_mismatch' } : { kind: 'not_found' };
}

/**
 * The version of a pet that an open order holds, or null (no such pet, or no open order). The
 * pet's row is locked first, and the orders are read by a second statement, whose snapshot is
 * taken after the lock was granted: an order placed meanwhile (its placement held the row until
 * its commit) is seen, and a placement that comes after waits for this transaction.
 */
async function heldByOrder(tx: PostgresSql, id: string): Promise<number | null> {
  const rows = await tx.unsafe<{ version: number }[]>('SELECT version FROM pets WHERE id = $1::bigint FOR UPDATE', [id], { prepare: true });
  if (rows.length === 0) return null;
  const open = await tx.unsafe(`SELECT 1 FROM orders WHERE pet_id = $1::bigint AND status IN ('placed', 'approved')`, [id], { prepare: true });
  return open.length === 0 ? null : rows[0]!.version;
}
