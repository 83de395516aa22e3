/**
 * Every kind of write the API makes, as a table: each row arranges what its write needs, makes
 * the write over HTTP, and says what the pet it touched must look like afterwards. The test that
 * runs every row against every cached answer the write can affect
 * (test/e2e/writes-seen-by-caches.test.ts) picks up a new row without a change: a new write kind
 * is covered by adding its row here.
 */
import assert from 'node:assert/strict';

export type PetStatus = 'available' | 'pending' | 'sold';

/** One answer, its body parsed. */
export interface Answer {
  status: number;
  body: unknown;
  link: string | null;
}

/** How a row talks to the server. */
export type Call = (method: string, path: string, body?: object) => Promise<Answer>;

/** A pet as the rows need it: its id, status and name. */
export interface PetSeen {
  id: number;
  status: PetStatus;
  name: string;
}

/** What a row's write touched, and what the reads must show once it is answered. */
export interface Touched {
  /** The pet the write touched (the new one, for a create). */
  petId: number;
  /** The pet as every read must show it now, or null if it is gone. */
  pet: Omit<PetSeen, 'id'> | null;
  /** An order the write touched, and the status a read of it must show. */
  order?: { id: number; status: string };
}

export interface WriteKind {
  name: string;
  /**
   * What the server must be started with for this row, where it differs from the default (a hold
   * short enough to end while the test watches); the rows with the same `env` share a server.
   */
  env?: Record<string, string>;
  /**
   * Creates what the write needs, before the caches are filled; returns the ids the reads must
   * look at beforehand too (a create's future id, read as 404 first).
   */
  arrange(call: Call): Promise<{ petIds: number[]; make(call: Call): Promise<Touched> }>;
}

/** Creates a pet; returns it. */
export async function createPet(call: Call, name: string, status: PetStatus): Promise<PetSeen> {
  const answer = await call('POST', '/v1/pets', { name, categoryId: 1, status });
  assert.equal(answer.status, 201, `create ${name}`);
  return answer.body as PetSeen;
}

async function placeOrder(call: Call, petId: number): Promise<number> {
  const answer = await call('POST', '/v1/store/orders', { petId });
  assert.equal(answer.status, 201, `order for pet ${petId}`);
  return (answer.body as { id: number }).id;
}

async function moveOrder(call: Call, orderId: number, status: string): Promise<void> {
  const answer = await call('PATCH', `/v1/store/orders/${orderId}`, { status });
  assert.equal(answer.status, 200, `order ${orderId} to ${status}`);
}

/** A pet placed on order (pending), and optionally moved on to `approved`. */
async function ordered(call: Call, name: string, approved: boolean): Promise<{ pet: PetSeen; orderId: number }> {
  const pet = await createPet(call, name, 'available');
  const orderId = await placeOrder(call, pet.id);
  if (approved) await moveOrder(call, orderId, 'approved');
  return { pet, orderId };
}

/** The hold of the sweep's row, in seconds: long enough to fill every cache before it ends. */
const SHORT_HOLD_SECONDS = 3;

/**
 * Waits for the `order.cancelled` event of `orderId` (a long poll of the event feed, woken by the
 * commit that writes it, so no sleep); returns when it committed (ms).
 */
async function cancellation(call: Call, orderId: number): Promise<number> {
  for (let path = '/v1/events?types=order.cancelled&limit=100&wait=30'; ;) {
    const answer = await call('GET', path);
    assert.equal(answer.status, 200, path);
    const found = (answer.body as { actor: unknown; occurredAt: string; data: { id: number } }[]).find((event) => event.data.id === orderId);
    if (found !== undefined) {
      assert.equal(found.actor, null, 'cancelled by the service, not by a request');
      return Date.parse(found.occurredAt);
    }
    path = /^<([^>]+)>; rel="next"$/.exec(answer.link!)![1]!;
  }
}

/** A row whose write changes one existing pet. */
function onPet(name: string, status: PetStatus, write: (call: Call, pet: PetSeen) => Promise<Touched['pet']>): WriteKind {
  return {
    name,
    async arrange(call) {
      const pet = await createPet(call, `before ${name}`, status);
      return { petIds: [pet.id], make: async (later) => ({ petId: pet.id, pet: await write(later, pet) }) };
    },
  };
}

async function patchPet(call: Call, pet: PetSeen, patch: Partial<Omit<PetSeen, 'id'>>): Promise<Touched['pet']> {
  const answer = await call('PATCH', `/v1/pets/${pet.id}`, patch);
  assert.equal(answer.status, 200, `patch pet ${pet.id}`);
  return { name: pet.name, status: pet.status, ...patch };
}

/** A row whose write moves an order on: its pet before, the step, and the pet's status after. */
function orderStep(name: string, approved: boolean, to: string, petAfter: PetStatus): WriteKind {
  return {
    name,
    async arrange(call) {
      const { pet, orderId } = await ordered(call, `before ${name}`, approved);
      return {
        petIds: [pet.id],
        make: async (later) => {
          await moveOrder(later, orderId, to);
          return { petId: pet.id, pet: { name: pet.name, status: petAfter }, order: { id: orderId, status: to } };
        },
      };
    },
  };
}

/** Every write kind of the API. */
export const WRITE_KINDS: readonly WriteKind[] = [
  ...(['available', 'pending', 'sold'] as const).map((status): WriteKind => ({
    name: `create a pet (${status})`,
    async arrange(call) {
      // Ids are never reused: the next pet gets the next id, read as 404 before it exists.
      const before = await createPet(call, `before create ${status}`, status);
      return {
        petIds: [before.id, before.id + 1],
        make: async (later) => {
          const pet = await createPet(later, `created ${status}`, status);
          assert.equal(pet.id, before.id + 1);
          return { petId: pet.id, pet: { name: pet.name, status } };
        },
      };
    },
  })),
  onPet('rename a pet', 'available', (call, pet) => patchPet(call, pet, { name: `${pet.name} renamed` })),
  onPet('change a status (available to sold)', 'available', (call, pet) => patchPet(call, pet, { status: 'sold' })),
  onPet('change a status (sold to pending)', 'sold', (call, pet) => patchPet(call, pet, { status: 'pending' })),
  onPet('delete a pet', 'pending', async (call, pet) => {
    assert.equal((await call('DELETE', `/v1/pets/${pet.id}`)).status, 204);
    return null;
  }),
  {
    name: 'place an order',
    async arrange(call) {
      const pet = await createPet(call, 'before order', 'available');
      return {
        petIds: [pet.id],
        make: async (later) => {
          const orderId = await placeOrder(later, pet.id);
          return { petId: pet.id, pet: { name: pet.name, status: 'pending' }, order: { id: orderId, status: 'placed' } };
        },
      };
    },
  },
  orderStep('approve an order', false, 'approved', 'pending'),
  orderStep('complete an order', true, 'completed', 'sold'),
  orderStep('cancel a placed order', false, 'cancelled', 'available'),
  orderStep('cancel an approved order', true, 'cancelled', 'available'),
  {
    // The service's own write: no request makes it. The sweep (service/chores.ts, every
    // EXPIRY_INTERVAL_MS) cancels the order once its hold has ended and frees its pet.
    name: 'the sweep cancels an order whose hold ended',
    env: { ORDER_HOLD_SECONDS: String(SHORT_HOLD_SECONDS) },
    async arrange(call) {
      const pet = await createPet(call, 'before expiry', 'available');
      const orderId = await placeOrder(call, pet.id);
      return {
        petIds: [pet.id],
        make: async (later) => {
          const watched = Date.now();
          const committed = await cancellation(later, orderId);
          assert.ok(committed >= watched, `the hold ended before every cache was filled: ${SHORT_HOLD_SECONDS} s is too short a hold for this machine`);
          return { petId: pet.id, pet: { name: pet.name, status: 'available' }, order: { id: orderId, status: 'cancelled' } };
        },
      };
    },
  },
];
