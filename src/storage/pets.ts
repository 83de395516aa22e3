/**
 * Pets as every storage engine stores them: the domain values in and out of a store, and the
 * store's interface. Methods may answer at once (SQLite) or later (PostgreSQL): callers await
 * only when they get a promise, so the synchronous engine pays nothing for the other.
 */
import type { MaybePromise } from '../lib/maybe-promise.ts';
import type { ItemOutcome } from '../lib/item-outcome.ts';
import type { Actor } from './actor.ts';
import type { IdempotencyConflict, IdempotencyRecord, IdempotencyWrite } from './idempotency.ts';
import type { Order } from './order-record.ts';
import { rowId } from './row-ids.ts';

/** Where a pet stands in the store. */
export const PET_STATUSES = ['available', 'pending', 'sold'] as const;
export type PetStatus = (typeof PET_STATUSES)[number];

/** A set of statuses as bits (bit i for PET_STATUSES[i]): what a write touched, what an answer shows. */
export function statusBit(status: PetStatus): number {
  return 1 << PET_STATUSES.indexOf(status);
}
/** Every status: an answer about pets of any status, a write whose statuses are not known. */
export const ANY_STATUS = (1 << PET_STATUSES.length) - 1;

export interface NewPet {
  name: string;
  categoryId: bigint;
  status: PetStatus;
}

export interface Pet extends NewPet {
  id: number;
  /** 1 when created; every change adds 1, in the statement that makes the change. */
  version: number;
}

/** The fields a change sets; an absent field keeps its value (RFC 7396 merge patch, no nulls). */
export interface PetPatch {
  name?: string;
  categoryId?: bigint;
  status?: PetStatus;
}

/**
 * A change of one pet. With `expectedVersion`, it applies only while the pet still has that
 * version: the check and the change are one statement, so of two changes expecting the same
 * version exactly one applies. With null it applies to whatever version the pet has.
 */
export type PetChange = (
  | { kind: 'update'; id: bigint; patch: PetPatch; expectedVersion: number | null }
  | { kind: 'delete'; id: bigint; expectedVersion: number | null }
) & {
  /** When the change was asked: an order holding the pet whose hold ended by then is expired first. */
  now: number;
  /** The key whose request makes the change, for the event log; absent: the service's own. */
  actor?: Actor;
};

/** An order cancelled by the service because its hold ended, with the pet it freed (null: none was pending). */
export interface Expiry {
  order: Order;
  pet: Pet | null;
}

/**
 * What a change did; `expired`: the order whose ended hold the change's transaction expired
 * first, freeing the pet (the same field as an order's write, storage/orders.ts's Expiries).
 * `changed`: whether an update set a value the pet did not have (one that sets the values it has
 * still bumps the version, but is no change for the event log).
 */
export type ChangeOutcome = (
  | { kind: 'updated'; pet: Pet; changed: boolean }
  | { kind: 'deleted' }
  | { kind: 'not_found' }
  /** The pet exists with another version than the one expected; nothing was changed. */
  | { kind: 'version_mismatch' }
  /** The change moves or removes a pet that an open order holds; nothing was changed. */
  | { kind: 'has_open_order' }
) & { expired?: readonly Expiry[] };

/** A pet to insert, with the idempotency record to write alongside it when it has one. */
export interface PetCreation extends NewPet {
  idempotency?: IdempotencyWrite;
  /** The key whose request creates it, for the event log; absent: the service's own (seeding). */
  actor?: Actor;
}

export interface ListOptions {
  /** Only ids greater than this (keyset pagination); 0 for the first page. */
  afterId: bigint;
  status: PetStatus | undefined;
  limit: number;
}

/** What `insertMany` did with one creation. */
export type CreationResult = Pet | IdempotencyConflict<Pet>;

export interface PetsStore {
  /**
   * Inserts the pets, and the idempotency record of each creation that has one, in one
   * transaction, and returns one outcome per creation, in order: the pet with its id; the
   * conflict, for a creation whose Idempotency-Key was taken meanwhile (by another writer, or by
   * an earlier creation of the same batch, which it then replays); or an ItemFailure, for a
   * creation whose own statement failed and was rolled back alone. Returns only once the
   * transaction is committed and durable; throws only when the database failed and nothing of
   * the batch was written.
   */
  insertMany(pets: readonly PetCreation[]): MaybePromise<ItemOutcome<CreationResult>[]>;
  /** The live (younger than 24 h at `now`) record of an API key's Idempotency-Key, or null. */
  findIdempotencyRecord(apiKeyId: string, key: string, now: number): MaybePromise<IdempotencyRecord<Pet> | null>;
  /** Deletes up to `limit` records that have expired at `now`, oldest first; returns how many. */
  purgeIdempotencyRecords(now: number, limit: number): MaybePromise<number>;
  get(id: bigint): MaybePromise<Pet | null>;
  /** Up to `limit` pets after `afterId`, by id ascending. */
  list(options: ListOptions): MaybePromise<Pet[]>;
  /**
   * Applies the changes in one transaction (durable when it returns, like insertMany) and
   * returns one outcome per change, in order, or an ItemFailure for a change whose own statement
   * failed and was rolled back alone. Every update bumps the version, even one that sets the
   * values the pet already has: that is what makes "exactly one of two" hold.
   */
  changeMany(changes: readonly PetChange[]): MaybePromise<ItemOutcome<ChangeOutcome>[]>;
  /**
   * Where the pets stand now, for caches of answers about them (see PetsRevision); null when
   * the engine cannot tell cheaply (PostgreSQL, written by other instances): nothing is cached.
   */
  revision(): PetsRevision | null;
  /**
   * Whether a write after revision `since` (a `writes` count) inserted, changed or deleted a pet
   * whose id is in (after, through] and whose status, before or after, is among `statuses` (bits
   * of statusBit; default any). Also true when the journal no longer reaches back to `since`: a
   * cache must then assume the worst. Asked only of an engine whose revision() is not null.
   */
  writtenSince(since: number, after: bigint | number, through: number, statuses?: number): boolean;
}

/**
 * What a cache of answers about pets compares. `external` changes when a connection that does
 * not journal its writes commits (the keys command, another process), after which nothing
 * cached can be trusted. `writes` counts the journaled writes: those of the server's writer (the
 * writer thread, or this very connection when it makes its own writes); which pets each touched
 * is kept in a journal that `writtenSince` reads, so a cached answer survives the writes that
 * cannot change it, whichever thread or worker made them.
 */
export interface PetsRevision {
  external: number;
  writes: number;
}

/** A row as both engines select it: category_id as text, so int64 digits stay exact. */
export interface PetRow {
  id: number | string;
  name: string;
  category_id: string;
  status: PetStatus;
  version: number;
}

/** The domain value of a row; no JS number ever holds a categoryId. */
export function toPet(row: PetRow): Pet {
  return { id: rowId(row.id), name: row.name, categoryId: BigInt(row.category_id), status: row.status, version: row.version };
}

/** Whether a creation result is a conflict rather than a stored pet. */
export function isConflict(result: CreationResult): result is IdempotencyConflict<Pet> {
  return 'conflict' in result;
}
