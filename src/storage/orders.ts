/**
 * Orders as every storage engine stores them: an account's request to adopt one pet, and what
 * each step of an order does to its pet, in the same transaction. The rules that do not depend
 * on the engine live here, so that SQLite and PostgreSQL cannot drift apart.
 *
 * At most one order per pet is open (placed or approved): the database enforces it on both
 * engines (a unique index on the pet of open orders), and placing an order takes the pet from
 * `available` to `pending` in one statement, so of concurrent orders for one pet exactly one wins.
 *
 * A `placed` order holds its pet until its `expiresAt`; from that instant it is cancelled, as if
 * by the service at `expiresAt`. Every write transaction first expires the due orders it is about
 * to read (their pets become available), so no write ever acts on a hold that has ended; the
 * service's sweep (`expireDue`, every fraction of a second) expires the rest, so that reads show
 * it soon after. An expiry is one change of the order: cancelled, `updatedAt` its old
 * `expiresAt`, `expiresAt` null, the version one more. `expiresAt` is set only while `placed`.
 */
import type { ItemOutcome } from '../lib/item-outcome.ts';
import type { MaybePromise } from '../lib/maybe-promise.ts';
import type { IdempotencyConflict, IdempotencyRecord, IdempotencyWrite } from './idempotency.ts';
import type { Actor } from './actor.ts';
import type { Order, OrderStatus } from './order-record.ts';
import type { Expiry, Pet, PetStatus } from './pets.ts';
import { rowId } from './row-ids.ts';

export { ORDER_STATUSES, type Order, type OrderStatus } from './order-record.ts';

/** Whether `order` is a hold that has ended at `now`: still placed in the database, due to expire. */
export function isDue(order: Order, now: number): boolean {
  return order.status === 'placed' && order.expiresAt !== null && order.expiresAt <= now;
}

/**
 * The order as it stands at `now`: a due order is already cancelled (as its expiry will store
 * it, one version more), whether or not the database has recorded the expiry yet.
 */
export function orderAt(order: Order, now: number): Order {
  if (!isDue(order, now)) return order;
  return { ...order, status: 'cancelled', updatedAt: order.expiresAt!, expiresAt: null, version: order.version + 1 };
}

/**
 * The due orders an item's transaction expired before it did its own work (absent: none), so
 * that the write paths count expiries once, where they were made, and the log records them.
 */
export interface Expiries {
  expired?: readonly Expiry[];
}

/** `result` with its expiries, the field present only when there were some. */
export function withExpiries<R extends object>(result: R, expired: readonly Expiry[]): R & Expiries {
  return expired.length === 0 ? result : { ...result, expired };
}

/**
 * The transitions of an order, and what each does to its pet. `manage`: only a key with
 * `orders:manage` may make it; the others the order's own account may make too.
 */
export const TRANSITIONS: Readonly<Record<OrderStatus, readonly { to: OrderStatus; pet: PetStatus; manage: boolean }[]>> = {
  placed: [
    { to: 'approved', pet: 'pending', manage: true },
    { to: 'cancelled', pet: 'available', manage: false },
  ],
  approved: [
    { to: 'completed', pet: 'sold', manage: true },
    { to: 'cancelled', pet: 'available', manage: false },
  ],
  completed: [],
  cancelled: [],
};

/** The transition from `from` to `to`, if the table has it. */
export function transition(from: OrderStatus, to: OrderStatus) {
  return TRANSITIONS[from].find((step) => step.to === to);
}

/**
 * What a step asks of `current` (the order as read, locked, in the step's transaction, after
 * its expiry if it was due): an
 * outcome that changes nothing, or the move to make, with what it does to the pet. The same rules
 * on every engine, in the interface's order of checks.
 */
export function decideStep(current: Order | null, change: OrderChange): Exclude<OrderChangeOutcome, { kind: 'changed' }> | { kind: 'move'; current: Order; pet: PetStatus | null } {
  if (current === null || (change.account !== null && current.account !== change.account)) return { kind: 'not_found' };
  if (change.expectedVersion !== null && current.version !== change.expectedVersion) return { kind: 'version_mismatch' };
  if (current.status === change.to) return { kind: 'unchanged', order: current };
  const move = transition(current.status, change.to);
  if (move === undefined) return { kind: 'invalid_transition', from: current.status };
  if (move.manage && !change.manage) return { kind: 'forbidden' };
  // Approving leaves the pet pending, and its ETag as it is.
  return { kind: 'move', current, pet: current.status === 'placed' && change.to === 'approved' ? null : move.pet };
}

/** A placement: an order for a pet, by an account, with the Idempotency-Key record to write beside it. */
export interface OrderPlacement {
  petId: bigint;
  account: string;
  now: number;
  /** When the hold ends: `now` plus ORDER_HOLD_SECONDS. */
  expiresAt: number;
  /**
   * Most open orders the account may have for this placement to be made
   * (MAX_OPEN_ORDERS_PER_ACCOUNT), counted in its transaction; null: no cap (`orders:manage`).
   */
  maxOpen: number | null;
  idempotency?: IdempotencyWrite;
  /** The key whose request places it, for the event log; absent: the service's own. */
  actor?: Actor;
}

/** What placing an order did: the order and the pet as it now is, or why not. */
export type PlacementResult = (
  | { kind: 'placed'; order: Order; pet: Pet }
  | { kind: 'pet_not_found' }
  /** The pet is not available (its status says why): another order holds it, or it is sold. */
  | { kind: 'pet_not_available'; status: PetStatus }
  /** The account already has `limit` open orders: nothing was written but the expiries. */
  | { kind: 'too_many_open_orders'; limit: number }
  | IdempotencyConflict<Order>
) & Expiries;

/**
 * What a placement decides once its pet's status (null: no such pet) and the account's open
 * orders are known, in the interface's order of checks: the pet first, then the cap.
 */
export function decidePlacement(petStatus: PetStatus | null, open: number, maxOpen: number | null):
  { kind: 'pet_not_found' } | { kind: 'pet_not_available'; status: PetStatus } | { kind: 'too_many_open_orders'; limit: number } | { kind: 'take' } {
  if (petStatus === null) return { kind: 'pet_not_found' };
  if (petStatus !== 'available') return { kind: 'pet_not_available', status: petStatus };
  if (maxOpen !== null && open >= maxOpen) return { kind: 'too_many_open_orders', limit: maxOpen };
  return { kind: 'take' };
}

/** A step of one order; with `expectedVersion`, only while the order still has that version. */
export interface OrderChange {
  id: bigint;
  to: OrderStatus;
  expectedVersion: number | null;
  /** The caller may make the transitions reserved to `orders:manage`. */
  manage: boolean;
  /** The caller's account, when it may only change its own account's orders. */
  account: string | null;
  now: number;
  /** The key whose request makes the step, for the event log; absent: the service's own. */
  actor?: Actor;
}

export type OrderChangeOutcome = (
  | { kind: 'changed'; order: Order; pet: Pet | null }
  /** The order is already in the status asked for: nothing changed. */
  | { kind: 'unchanged'; order: Order }
  | { kind: 'not_found' }
  | { kind: 'version_mismatch' }
  /** No such transition from the order's current status. */
  | { kind: 'invalid_transition'; from: OrderStatus }
  /** The transition exists, but only `orders:manage` may make it. */
  | { kind: 'forbidden' }
) & Expiries;

export interface OrderListOptions {
  afterId: bigint;
  status: OrderStatus | undefined;
  /** Only this account's orders; null: every account's. */
  account: string | null;
  limit: number;
}

/** Counts of pets by status, now. */
export type Inventory = Record<PetStatus, number>;

/** The orders store of either engine; each write is a batch, each item its own outcome. */
export interface OrdersStore {
  /**
   * Places the orders in one transaction, each with its pet going from `available` to `pending`
   * and its Idempotency-Key record, if any: one result (or conflict) per placement, in order.
   * Durable when it returns.
   */
  placeMany(placements: readonly OrderPlacement[]): MaybePromise<ItemOutcome<PlacementResult>[]>;
  /** Applies the steps in one transaction, each with its effect on the pet; durable when it returns. */
  changeMany(changes: readonly OrderChange[]): MaybePromise<ItemOutcome<OrderChangeOutcome>[]>;
  get(id: bigint): MaybePromise<Order | null>;
  /** Up to `limit` orders after `afterId`, by id ascending. */
  list(options: OrderListOptions): MaybePromise<Order[]>;
  /** The live record of an API key's Idempotency-Key for placeOrder, or null. */
  findIdempotencyRecord(apiKeyId: string, key: string, now: number): MaybePromise<IdempotencyRecord<Order> | null>;
  /** How many pets have each status now, at a cost that does not grow with the number of pets. */
  inventory(): MaybePromise<Inventory>;
  /**
   * Expires up to `limit` orders due at `now` (the service's sweep), each freeing its pet, in one
   * transaction; resolves with how many. On every engine an order is expired once, whichever
   * instances sweep at the same time.
   */
  expireDue(now: number, limit: number): MaybePromise<number>;
}

/** A row of `orders` as both engines select it: pet_id as text, so its int64 digits stay exact. */
export interface OrderRow {
  id: number | string;
  pet_id: string;
  account: string;
  status: OrderStatus;
  placed_at: number | string;
  updated_at: number | string;
  expires_at: number | string | null;
  version: number;
}

/** The domain value of a row. */
export function toOrder(row: OrderRow): Order {
  return {
    id: rowId(row.id), petId: BigInt(row.pet_id), account: row.account, status: row.status,
    placedAt: Number(row.placed_at), updatedAt: Number(row.updated_at),
    // Only a placed order has a hold (an instance of 1.2, while instances are rolled, may leave
    // the column set by a step).
    expiresAt: row.status !== 'placed' || row.expires_at === null ? null : Number(row.expires_at), version: row.version,
  };
}
