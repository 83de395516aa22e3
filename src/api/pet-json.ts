/**
 * Pets serialised by hand: the contract fixes the field order, and `categoryId` is a bigint whose
 * digits must go out exactly.
 */
import type { Pet } from '../storage/pets.ts';
import type { Reply } from '../http/reply.ts';

/** `{"id":..,"name":..,"categoryId":..,"status":..}` in the contract's field order. */
export function petJson(pet: Pet): string {
  return `{"id":${pet.id},"name":${JSON.stringify(pet.name)},"categoryId":${pet.categoryId},"status":"${pet.status}"}`;
}

/** The 201 answer for a stored pet. */
export function created(pet: Pet): Reply {
  return { status: 201, body: petJson(pet), headers: { Location: `/v1/pets/${pet.id}` } };
}

/** A JSON array of pets. */
export function petsJson(pets: readonly Pet[]): string {
  if (pets.length === 0) return '[]';
  let json = '[' + petJson(pets[0]!);
  for (let i = 1; i < pets.length; i++) json += ',' + petJson(pets[i]!);
  return json + ']';
}
