/**
 * Creating pets so that a create is never lost and never duplicated: validated pets go through
 * group commit (one durable transaction per batch), and a create with an Idempotency-Key takes the
 * way of every idempotent write (../idempotent-writes.ts). Its only stored outcome is the 201.
 * Each create is its own unit of success or failure in its batch: another create's conflict or
 * failure never changes this one's answer.
 */
import type { Actor } from '../../storage/actor.ts';
import { reportingEvents, type EventsObserver } from '../events/observer.ts';
import type { Clock } from '../../clock.ts';
import { createGroupCommit } from '../../lib/group-commit.ts';
import type { IdempotentRequest } from '../idempotency.ts';
import type { CreationResult, NewPet, Pet, PetCreation, PetsStore } from '../../storage/pets.ts';
import { createIdempotentWrites } from '../idempotent-writes.ts';
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
  /** Batches out at once (GroupCommitOptions.maxInFlight); default the path's own. */
  maxInFlight?: number;
  /** Told of every pet stored and every replay, and of the events written; default: nobody. */
  observer?: CreationsObserver & Partial<EventsObserver>;
}

export interface PetCreations {
  /** Stores a validated pet durably (or replays its first creation) and returns the answer. */
  create(pet: NewPet, caller: Actor, idempotency: IdempotentRequest | null): Promise<Reply>;
}

/** Builds the create path over a pets store. */
export function createPetCreations({ pets, clock, groupCommit = true, schedule, maxInFlight = 2, observer = NO_OBSERVER }: PetCreationsOptions): PetCreations {
  const writer = createGroupCommit<PetCreation, CreationResult>({
    commit: reportingEvents('insertPets', (creations: readonly PetCreation[]) => pets.insertMany(creations), observer),
    enabled: groupCommit,
    // PostgreSQL: one batch being committed while the next gathers.
    maxInFlight,
    ...(schedule ? { schedule } : {}),
  });
  const write = createIdempotentWrites({ clock, replayed: () => observer.idempotentReplayed() });

  function createIdempotent(pet: PetCreation, apiKeyId: string, { key, fingerprint }: IdempotentRequest): Promise<Reply> {
    // API key ids contain no space and Idempotency-Keys are visible ASCII, so this is unambiguous.
    return write(`${apiKeyId} ${key}`, fingerprint, {
      lookup: (now) => pets.findIdempotencyRecord(apiKeyId, key, now),
      submit: (now) => writer.submit({ ...pet, idempotency: { apiKeyId, key, fingerprint, createdAt: now } }),
      answer: (stored: Pet) => {
        observer.petCreated();
        return created(stored);
      },
      again: created,
    });
  }

  return {
    async create(pet, caller, idempotency) {
      // The key that made the pet, for the event log.
      const creation: PetCreation = { ...pet, actor: { account: caller.account, keyId: caller.keyId } };
      if (idempotency === null) {
        const stored = (await writer.submit(creation)) as Pet;
        observer.petCreated();
        return created(stored);
      }
      return createIdempotent(creation, caller.keyId, idempotency);
    },
  };
}
