/**
 * Orders in PostgreSQL, shared by every instance. A batch of placements or steps is one
 * transaction; each item is its own unit of success or failure (item-savepoints.ts), and every
 * conflict is a statement's result, never an error (an error would send the whole batch down the
 * slow path, one savepoint per item):
 * - a placement takes its pet with `UPDATE ... WHERE status = 'available'`, which locks the pet's
 *   row: of concurrent placements for one pet, on any instances, the others wait for the first's
 *   commit, then find the pet `pending` and are refused. The unique index on the pet of open
 *   orders would refuse a second open order anyway;
 * - a step locks its order's row (`FOR UPDATE`) before it decides: of two concurrent steps of one
 *   order, the second sees the first's result (a cancel racing a complete: one wins, the other
 *   finds no transition).
 * - a placement first takes a transaction-level advisory lock per account of its batch (all of
 *   them, in one order, before any row lock), then counts the account's open orders: two
 *   placements by one account, on any instances, count one after the other, so the cap is exact
 *   (docs/decisions/0024-a-lock-per-account-for-the-cap.md);
 * - every write first expires the due orders it reads (storage/orders.ts), locking them in id
 *   order, orders before pets like every step; the sweep skips orders that a write holds, which
 *   expires them itself or moves them on, so an order is expired once whichever instances sweep.
 * The inventory reads the counts and the changes not yet folded into them in one snapshot
 * (migration 4): its cost does not grow with the number of pets.
 */
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import { claimKey, findRecord, rememberRecord } from './idempotency-records.ts';
import {
  decidePlacement, decideStep, isDue, orderAt, toOrder, withExpiries, type Inventory, type OrderChange, type OrderChangeOutcome, type OrderListOptions, type OrderPlacement, type OrderRow,
  type OrdersStore, type PlacementResult,
} from '../orders.ts';
import { toPet, type Expiry, type PetRow, type PetStatus } from '../pets.ts';
import { guard, guardRead } from './database.ts';
import type { PostgresSql } from './driver.ts';
import { inSavepoint, togetherOrOneByOne } from './item-savepoints.ts';
import { inLoggedTransaction } from './event-log.ts';
import { DUE_OF_ORDER, DUE_OF_PET_OR_ACCOUNT, expireWhere, sweep } from './order-expiries.ts';

const ORDER_COLUMNS = 'id, pet_id::text AS pet_id, account, status, placed_at, updated_at, expires_at, version';
const PET_COLUMNS = 'id, name, category_id::text AS category_id, status, version';

/** The counts and the changes not yet folded into them, read in one snapshot; never the pets. */
export const INVENTORY_SQL = `SELECT c.status, (c.pets + coalesce((SELECT sum(d.change) FROM pet_count_changes d WHERE d.status = c.status), 0))::text AS pets
  FROM pet_counts c`;

/**
 * A page of orders, one statement per case as on SQLite, each served by its own index: the
 * primary key; (status, id); (account, id); (account, status, id).
 *
 * One statement whose conditions a null parameter switched off (`$3 IS NULL OR account = $3`)
 * got, as a generic plan (after five executions, or with plan_cache_mode = force_generic_plan),
 * one plan for every case: a walk of the primary key that filtered on the account, which read
 * every order of the store to answer an account that has none. Separate statements are not
 * enough: a generic plan does not know the value, and for `status = $2 AND id > $1 ORDER BY id`
 * it still chose that walk (the primary key follows the table's order, the other index does not)
 * and read all 30,000 orders to find no `approved` one. So a filter on one column says "after
 * ($2, $1) and up to ($2, the largest id)" as two row comparisons, in the order of its index: the
 * same rows, but an order that only that index gives without sorting every row matched, and
 * bounds that start and stop its scan. With an account and a status, the account stays an
 * equality: PostgreSQL 15 stops a scan at a row comparison's bound only when the comparison's
 * first column passes it, and here that is the status. test/storage/postgres/orders-plans.test.ts
 * reads the pages each plan touches.
 */
const LARGEST_BIGINT = '9223372036854775807';
/** `column` equal to `value` and id after $1, as the two row comparisons described above. */
const keyset = (column: string, value: string) =>
  `(${column}, id) > (${value}, $1::bigint) AND (${column}, id) <= (${value}, ${LARGEST_BIGINT}::bigint)`;
const pageWhere = (filter: string, order: string, limit: string) => `SELECT ${ORDER_COLUMNS} FROM orders WHERE ${filter} ORDER BY ${order} LIMIT ${limit}`;
export const ORDER_PAGES = {
  all: pageWhere('id > $1::bigint', 'id', '$2'),
  byStatus: pageWhere(keyset('status', '$2::text'), 'status, id', '$3'),
  ofAccount: pageWhere(keyset('account', '$2::text'), 'account, id', '$3'),
  ofAccountByStatus: pageWhere(`account = $2::text AND ${keyset('status', '$3::text')}`, 'status, id', '$4'),
} as const;

/** The statement of a page and its parameters. */
function orderPage({ afterId, status, account, limit }: OrderListOptions): [statement: string, parameters: (string | number)[]] {
  const after = afterId.toString();
  if (account === null) return status === undefined ? [ORDER_PAGES.all, [after, limit]] : [ORDER_PAGES.byStatus, [after, status, limit]];
  return status === undefined ? [ORDER_PAGES.ofAccount, [after, account, limit]] : [ORDER_PAGES.ofAccountByStatus, [after, account, status, limit]];
}

export interface PostgresOrdersStore extends OrdersStore {
  /** Folds up to `limit` changes of the pets' counts into the counts; returns how many. */
  foldCounts(limit: number): Promise<number>;
}

/** The orders store over a migrated database. */
export function createOrdersStore(sql: PostgresSql): PostgresOrdersStore {
  return {
    placeMany(placements) {
      const accounts = [...new Set(placements.map((placement) => placement.account))];
      return guard(() => togetherOrOneByOne<ItemOutcome<PlacementResult>[]>(
        () => inLoggedTransaction(sql, 'placeOrders', placements, async (tx) => {
          await lockAccounts(tx, accounts);
          return each(placements, (placement) => place(tx, placement));
        }),
        () => inLoggedTransaction(sql, 'placeOrders', placements, async (tx) => {
          await lockAccounts(tx, accounts);
          return each(placements, (placement) => inSavepoint(tx, (sp) => place(sp, placement)));
        }),
        'transaction',
      ));
    },

    changeMany(changes) {
      // In order id order, so that two instances' batches lock orders (and their pets) in one order.
      const sorted = changes.map((change, index) => ({ change, index })).sort((a, b) => (a.change.id < b.change.id ? -1 : a.change.id > b.change.id ? 1 : a.index - b.index));
      const run = async (apply: (change: OrderChange) => Promise<ItemOutcome<OrderChangeOutcome>>) => {
        const outcomes = new Array<ItemOutcome<OrderChangeOutcome>>(changes.length);
        for (const { change, index } of sorted) outcomes[index] = await apply(change);
        return outcomes;
      };
      return guard(() => togetherOrOneByOne<ItemOutcome<OrderChangeOutcome>[]>(
        () => inLoggedTransaction(sql, 'changeOrders', changes, (tx) => run((change) => step(tx, change))),
        () => inLoggedTransaction(sql, 'changeOrders', changes, (tx) => run((change) => inSavepoint(tx, (sp) => step(sp, change)))),
        'transaction',
      ));
    },

    async get(id) {
      const rows = await guardRead(() => sql.unsafe<OrderRow[]>(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1::bigint`, [id.toString()], { prepare: true }));
      return rows.length === 0 ? null : toOrder(rows[0]!);
    },

    async list(options) {
      const [statement, parameters] = orderPage(options);
      const rows = await guardRead(() => sql.unsafe<OrderRow[]>(statement, parameters, { prepare: true }));
      return rows.map(toOrder);
    },

    findIdempotencyRecord: (apiKeyId, key, now) => guardRead(() => findRecord(sql, 'placeOrder', apiKeyId, key, now)),

    async inventory() {
      const rows = await guardRead(() => sql.unsafe<{ status: PetStatus; pets: string }[]>(
        INVENTORY_SQL,
        [],
        { prepare: true },
      ));
      const inventory: Inventory = { available: 0, pending: 0, sold: 0 };
      for (const row of rows) inventory[row.status] = Number(row.pets);
      return inventory;
    },

    async expireDue(now, limit) {
      const [expired] = await guard(() => inLoggedTransaction(sql, 'expireOrders', [null], async (tx) => [await sweep(tx, now, limit)]));
      return (expired as Expiry[]).length;
    },

    async foldCounts(limit) {
      const [row] = await guard(() => sql.unsafe<{ folded: string }[]>(
        `WITH moved AS (
           DELETE FROM pet_count_changes WHERE id IN (SELECT id FROM pet_count_changes ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
           RETURNING status, change
         ), summed AS (SELECT status, sum(change) AS change FROM moved GROUP BY status),
         folded AS (UPDATE pet_counts c SET pets = c.pets + s.change FROM summed s WHERE c.status = s.status RETURNING 1)
         SELECT count(*)::text AS folded FROM moved`,
        [limit],
        { prepare: true },
      ));
      return Number(row!.folded);
    },
  };
}


/**
 * Takes the lock of each account's open orders for the rest of the transaction, in one order
 * (every batch sorts the same way), before any row lock: a batch never waits for one while it
 * holds another's row. A transaction-level lock is released by its COMMIT, so it suits a pooler
 * in transaction mode; two accounts whose names hash alike only share a lock.
 */
async function lockAccounts(tx: PostgresSql, accounts: readonly string[]): Promise<void> {
  await tx.unsafe(
    `SELECT count(pg_advisory_xact_lock(hashtextextended('open orders of ' || a, 0)))
       FROM (SELECT DISTINCT a FROM unnest($1::text[]) AS a ORDER BY a) AS accounts`,
    [accounts],
    { prepare: true },
  );
}

/** `apply` to each item in turn (statements of one transaction are sent one after another). */
async function each<T, R>(items: readonly T[], apply: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (const item of items) results.push(await apply(item));
  return results;
}

/** One placement, inside the batch's transaction. */
async function place(tx: PostgresSql, { petId, account, now, expiresAt, maxOpen, idempotency }: OrderPlacement): Promise<PlacementResult> {
  if (idempotency) {
    const conflict = await claimKey(tx, 'placeOrder', idempotency.apiKeyId, idempotency.key, idempotency.createdAt);
    if (conflict) return conflict;
  }
  const id = petId.toString();
  // An ended hold on the pet frees it; the account's ended holds no longer count.
  const expired = await expireWhere(tx, DUE_OF_PET_OR_ACCOUNT, now, [id, account]);
  if (maxOpen !== null) {
    // The account's lock is held (lockAccounts): no other placement of it counts until this commits.
    const [{ open }] = await tx.unsafe<[{ open: number }]>(
      `SELECT count(*)::integer AS open FROM orders WHERE account = $1::text AND status IN ('placed', 'approved')`, [account], { prepare: true });
    if (open >= maxOpen) {
      const found = await tx.unsafe<{ status: PetStatus }[]>('SELECT status FROM pets WHERE id = $1::bigint', [id], { prepare: true });
      const decided = decidePlacement(found[0]?.status ?? null, open, maxOpen);
      // The pet's answers come first; a pet that is available is then refused for the cap.
      return withExpiries(decided.kind === 'take' ? { kind: 'too_many_open_orders', limit: maxOpen } : decided, expired);
    }
  }
  const pets = await tx.unsafe<PetRow[]>(
    `UPDATE pets SET status = 'pending', version = version + 1 WHERE id = $1::bigint AND status = 'available' RETURNING ${PET_COLUMNS}`,
    [id],
    { prepare: true },
  );
  if (pets.length === 0) {
    const found = await tx.unsafe<{ status: PetStatus }[]>('SELECT status FROM pets WHERE id = $1::bigint', [id], { prepare: true });
    return withExpiries(found.length === 0 ? { kind: 'pet_not_found' } : { kind: 'pet_not_available', status: found[0]!.status }, expired);
  }
  const [row] = await tx.unsafe<OrderRow[]>(
    `INSERT INTO orders (pet_id, account, status, placed_at, updated_at, expires_at)
     VALUES ($1::bigint, $2, 'placed', $3::bigint, $3::bigint, $4::bigint) RETURNING ${ORDER_COLUMNS}`,
    [id, account, now, expiresAt],
    { prepare: true },
  );
  const order = toOrder(row!);
  if (idempotency) await rememberRecord(tx, 'placeOrder', idempotency, order);
  return withExpiries({ kind: 'placed', order, pet: toPet(pets[0]!) }, expired);
}

/** One step of an order, inside the batch's transaction. */
async function step(tx: PostgresSql, change: OrderChange): Promise<OrderChangeOutcome> {
  const id = change.id.toString();
  const rows = await tx.unsafe<OrderRow[]>(`SELECT ${ORDER_COLUMNS} FROM orders WHERE id = $1::bigint FOR UPDATE`, [id], { prepare: true });
  let current = rows.length === 0 ? null : toOrder(rows[0]!);
  // An order whose hold has ended is cancelled (with its pet freed) before the step is decided.
  let expired: Expiry[] = [];
  if (current !== null && isDue(current, change.now)) {
    expired = await expireWhere(tx, DUE_OF_ORDER, change.now, [id]);
    current = orderAt(current, change.now);
  }
  const decided = decideStep(current, change);
  if (decided.kind !== 'move') return withExpiries(decided, expired);
  // Every step leaves `placed`, and with it the hold.
  const [row] = await tx.unsafe<OrderRow[]>(
    `UPDATE orders SET status = $2, updated_at = $3::bigint, expires_at = NULL, version = version + 1 WHERE id = $1::bigint RETURNING ${ORDER_COLUMNS}`,
    [id, change.to, change.now],
    { prepare: true },
  );
  const order = toOrder(row!);
  if (decided.pet === null) return { kind: 'changed', order, pet: null };
  const pets = await tx.unsafe<PetRow[]>(
    `UPDATE pets SET status = $2, version = version + 1 WHERE id = $1::bigint RETURNING ${PET_COLUMNS}`,
    [decided.current.petId.toString(), decided.pet],
    { prepare: true },
  );
  return withExpiries({ kind: 'changed', order, pet: pets.length === 0 ? null : toPet(pets[0]!) }, expired);
}
