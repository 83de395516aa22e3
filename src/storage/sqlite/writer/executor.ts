/**
 * Every write the server makes to its SQLite file, as data: a request names an operation and its
 * items, and `createWriteExecutor` runs any number of requests, of every kind and from every
 * thread, in one transaction (one fsync), each item its own unit of success or failure
 * (item-savepoints.ts). The writer thread runs it over the one writable connection
 * (thread.ts); a connection that makes its own writes (`:memory:`, tests, seeding) runs it
 * in place, one request per transaction (`localWrites`).
 *
 * The pets each group touched, as the database logged them (touched-pets.ts), are recorded in the
 * journal once the transaction has committed (journal.ts), and not before, so that no thread
 * reads the record before the rows.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { ItemOutcome } from '../../../lib/item-outcome.ts';
import type { MaybePromise } from '../../../lib/maybe-promise.ts';
import type { LimiterChanges } from '../../../limits/limiter.ts';
import type { OrderChange, OrderChangeOutcome, OrderPlacement, PlacementResult } from '../../orders.ts';
import type { ChangeOutcome, CreationResult, Expiry, PetChange, PetCreation } from '../../pets.ts';
import { eventsOfBatch, type LoggedOp } from '../../events.ts';
import { createEventAppender, createEventPurge } from '../event-log.ts';
import { purgeExpiredRecords } from '../idempotency-records.ts';
import { createBatchRunner, type IsolateItem } from '../item-savepoints.ts';
import { limiterRows } from '../limiter-store.ts';
import { createOrderWrites } from '../order-writes.ts';
import { createPetWrites } from '../pet-writes.ts';
import { createWebhookWrites, type DeliveryClaim, type DeliveryRelease } from '../webhook-writes.ts';
import type { AttemptRecord, ClaimedDelivery, Webhook, WebhookChange, WebhookCreation, WebhookCreationResult } from '../../webhooks.ts';
import { touchedPets } from './touched-pets.ts';
import { journalOf, recordWrites, type Touch, type WriteJournal } from './journal.ts';

/** Each operation's item and the result of one item. */
export interface WriteOps {
  insertPets: { item: PetCreation; result: CreationResult };
  changePets: { item: PetChange; result: ChangeOutcome };
  placeOrders: { item: OrderPlacement; result: PlacementResult };
  changeOrders: { item: OrderChange; result: OrderChangeOutcome };
  /** The sweep: expires up to `limit` orders due at `now`; the result is what it expired. */
  expireOrders: { item: { now: number; limit: number }; result: Expiry[] };
  /** The limiter's changes since its last save (the chores' flush); the result is the rows written. */
  saveLimiter: { item: LimiterChanges; result: number };
  /** Deletes up to `limit` events older than `before` (the log's retention); the result is how many. */
  purgeEvents: { item: { before: number; limit: number }; result: number };
  /** Deletes up to `limit` Idempotency-Key records expired at `now`; the result is how many. */
  purgeRecords: { item: { now: number; limit: number }; result: number };
  createWebhooks: { item: WebhookCreation; result: WebhookCreationResult };
  /** A merge patch; the result is the webhook changed, or null when the account has no such webhook. */
  changeWebhooks: { item: WebhookChange; result: Webhook | null };
  /** The result says whether the account had the webhook. */
  removeWebhooks: { item: { account: string; id: number }; result: boolean };
  /** The delivery worker's claim of due deliveries, for a lease. */
  claimDeliveries: { item: DeliveryClaim; result: ClaimedDelivery[] };
  /** An attempt and what follows it; false when the claim was no longer the holder's (ignored). */
  recordAttempts: { item: AttemptRecord; result: boolean };
  /** Claims given back unattempted; the result is how many were still the holder's. */
  releaseDeliveries: { item: DeliveryRelease; result: number };
}
export type WriteOp = keyof WriteOps;
export type WriteItem<Op extends WriteOp> = WriteOps[Op]['item'];
export type WriteResult<Op extends WriteOp> = WriteOps[Op]['result'];

/** One caller's batch of one operation. */
export interface WriteRequest<Op extends WriteOp = WriteOp> {
  op: Op;
  items: readonly WriteItem<Op>[];
}

/**
 * Makes a batch of one operation durably: one outcome per item, in order, once committed; throws
 * (or rejects) only when nothing of the batch was written. The stores write through this, in
 * place or through the writer thread.
 */
export type SubmitWrites = <Op extends WriteOp>(op: Op, items: readonly WriteItem<Op>[]) => MaybePromise<ItemOutcome<WriteResult<Op>>[]>;

export interface WriteExecutor {
  /**
   * Runs the requests in one transaction, in order, and returns one list of outcomes per request.
   * Throws only when the database failed and nothing was written.
   */
  run(requests: readonly WriteRequest[]): ItemOutcome<WriteResult<WriteOp>>[][];
}

/** The operations that change pets or orders, whose results the event log records. */
const LOGGED: Readonly<Record<LoggedOp, true>> = { insertPets: true, changePets: true, placeOrders: true, changeOrders: true, expireOrders: true };

type Operation<Op extends WriteOp> = (items: readonly WriteItem<Op>[], isolate: IsolateItem) => ItemOutcome<WriteResult<Op>>[];

/** The executor over `db`, a connection that may write, recording into `journal`. */
export function createWriteExecutor(db: DatabaseSync, journal: WriteJournal): WriteExecutor {
  const pets = createPetWrites(db);
  const orders = createOrderWrites(db);
  const limiter = limiterRows(db);
  const purge = purgeExpiredRecords(db);
  const batch = createBatchRunner(db);
  const appendEvents = createEventAppender(db);
  const purgeEvents = createEventPurge(db);
  const takeTouched = touchedPets(db);
  const webhooks = createWebhookWrites(db);
  const operations: { [Op in WriteOp]: Operation<Op> } = {
    insertPets: pets.insert,
    changePets: pets.change,
    placeOrders: orders.place,
    changeOrders: orders.change,
    expireOrders: orders.expire,
    saveLimiter: (items, isolate) => items.map((changes) => isolate(() => {
      limiter(changes);
      return changes.saved.length + changes.removed.length;
    })),
    purgeEvents: (items, isolate) => items.map(({ before, limit }) => isolate(() => purgeEvents(before, limit))),
    purgeRecords: (items, isolate) => items.map(({ now, limit }) => isolate(() => purge(now, limit))),
    createWebhooks: webhooks.create,
    changeWebhooks: webhooks.change,
    removeWebhooks: webhooks.remove,
    claimDeliveries: webhooks.claim,
    recordAttempts: webhooks.record,
    releaseDeliveries: webhooks.release,
  };
  return {
    run(requests) {
      let touched: Touch[] = [];
      const outcomes = batch((isolate) => {
        const done = requests.map(({ op, items }) => (operations[op] as Operation<WriteOp>)(items, isolate));
        // The events of what the items did, in request order, in their transaction: the one place
        // every write passes. Once a group: the appender reads the next id once, not per request.
        appendEvents(requests.flatMap(({ op, items }, index) => (op in LOGGED ? eventsOfBatch(op as LoggedOp, items, done[index] as ItemOutcome<unknown>[]) : [])));
        // What the database logged, inside the transaction (a run rolled back left none of its
        // rows); recorded once it has committed.
        touched = takeTouched();
        return done;
      });
      recordWrites(journal, touched);
      return outcomes;
    },
  };
}

/** Most items in one group, so that one transaction cannot hold its thread for long. */
const MAX_GROUP_ITEMS = 4000;

/**
 * The next group of the batches waiting in `queue`, oldest first: as many as fit in
 * MAX_GROUP_ITEMS items (always one, however large), and the batches left for the next.
 */
export function nextGroup<T>(queue: readonly T[], itemsOf: (batch: T) => number): { group: T[]; rest: T[] } {
  let items = 0;
  let taken = 0;
  while (taken < queue.length && (taken === 0 || items + itemsOf(queue[taken]!) <= MAX_GROUP_ITEMS)) items += itemsOf(queue[taken++]!);
  return { group: queue.slice(0, taken), rest: queue.slice(taken) };
}

const local = new WeakMap<DatabaseSync, SubmitWrites>();

/**
 * Writes made in place on `db`, each batch in a transaction of its own, at once, journaled in the
 * connection's journal: one executor per connection, shared by its stores.
 */
export function localWrites(db: DatabaseSync): SubmitWrites {
  let submit = local.get(db);
  if (submit === undefined) {
    const executor = createWriteExecutor(db, journalOf(db));
    submit = (op, items) => executor.run([{ op, items }])[0] as ItemOutcome<WriteResult<typeof op>>[];
    local.set(db, submit);
  }
  return submit;
}
