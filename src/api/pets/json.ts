/**
 * Pets serialised by hand: the contract fixes the field order, and `categoryId` is a bigint whose
 * digits must go out exactly. Also the pet's entity tag, which goes out with it.
 */
import type { Pet } from '../../storage/pets.ts';
import type { Reply } from '../../http/reply.ts';
import { locationOf } from '../operation.ts';
import { OPERATIONS } from '../operations.ts';

/** `{"id":..,"name":..,"categoryId":..,"status":..}` in the contract's field order. */
export function petJson(pet: Pet): string {
  return `{"id":${pet.id},"name":${JSON.stringify(pet.name)},"categoryId":${pet.categoryId},"status":"${pet.status}"}`;
}

/**
 * The pet's ETag: a strong validator (RFC 9110, section 8.8.3), opaque to clients. It is made of
 * the id, which is never reused, and the version, which every change bumps, so two different
 * states of any pets never share a tag, even across a deletion and a new pet. Migration 4 in
 * src/storage/sqlite/migrations.ts writes this format into remembered responses: keep them in step.
 */
export function petETag(pet: Pick<Pet, 'id' | 'version'>): string {
  return `"${pet.id}.${pet.version}"`;
}

/** A 200 answer with the pet and its ETag. */
export function petReply(pet: Pet): Reply {
  return { status: 200, body: petJson(pet), headers: { ETag: petETag(pet) } };
}

/** The 201 answer for a stored pet. */
export function created(pet: Pet): Reply {
  return { status: 201, body: petJson(pet), headers: { Location: locationOf(OPERATIONS.createPet, pet.id), ETag: petETag(pet) } };
}

/** A JSON array of pets. */
export function petsJson(pets: readonly Pet[]): string {
  if (pets.length === 0) return '[]';
  let json = '[' + petJson(pets[0]!);
  for (let i = 1; i < pets.length; i++) json += ',' + petJson(pets[i]!);
  return json + ']';
}
