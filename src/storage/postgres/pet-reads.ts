/**
 * The pets' reads on PostgreSQL: lookups by id and pages of a list, each kind batched per
 * event-loop turn into one statement (group commit of reads), so that a busy instance pays a
 * round trip per turn, not per request.
 */
import { createGroupCommit } from '../../lib/group-commit.ts';
import type { ListOptions, Pet, PetRow, PetStatus } from '../pets.ts';
import { toPet } from '../pets.ts';
import { rowId } from '../row-ids.ts';
import { guardRead } from './database.ts';
import type { PostgresSql } from './driver.ts';

// id comes as text (the driver leaves int8 alone) and becomes a Number in toPet; casting to float8
// in SQL measured several times slower per row.
export const PET_COLUMNS = 'id, name, category_id::text AS category_id, status, version';

/** The pets of a batch of lookups by id ($1: their ids). */
export const PETS_BY_ID = `SELECT ${PET_COLUMNS} FROM pets WHERE id = ANY($1::bigint[])`;

/**
 * A page's pets as one JSON text of arrays `[id, name, categoryId, status, version]`
 * (categoryId a string, so that its digits stay exact) rather than a row per pet: the driver
 * spends about a microsecond on each row it decodes, JSON.parse far less per pet. Names are
 * quoted by to_json, whose escapes JSON.parse undoes exactly; a status is one of three words (the
 * table's CHECK), quoted as it is. Measured (docs/performance.md, "PostgreSQL: what a request costs"): a
 * page of 21 pets cost PostgreSQL 17 us instead of 15, the service 9 instead of 23. A pet by id
 * stays a row: it is one row per request anyway, and as JSON cost PostgreSQL more.
 */
const PET_JSON = `'[' || id || ',' || to_json(name)::text || ',"' || category_id || '","' || status || '",' || version || ']'`;

/**
 * The pages of a batch of lists ($1, $2, $3: each page's cursor id, status or null, and rows),
 * each with its ordinal and its pets as one JSON text (null for an empty page). Each page is its
 * own keyset query, on the primary key or on (status, id); the branch whose condition on
 * q.status is false is not run. No ORDER BY: a sort per page cost PostgreSQL 3 to 4 us, and the
 * order is checked where the text is read (pagesOf).
 */
export const PAGES = `
  SELECT q.ord, (SELECT '[' || string_agg(${PET_JSON}, ',') || ']' FROM (
           (SELECT id, name, category_id, status, version FROM pets WHERE q.status IS NULL AND id > q.after_id ORDER BY id LIMIT q.lim)
           UNION ALL
           (SELECT id, name, category_id, status, version FROM pets WHERE q.status IS NOT NULL AND status = q.status AND id > q.after_id ORDER BY status, id LIMIT q.lim)
         ) AS p) AS pets
    FROM unnest($1::bigint[], $2::text[], $3::integer[]) WITH ORDINALITY AS q(after_id, status, lim, ord)`;

/** The pets of one page's JSON text (PAGES). */
function petsOf(json: string | null): Pet[] {
  if (json === null) return [];
  return (JSON.parse(json) as [number, string, string, PetStatus, number][]).map(([id, name, categoryId, status, version]) => ({
    id: rowId(id), name, categoryId: BigInt(categoryId), status, version,
  }));
}

/** The pages of PAGES's rows, in the order asked, each in id order. */
function pagesOf(rows: readonly { ord: string; pets: string | null }[], count: number): Pet[][] {
  const pages = new Array<Pet[]>(count);
  for (const row of rows) {
    const pets = petsOf(row.pets);
    if (pets.some((pet, index) => index > 0 && pets[index - 1]!.id > pet.id)) pets.sort((a, b) => a.id - b.id);
    pages[Number(row.ord) - 1] = pets;
  }
  return pages;
}

/** Read statements of one instance awaited at once, per kind (lookups, pages). */
const READ_BATCHES_IN_FLIGHT = 3;

/** The batched reads of one instance: a pet by id, and a page of a list. */
export function createPetReads(sql: PostgresSql): { get(id: bigint): Promise<Pet | null>; list(options: ListOptions): Promise<Pet[]> } {
  // Reads of one event-loop turn go as one statement each for lookups and for pages, so a busy
  // instance pays a round trip per turn, not per request. Each statement starts after every
  // request in it arrived, so it sees whatever had been committed before.
  const gets = createGroupCommit<string, Pet | null>({
    async commit(ids) {
      const rows = await guardRead(() => sql.unsafe<PetRow[]>(PETS_BY_ID, [ids as string[]], { prepare: true }));
      const byId = new Map(rows.map((row) => [String(row.id), toPet(row)]));
      return ids.map((id) => byId.get(BigInt(id).toString()) ?? null);
    },
    maxInFlight: READ_BATCHES_IN_FLIGHT,
  });
  const lists = createGroupCommit<ListOptions, Pet[]>({
    async commit(pages) {
      const rows = await guardRead(() => sql.unsafe<{ ord: string; pets: string | null }[]>(
        PAGES,
        [pages.map((page) => page.afterId.toString()), pages.map((page) => page.status ?? null), pages.map((page) => page.limit)],
        { prepare: true },
      ));
      return pagesOf(rows, pages.length);
    },
    maxInFlight: READ_BATCHES_IN_FLIGHT,
  });

  return {
    get: (id) => gets.submit(id.toString()),
    list: (options) => lists.submit(options),
  };
}
