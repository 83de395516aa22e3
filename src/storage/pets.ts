/**
 * Pets as every storage engine stores them: the domain values in and out of a store, and the
 * store's interface. Methods may answer at once (SQLite) or later (PostgreSQL): callers await
 * only when they get a promise, so the synchronous engine pays nothing for the other.
 */
import type { PetStatus } from '../api/schemas.ts';
import type { MaybePromise } from './maybe-promise.ts';

export interface NewPet {
  name: string;
  categoryId: bigint;
  status: PetStatus;
}

export interface Pet extends NewPet {
  id: number;
}

/** A response as it is remembered under an Idempotency-Key and replayed. */
export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** What a creation remembers under its Idempotency-Key, written in the pet's transaction. */
export interface IdempotencyWrite {
  apiKeyId: string;
  key: string;
  fingerprint: string;
  /** The record expires IDEMPOTENCY_TTL_MS after this instant (ms). */
  createdAt: number;
  /** The response to remember, built once the pet has its id. */
  respond(pet: Pet): StoredResponse;
}

/** A pet to insert, with the idempotency record to write alongside it when it has one. */
export interface PetCreation extends NewPet {
  idempotency?: IdempotencyWrite;
}

/** A remembered response and the fingerprint of the request body that produced it. */
export interface IdempotencyRecord {
  fingerprint: string;
  createdAt: number;
  response: StoredResponse;
}

export interface ListOptions {
  /** Only ids greater than this (keyset pagination); 0 for the first page. */
  afterId: bigint;
  status: PetStatus | undefined;
  limit: number;
}

/**
 * A creation that the store did not make because its Idempotency-Key was taken meanwhile: by a
 * request still being processed (on another instance), or by one that has finished (`record`).
 * Only an engine shared by several processes meets these; SQLite's single writer never does.
 */
export type IdempotencyConflict =
  | { conflict: 'in_flight' }
  | { conflict: 'recorded'; record: IdempotencyRecord };

/** What `insertMany` did with one creation. */
export type CreationResult = Pet | IdempotencyConflict;

export interface PetsStore {
  /**
   * Inserts the pets, and the idempotency record of each creation that has one, in one
   * transaction (all or none), and returns the pets with their ids (or, for a creation whose
   * Idempotency-Key was taken meanwhile, the conflict). Returns only once the transaction is
   * committed and durable.
   */
  insertMany(pets: readonly PetCreation[]): MaybePromise<CreationResult[]>;
  /** The live (younger than 24 h at `now`) record of an API key's Idempotency-Key, or null. */
  findIdempotencyRecord(apiKeyId: string, key: string, now: number): MaybePromise<IdempotencyRecord | null>;
  /** Deletes up to `limit` records that have expired at `now`, oldest first; returns how many. */
  purgeIdempotencyRecords(now: number, limit: number): MaybePromise<number>;
  get(id: bigint): MaybePromise<Pet | null>;
  /** Up to `limit` pets after `afterId`, by id ascending. */
  list(options: ListOptions): MaybePromise<Pet[]>;
  /**
   * What may have changed since an earlier revision, for caches of pets (see PetsRevision); null
   * when the engine cannot tell cheaply (PostgreSQL, written by other instances): no caching.
   */
  revision(): PetsRevision | null;
}

/**
 * Through this store a pet is only ever inserted, with an id above every existing one, and never
 * changed or deleted. So a cache of pets needs to know two things: whether this store inserted
 * pets since (`inserts`), and whether another connection committed anything (`external`, from
 * PRAGMA data_version), after which nothing can be assumed.
 */
export interface PetsRevision {
  inserts: number;
  external: number;
}

/** A row as both engines select it: category_id as text, so int64 digits stay exact. */
export interface PetRow {
  id: number | string;
  name: string;
  category_id: string;
  status: PetStatus;
}

/** The domain value of a row; no JS number ever holds a categoryId. */
export function toPet(row: PetRow): Pet {
  return { id: Number(row.id), name: row.name, categoryId: BigInt(row.category_id), status: row.status };
}

/** Whether a creation result is a conflict rather than a stored pet. */
export function isConflict(result: CreationResult): result is IdempotencyConflict {
  return 'conflict' in result;
}
