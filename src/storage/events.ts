/**
 * The event log as every storage engine keeps it: each change to a pet or an order is recorded
 * as an event in the same transaction as the change. The events of a write are derived here, in
 * one place, from what the write did (its item and its result): an engine appends what
 * `eventsOfBatch` returns for every batch it commits, so no write path can forget its events,
 * and a write that changed nothing (a refusal, a replay, an `unchanged` step) yields none.
 *
 * `data` is stored as the domain value in a form of the storage's own (int64 digits as text), and
 * read back as that value, so that the feed renders it with the very functions that render the
 * pet and the order elsewhere in the API.
 */
import { isItemFailure, type ItemOutcome } from '../lib/item-outcome.ts';
import type { MaybePromise } from '../lib/maybe-promise.ts';
import type { Actor } from './actor.ts';
import type { Order, OrderChange, OrderChangeOutcome, OrderPlacement, OrderStatus, PlacementResult } from './orders.ts';
import type { ChangeOutcome, CreationResult, Expiry, Pet, PetChange, PetCreation } from './pets.ts';
import { ORDER_FORM, PET_FORM } from './stored-forms.ts';
import { rowId } from './row-ids.ts';

export type { Actor, Expiry };

/** Every type of event, in the order the interface lists them. */
export const EVENT_TYPES = ['pet.created', 'pet.updated', 'pet.deleted', 'order.placed', 'order.approved', 'order.completed', 'order.cancelled'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** What an event is about, as a domain value. */
export type EventSubject =
  | { kind: 'pet'; pet: Pet }
  | { kind: 'pet_deleted'; id: number }
  | { kind: 'order'; order: Order };

/** An event as a write produces it, before the log gives it its id and its time. */
export interface NewEvent {
  type: EventType;
  actor: Actor | null;
  subject: EventSubject;
}

/** An event as the log holds it. */
export interface StoredEvent extends NewEvent {
  /** Its position in the log: ids are visible in commit order (docs/decisions/0025). */
  id: number;
  /** When its transaction committed, ms since the epoch. */
  occurredAt: number;
}

/** A write as the log sees it: one item of one operation, with its result. */
export type LoggedWrite =
  | { op: 'insertPets'; item: PetCreation; result: CreationResult }
  | { op: 'changePets'; item: PetChange; result: ChangeOutcome }
  | { op: 'placeOrders'; item: OrderPlacement; result: PlacementResult }
  | { op: 'changeOrders'; item: OrderChange; result: OrderChangeOutcome }
  /** The sweep: the orders it expired. */
  | { op: 'expireOrders'; item: unknown; result: readonly Expiry[] };
export type LoggedOp = LoggedWrite['op'];

const ORDER_EVENT: Readonly<Record<OrderStatus, EventType>> = {
  placed: 'order.placed', approved: 'order.approved', completed: 'order.completed', cancelled: 'order.cancelled',
};

const petEvent = (type: EventType, pet: Pet, actor: Actor | null): NewEvent => ({ type, actor, subject: { kind: 'pet', pet } });
const orderEvent = (order: Order, actor: Actor | null): NewEvent => ({ type: ORDER_EVENT[order.status], actor, subject: { kind: 'order', order } });

/** The events of expired holds: each order cancelled, then its pet freed, by nobody. */
function expiryEvents(expiries: readonly Expiry[] | undefined): NewEvent[] {
  if (expiries === undefined) return [];
  return expiries.flatMap(({ order, pet }) => (pet === null ? [orderEvent(order, null)] : [orderEvent(order, null), petEvent('pet.updated', pet, null)]));
}

/** The events of one write, in the order its transaction made the changes. */
export function eventsOf(write: LoggedWrite): NewEvent[] {
  switch (write.op) {
    case 'insertPets': {
      const { result } = write;
      return 'conflict' in result ? [] : [petEvent('pet.created', result, write.item.actor ?? null)];
    }
    case 'changePets': {
      const { item, result } = write;
      const actor = item.actor ?? null;
      const events = expiryEvents(result.expired);
      if (result.kind === 'updated' && result.changed) events.push(petEvent('pet.updated', result.pet, actor));
      if (result.kind === 'deleted') events.push({ type: 'pet.deleted', actor, subject: { kind: 'pet_deleted', id: Number(item.id) } });
      return events;
    }
    case 'placeOrders': {
      const { result } = write;
      if ('conflict' in result) return [];
      const events = expiryEvents(result.expired);
      const actor = write.item.actor ?? null;
      if (result.kind === 'placed') events.push(orderEvent(result.order, actor), petEvent('pet.updated', result.pet, actor));
      return events;
    }
    case 'changeOrders': {
      const { result } = write;
      const actor = write.item.actor ?? null;
      const events = expiryEvents(result.expired);
      if (result.kind === 'changed') {
        events.push(orderEvent(result.order, actor));
        if (result.pet !== null) events.push(petEvent('pet.updated', result.pet, actor));
      }
      return events;
    }
    case 'expireOrders':
      return expiryEvents(write.result);
  }
}

/** The events of a batch of one operation: its items' in order, none for an item that failed alone. */
export function eventsOfBatch(op: LoggedOp, items: readonly unknown[], outcomes: readonly ItemOutcome<unknown>[]): NewEvent[] {
  const events: NewEvent[] = [];
  outcomes.forEach((outcome, index) => {
    if (isItemFailure(outcome)) return;
    events.push(...eventsOf({ op, item: items[index], result: outcome } as LoggedWrite));
  });
  return events;
}

/** An event as both engines store it: `data` is JSON of the storage's own form. */
export interface EventRow {
  id: number | string;
  type: EventType;
  occurred_at: number | string;
  actor_account: string | null;
  actor_key_id: string | null;
  /** The order's account, for an order event: who may see it. Null for a pet event. */
  account: string | null;
  data: string;
}

/** The columns an engine writes for `event` (all but the id and the time). */
export function eventColumns({ type, actor, subject }: NewEvent): Omit<EventRow, 'id' | 'occurred_at'> {
  return {
    type,
    actor_account: actor?.account ?? null,
    actor_key_id: actor?.keyId ?? null,
    account: subject.kind === 'order' ? subject.order.account : null,
    data: subjectJson(subject),
  };
}

/** The subject as stored: the value in its stored form (stored-forms.ts), with its kind. */
function subjectJson(subject: EventSubject): string {
  switch (subject.kind) {
    case 'pet':
      return JSON.stringify({ kind: 'pet', ...PET_FORM.toStored(subject.pet) });
    case 'pet_deleted':
      return JSON.stringify({ kind: 'pet_deleted', id: subject.id });
    case 'order':
      return JSON.stringify({ kind: 'order', ...ORDER_FORM.toStored(subject.order) });
  }
}

/** The stored subject back as its domain value. */
function subjectOf(data: string): EventSubject {
  const stored = JSON.parse(data) as { kind: EventSubject['kind'] } & Record<string, unknown>;
  if (stored.kind === 'pet') return { kind: 'pet', pet: PET_FORM.fromStored(stored) };
  if (stored.kind === 'pet_deleted') return { kind: 'pet_deleted', id: stored.id as number };
  return { kind: 'order', order: ORDER_FORM.fromStored(stored) };
}

/** The domain value of a stored row. */
export function toEvent(row: EventRow): StoredEvent {
  return {
    id: rowId(row.id),
    type: row.type,
    occurredAt: Number(row.occurred_at),
    actor: row.actor_account === null || row.actor_key_id === null ? null : { account: row.actor_account, keyId: row.actor_key_id },
    subject: subjectOf(row.data),
  };
}

/** What a page of the feed asks for. */
export interface EventPageOptions {
  /** Only ids greater than this. */
  afterId: number;
  limit: number;
  /** Only these types. */
  types: readonly EventType[];
  /** Order events of this account only, besides every pet event; null: every event. */
  account: string | null;
}

/** The log of either engine. */
export interface EventLog {
  /** Up to `limit` events after `afterId` that the options select, by id ascending; only committed ones, in commit order. */
  page(options: EventPageOptions): MaybePromise<StoredEvent[]>;
  /** The highest id visible now (0: none yet), for the waiter of the long poll. */
  latestId(): MaybePromise<number>;
  /** The highest id deleted so far by the retention (0: none). */
  deletedThrough(): MaybePromise<number>;
  /** Deletes `limit` events older than `before` (ms), oldest first (on PostgreSQL whole blocks, so maybe a few more), or all there are if fewer; resolves with how many. */
  purge(before: number, limit: number): MaybePromise<number>;
}
