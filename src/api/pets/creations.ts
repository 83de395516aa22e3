/**
 * Creating pets so that a create is never lost and never duplicated: validated pets go through
 * group commit (one durable transaction per batch), and a create with an Idempotency-Key is
 * answered from its record when it was already made, refused while it is being made, and
 * remembered in the same transaction as its pet when it succeeds.
 *
 * Only the operation's own outcome is remembered, and its only stored outcome is the 201: a
 * request refused before the operation ran (401, 429, 400, 413, 415) never gets here, and a
 * failed write (a 500 for this create alone, or a 503 for its whole batch) rolls back the record
 * with the pet, so a retry can still succeed. Each create is its own unit of success or failure
 * in its batch: another create's conflict or failure never changes this one's answer.
 */
import { ApiError } from '../../http/api-error.ts';
import type { Clock } from '../../clock.ts';
import { createGroupCommit } from '../../lib/group-commit.ts';
import type { IdempotentRequest } from '../idempotency.ts';
import type { CreationResult, NewPet, Pet, PetCreation, PetsStore } from '../../storage/pets.ts';
import type { IdempotencyRecord, StoredResponse } from '../../storage/idempotency.ts';
import { isConflict } from '../../storage/pets.ts';
import type { Reply } from '../../http/reply.ts';
import { created } from './json.ts';

/** What the create path reports, for the metrics (src/ops/metrics.ts). */
export interface CreationsObserver {
  /** A pet was stored durably. */
  petCreated(): void;
  /** A create was answered from its Idempotency-Key record. */
  idempotentReplayed(): void;
}

const NO_OBSERVER: CreationsObserver = { petCreated() {}, idempotentReplayed() {} };

export interface PetCreationsOptions {
  pets: PetsStore;
  clock: Clock;
  /** On by default; off commits each create alone (kept only to measure the difference). */
  groupCommit?: boolean;
  /** See GroupCommitOptions.schedule. */
  schedule?: (flush: () => void) => void;
  /** Told of every pet stored and every replay; default: nobody. */
  observer?: CreationsObserver;
}

export interface PetCreations {
  /** Stores a validated pet durably (or replays its first creation) and returns the answer. */
  create(pet: NewPet, caller: { keyId: string }, idempotency: IdempotentRequest | null): Promise<Reply>;
}

/** Builds the create path over a pets store. */
export function createPetCreations({ pets, clock, groupCommit = true, schedule, observer = NO_OBSERVER }: PetCreationsOptions): PetCreations {
  const writer = createGroupCommit<PetCreation, CreationResult>({
    commit: (creations) => pets.insertMany(creations),
    enabled: groupCommit,
    // PostgreSQL: one batch being committed while the next gathers (SQLite commits at once).
    maxInFlight: 2,
    ...(schedule ? { schedule } : {}),
  });
  // Keys whose request is between its lookup and its commit, in this process (or worker thread).
  // With one writer on the database that is all there is; with several (PostgreSQL instances,
  // SQLite WORKERS) the store also checks the key in the batch's transaction and reports a
  // conflict, answered below as a replay, a 422 or a 409.
  const inFlight = new Set<string>();

  async function createIdempotent(pet: NewPet, apiKeyId: string, { key, fingerprint }: IdempotentRequest): Promise<Reply> {
    // API key ids contain no space and Idempotency-Keys are visible ASCII, so this is unambiguous.
    const slot = `${apiKeyId} ${key}`;
    // The check and the claim are one synchronous step, before anything is awaited: a second
    // request with the key, on this process, is refused here for as long as the first is
    // anywhere between its lookup and its answer, and never reaches a batch beside it.
    if (inFlight.has(slot)) throw inFlightError();
    inFlight.add(slot);
    try {
      const now = clock();
      const found = pets.findIdempotencyRecord(apiKeyId, key, now);
      // Await only a real promise (PostgreSQL): SQLite answers at once, for nothing.
      const record = found instanceof Promise ? await found : found;
      if (record) return replayOrRefuse(record, fingerprint, observer);
      const result = await writer.submit({ ...pet, idempotency: { apiKeyId, key, fingerprint, createdAt: now, respond: storedCreated } });
      if (!isConflict(result)) {
        observer.petCreated();
        return created(result);
      }
      // Another instance took the key between our lookup and our commit (or, should two creates
      // with one key ever share a batch, the first of them did: this one replays it).
      if (result.conflict === 'in_flight') throw inFlightError();
      return replayOrRefuse(result.record, fingerprint, observer);
    } finally {
      inFlight.delete(slot);
    }
  }

  return {
    async create(pet, caller, idempotency) {
      if (idempotency === null) {
        const stored = (await writer.submit(pet)) as Pet;
        observer.petCreated();
        return created(stored);
      }
      return createIdempotent(pet, caller.keyId, idempotency);
    },
  };
}

function inFlightError(): ApiError {
  return new ApiError('idempotency_key_in_flight', 'A request with this Idempotency-Key is still being processed; retry later.', { 'Retry-After': '1' });
}

/** The first response again for the same body; 422 for another body under the same key. */
function replayOrRefuse(record: IdempotencyRecord, fingerprint: string, observer: CreationsObserver): Reply {
  if (record.fingerprint !== fingerprint) {
    throw new ApiError('idempotency_key_reused', 'This Idempotency-Key was already used with a different body; use a new key for a new request.');
  }
  observer.idempotentReplayed();
  return replay(record.response);
}

function storedCreated(pet: Pet): StoredResponse {
  const reply = created(pet);
  return { status: reply.status, headers: { ...reply.headers }, body: reply.body };
}

function replay(response: StoredResponse): Reply {
  return { status: response.status, body: response.body, headers: { ...response.headers, 'Idempotent-Replayed': 'true' } };
}
