/**
 * The handlers of the pet operations, by the operationId of their entry in ../operations.ts.
 * Each receives the request after identification, limiting, authentication and routing,
 * validates its input with the validators bound to its entry, in the contract's order, and
 * returns a Reply.
 */
import { BASE_PATH, sunsetDay } from '../operation.ts';
import { apiError } from '../errors.ts';
import type { ContextOf, Handlers } from '../operations.ts';
import type { Clock } from '../../clock.ts';
import { cutPage, decodeCursor } from '../cursor.ts';
import { fingerprintBody, parseIdempotencyKey, type IdempotentRequest } from '../idempotency.ts';
import { ifMatchHolds, parseIfMatch } from '../../http/if-match.ts';
import { ANY_STATUS, statusBit, type ChangeOutcome, type NewPet, type Pet, type PetsStore } from '../../storage/pets.ts';
import { actorOf } from '../../keys/caller.ts';
import type { ChangePet } from './changes.ts';
import type { Reply } from '../../http/reply.ts';
import { petETag, petReply, petsJson } from './json.ts';
import { createReplyCache } from './reply-cache.ts';
import { andThen, type MaybePromise } from '../../lib/maybe-promise.ts';

export interface PetsHandlersDeps {
  pets: PetsStore;
  clock: Clock;
  /**
   * Stores a validated pet durably (honouring its Idempotency-Key) and returns the answer:
   * the service's create path (creations.ts).
   */
  createPet: (pet: NewPet, caller: { account: string; keyId: string }, idempotency: IdempotentRequest | null) => Promise<Reply>;
  /** Applies a change or deletion durably: the service's change path (changes.ts). */
  changePet: ChangePet;
}

/**
 * Bounds on the answer caches (a list page is at most ~11 KiB, one pet well under 1 KiB): small,
 * so that they are full within a minute of steady traffic and memory stays flat after that.
 */
const LIST_CACHE_ENTRIES = 256;
const PET_CACHE_ENTRIES = 1_024;

const petNotFound = (petId: bigint | number) => apiError('pet_not_found', petId);
const preconditionFailed = () => apiError('precondition_failed', 'pet');

/**
 * Evaluates If-Match against the pet as it is now (RFC 9110, section 13.1.1). Returns the version
 * that the change must still find when it is applied, or null for an unconditional change (no
 * header, or `*`: the pet exists, which the change checks again anyway).
 */
function precondition(header: string | undefined, pet: Pet): number | null {
  const condition = parseIfMatch(header);
  if (condition === null || condition.any) return null;
  if (!ifMatchHolds(condition, petETag(pet))) throw preconditionFailed();
  return pet.version;
}

/** The answer to a change once it was applied, or the error saying why it was not. */
function changed(outcome: ChangeOutcome, petId: bigint): Reply {
  switch (outcome.kind) {
    case 'updated':
      return petReply(outcome.pet);
    case 'deleted':
      return { status: 204, body: '' };
    case 'not_found':
      throw petNotFound(petId);
    case 'version_mismatch':
      throw preconditionFailed();
    case 'has_open_order':
      throw apiError('pet_has_open_order', petId);
  }
}

/**
 * Builds the handlers over a pets store, a clock, and the create and change paths. One closure,
 * longer than a screen, because the answer caches are shared by the handlers; each is short.
 */
export function createPetsHandlers({ pets, clock, createPet: store, changePet }: PetsHandlersDeps): Pick<Handlers, 'listPets' | 'createPet' | 'getPet' | 'updatePet' | 'deletePet'> {
  // Keyed by the raw query string or path parameter: a hit skips parsing and validation too,
  // since only valid requests ever produce an entry.
  const listCache = createReplyCache(LIST_CACHE_ENTRIES, pets);
  const petCache = createReplyCache(PET_CACHE_ENTRIES, pets);

  /**
   * The checks of a change before its body, in the contract's order: the path (400), the pet's
   * existence (404), then If-Match (400 if malformed, 412 if it does not match).
   */
  function changeTarget(context: ContextOf<'updatePet' | 'deletePet'>): MaybePromise<{ petId: bigint; expectedVersion: number | null }> {
    const { petId } = context.path();
    return andThen(pets.get(petId), (pet) => {
      if (!pet) throw petNotFound(petId);
      return { petId, expectedVersion: precondition(context.req.headers['if-match'], pet) };
    });
  }

  return {
    listPets(context) {
      // null on PostgreSQL, where other instances write too: nothing is cached there.
      const revision = pets.revision();
      if (revision !== null) {
        const cached = listCache.get(context.search, revision);
        if (cached) return cached;
      }
      const { limit, status, cursor } = context.query();
      const afterId = cursor === undefined ? 0n : decodeCursor(cursor);
      // One row more than asked tells whether a next page exists without a COUNT.
      return andThen(pets.list({ afterId, status, limit: limit + 1 }), (page) => {
        // The answer depends on the pets up to that extra row, or on every later one without it.
        const through = page.length > limit ? page[limit]!.id : Infinity;
        const headers = cutPage(context.operation, page, { limit, status });
        const reply: Reply = { status: 200, body: petsJson(page), headers };
        const statuses = status === undefined ? ANY_STATUS : statusBit(status);
        if (revision !== null) listCache.set(context.search, reply, { after: afterId, through, statuses }, revision);
        return reply;
      });
    },

    async createPet(context) {
      // The Idempotency-Key header is the first check of step 5, before the body is looked at.
      const key = parseIdempotencyKey(context.req.headers['idempotency-key']);
      const { value: pet, sent } = await context.body();
      // Fingerprinted as sent, before defaults: an omitted status differs from "available".
      return store(pet, { account: context.caller.account, keyId: context.caller.id }, key === null ? null : { key, fingerprint: fingerprintBody(sent) });
    },

    getPet(context) {
      const { operation } = context;
      if (clock() >= operation.deprecated.sunsetMs) {
        const { successor } = operation.deprecated;
        throw apiError('gone', `${operation.method} ${BASE_PATH}${operation.path}`, sunsetDay(operation.deprecated), `${successor.method} ${BASE_PATH}${successor.path}`);
      }
      const revision = pets.revision();
      const raw = context.params.petId!;
      if (revision !== null) {
        const cached = petCache.get(raw, revision);
        if (cached) return cached;
      }
      const { petId } = context.path();
      return andThen(pets.get(petId), (pet) => {
        if (!pet) throw petNotFound(petId);
        const reply = petReply(pet);
        if (revision !== null) petCache.set(raw, reply, { after: pet.id - 1, through: pet.id }, revision);
        return reply;
      });
    },

    async updatePet(context) {
      const { petId, expectedVersion } = await changeTarget(context);
      const { value: patch } = await context.body();
      if (Object.keys(patch).length > 0) return changed(await changePet({ kind: 'update', id: petId, patch, expectedVersion, now: clock(), actor: actorOf(context.caller) }), petId);
      // `{}` changes nothing: the pet as it is now, held to the same conditions as a change.
      const pet = await pets.get(petId);
      if (!pet) throw petNotFound(petId);
      if (expectedVersion !== null && pet.version !== expectedVersion) throw preconditionFailed();
      return petReply(pet);
    },

    async deletePet(context) {
      const { petId, expectedVersion } = await changeTarget(context);
      return changed(await changePet({ kind: 'delete', id: petId, expectedVersion, now: clock(), actor: actorOf(context.caller) }), petId);
    },
  };
}
