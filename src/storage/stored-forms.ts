/**
 * Domain values in the storage's own stored form: JSON whose int64 digits are strings, so that
 * they round-trip exactly, read back as the same value. The event log keeps its events' subjects
 * in it (events.ts), and an Idempotency-Key record what its creation made (idempotency.ts), so
 * that the API answers from either with the very functions that render the value elsewhere.
 */
import type { Order } from './order-record.ts';
import type { Pet, PetStatus } from './pets.ts';

/** A value of `T` written to, and read from, its stored form. */
export interface StoredForm<T> {
  /** The JSON-safe object (int64 digits as strings). */
  toStored(value: T): Record<string, unknown>;
  fromStored(stored: Record<string, unknown>): T;
}

export const PET_FORM: StoredForm<Pet> = {
  toStored: (pet) => ({ id: pet.id, name: pet.name, categoryId: pet.categoryId.toString(), status: pet.status, version: pet.version }),
  fromStored: (stored) => ({
    id: stored.id as number, name: stored.name as string, categoryId: BigInt(stored.categoryId as string), status: stored.status as PetStatus, version: stored.version as number,
  }),
};

export const ORDER_FORM: StoredForm<Order> = {
  toStored: (order) => ({ ...order, petId: order.petId.toString() }),
  fromStored: (stored) => {
    const { kind: _kind, ...order } = stored as unknown as Order & { kind?: string; petId: string };
    return { ...order, petId: BigInt(order.petId) };
  },
};

/** `value` as JSON text of its stored form. */
export function storedJson<T>(form: StoredForm<T>, value: T): string {
  return JSON.stringify(form.toStored(value));
}

/** The value again from the JSON text of its stored form. */
export function parseStored<T>(form: StoredForm<T>): (json: string) => T {
  return (json) => form.fromStored(JSON.parse(json) as Record<string, unknown>);
}
