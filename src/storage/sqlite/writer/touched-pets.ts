/**
 * What a write touched, recorded by the database itself: TEMP triggers on the writing connection
 * log every row of `pets` inserted, changed or deleted (by a write to pets, or by an order that
 * moves its pet) with its status before and after, into a TEMP table. The executor (executor.ts)
 * takes the log at the end of each group's transaction and records it in the journal once the
 * group has committed, so no write, present or future, can forget to say what it touched: the
 * answer caches cannot be left stale by a write that forgot.
 *
 * The log is part of the transaction: a group rolled back, or an item rolled back to its
 * savepoint (item-savepoints.ts), takes its rows of the log with it.
 */
import type { DatabaseSync } from 'node:sqlite';
import { ANY_STATUS, PET_STATUSES, statusBit } from '../../pets.ts';
import { JOURNAL_LENGTH, type Touch } from './journal.ts';

/** A status as its bit (statusBit), in SQL; an unknown status counts as any. */
function bitOf(column: string): string {
  return `CASE ${column} ${PET_STATUSES.map((status) => `WHEN '${status}' THEN ${statusBit(status)}`).join(' ')} ELSE ${ANY_STATUS} END`;
}

const SCHEMA = `
  CREATE TEMP TABLE IF NOT EXISTS touched_pets (id INTEGER NOT NULL, statuses INTEGER NOT NULL);
  CREATE TEMP TRIGGER IF NOT EXISTS pets_inserted AFTER INSERT ON main.pets
    BEGIN INSERT INTO touched_pets VALUES (NEW.id, ${bitOf('NEW.status')}); END;
  CREATE TEMP TRIGGER IF NOT EXISTS pets_updated AFTER UPDATE ON main.pets
    BEGIN
      INSERT INTO touched_pets VALUES (OLD.id, ${bitOf('OLD.status')} | ${bitOf('NEW.status')});
      INSERT INTO touched_pets SELECT NEW.id, ${bitOf('NEW.status')} WHERE NEW.id <> OLD.id;
    END;
  CREATE TEMP TRIGGER IF NOT EXISTS pets_deleted AFTER DELETE ON main.pets
    BEGIN INSERT INTO touched_pets VALUES (OLD.id, ${bitOf('OLD.status')}); END;
`;

/** Most touches one group records: beyond, they are merged into fewer, wider ones. */
const MOST_TOUCHES = JOURNAL_LENGTH / 8;

/**
 * Installs the log on `db` (a connection that writes) and returns the function that takes it,
 * inside the transaction whose writes it holds: the pets touched, as few touches as cover them.
 */
export function touchedPets(db: DatabaseSync): () => Touch[] {
  db.exec(SCHEMA);
  const take = db.prepare('DELETE FROM temp.touched_pets RETURNING id, statuses');
  take.setReadBigInts(true);
  return () => merged(take.all() as unknown as { id: bigint; statuses: bigint }[]);
}

/**
 * The rows as touches: runs of consecutive ids with the same statuses as one (a group of creates
 * is one), and, should there still be many, one touch per set of statuses from its least id to its
 * greatest. Wider is never wrong: a cached answer is dropped for nothing, never kept stale.
 */
export function merged(rows: readonly { id: bigint; statuses: bigint }[]): Touch[] {
  if (rows.length === 0) return [];
  const sorted = rows.map(({ id, statuses }) => ({ id, statuses: Number(statuses) })).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : a.statuses - b.statuses));
  const touches: Touch[] = [];
  for (const { id, statuses } of sorted) {
    const last = touches.at(-1);
    if (last !== undefined && last.statuses === statuses && id <= last.to + 1n) last.to = id > last.to ? id : last.to;
    else touches.push({ from: id, to: id, statuses });
  }
  if (touches.length <= MOST_TOUCHES) return touches;
  const bySet = new Map<number, Touch>();
  for (const touch of touches) {
    const wide = bySet.get(touch.statuses);
    if (wide === undefined) bySet.set(touch.statuses, { ...touch });
    else wide.to = touch.to;
  }
  return [...bySet.values()];
}
