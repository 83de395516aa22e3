/**
 * A small client of the pets API, written as a user would: openapi-fetch over the types that
 * openapi-typescript generates from the served document. generated-client.test.ts writes those
 * types to test/.generated/pets-api.ts, type-checks this file against them, then runs it
 * against a live server. It is outside the project's tsconfig because the types it imports only
 * exist once generated.
 *
 * The type assertions at the end fail to compile if the document makes the generator mistype
 * anything (int64, optional fields, parameters, headers).
 */
import createClient from 'openapi-fetch';
import type { components, operations, paths } from '../.generated/pets-api.ts';

export type Pet = components['schemas']['Pet'];
export type NewPet = components['schemas']['NewPet'];
export type PetPatch = components['schemas']['PetPatch'];
export type PetStatus = components['schemas']['PetStatus'];
export type ApiErrorBody = components['schemas']['Error'];
export type ListQuery = NonNullable<operations['listPets']['parameters']['query']>;
export type Order = components['schemas']['Order'];
export type OrderStatus = components['schemas']['OrderStatus'];
export type OrderQuery = NonNullable<operations['listOrders']['parameters']['query']>;
export type Inventory = components['schemas']['Inventory'];

type ListHeaders = operations['listPets']['responses'][200]['headers'];
type CreatedHeaders = operations['createPet']['responses'][201]['headers'];
type GetPetHeaders = operations['getPet']['responses'][200]['headers'];
type UpdatedHeaders = operations['updatePet']['responses'][200]['headers'];
type PlacedHeaders = operations['placeOrder']['responses'][201]['headers'];

/** Every status, checked against the generated type in both directions below. */
const PET_STATUSES = ['available', 'pending', 'sold'] as const satisfies readonly PetStatus[];

function isPetStatus(value: string): value is PetStatus {
  return (PET_STATUSES as readonly string[]).includes(value);
}

/** The query of a `Link: <...>; rel="next"` header, or null on the last page. */
export function nextPage(link: ListHeaders['Link']): ListQuery | null {
  const target = link === undefined ? null : /<([^>]*)>\s*;\s*rel="next"/.exec(link)?.[1];
  if (!target) return null;
  const search = new URL(target, 'http://link.invalid').searchParams;
  const query: ListQuery = {};
  const limit = search.get('limit');
  const status = search.get('status');
  const cursor = search.get('cursor');
  if (limit !== null) query.limit = Number(limit);
  if (status !== null && isPetStatus(status)) query.status = status;
  if (cursor !== null) query.cursor = cursor;
  return query;
}

export interface Failure {
  status: number;
  error: ApiErrorBody;
}

/** A failed call: the typed Error body and the HTTP status. */
export class PetsApiError extends Error {
  readonly status: number;
  readonly body: ApiErrorBody;

  constructor(failure: Failure) {
    super(`${failure.status} ${failure.error.code}: ${failure.error.message}`);
    this.name = 'PetsApiError';
    this.status = failure.status;
    this.body = failure.error;
  }
}

/** `fetch` is for tests that watch the traffic; it defaults to the global one. */
export function createPetsClient(baseUrl: string, apiKey: string, fetch?: (request: Request) => Promise<Response>) {
  const client = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${apiKey}` }, ...(fetch ? { fetch } : {}) });

  return {
    /** One page of pets and the query of the next page (from the Link header), if any. */
    async listPets(query: ListQuery = {}): Promise<{ pets: Pet[]; next: ListQuery | null; remaining: number }> {
      const { data, error, response } = await client.GET('/pets', { params: { query } });
      if (error) throw new PetsApiError({ status: response.status, error });
      const remaining: ListHeaders['X-RateLimit-Remaining'] = Number(response.headers.get('x-ratelimit-remaining'));
      return { pets: data, next: nextPage(response.headers.get('link') ?? undefined), remaining };
    },

    /** Every pet matching `query`, following the `next` links. */
    async listAllPets(query: ListQuery = {}): Promise<Pet[]> {
      const pets: Pet[] = [];
      for (let page: ListQuery | null = query; page !== null; ) {
        const result = await this.listPets(page);
        pets.push(...result.pets);
        page = result.next;
      }
      return pets;
    },

    async createPet(pet: NewPet, idempotencyKey?: string): Promise<{ pet: Pet; location: CreatedHeaders['Location'] }> {
      const header = idempotencyKey === undefined ? {} : { 'Idempotency-Key': idempotencyKey };
      const { data, error, response } = await client.POST('/pets', { body: pet, params: { header } });
      if (error) throw new PetsApiError({ status: response.status, error });
      return { pet: data, location: response.headers.get('location') ?? '' };
    },

    /** The deprecated read: also says when it stops working. */
    async getPet(petId: Pet['id']): Promise<{ pet: Pet; sunset: GetPetHeaders['Sunset'] | null }> {
      const { data, error, response } = await client.GET('/pets/{petId}', { params: { path: { petId } } });
      if (error) throw new PetsApiError({ status: response.status, error });
      const sunset = response.headers.get('sunset');
      return { pet: data, sunset: sunset === 'Thu, 05 Dec 2030 00:00:00 GMT' ? sunset : null };
    },

    /** Changes a pet with a merge patch; with `ifMatch`, only if it still has that ETag. Returns the pet and its new ETag. */
    async updatePet(petId: Pet['id'], patch: PetPatch, ifMatch?: string): Promise<{ pet: Pet; etag: UpdatedHeaders['ETag'] }> {
      const header = ifMatch === undefined ? {} : { 'If-Match': ifMatch };
      const { data, error, response } = await client.PATCH('/pets/{petId}', {
        params: { path: { petId }, header },
        body: patch,
        headers: { 'Content-Type': 'application/merge-patch+json' },
      });
      if (error) throw new PetsApiError({ status: response.status, error });
      return { pet: data, etag: response.headers.get('etag') ?? '' };
    },

    /** Removes a pet; with `ifMatch`, only if it still has that ETag. */
    async deletePet(petId: Pet['id'], ifMatch?: string): Promise<void> {
      const header = ifMatch === undefined ? {} : { 'If-Match': ifMatch };
      const { error, response } = await client.DELETE('/pets/{petId}', { params: { path: { petId }, header } });
      if (error) throw new PetsApiError({ status: response.status, error });
    },

    /** Asks to adopt a pet: the order, placed, and where to find it. */
    async placeOrder(petId: Pet['id'], idempotencyKey?: string): Promise<{ order: Order; location: PlacedHeaders['Location'] }> {
      const header = idempotencyKey === undefined ? {} : { 'Idempotency-Key': idempotencyKey };
      const { data, error, response } = await client.POST('/store/orders', { body: { petId }, params: { header } });
      if (error) throw new PetsApiError({ status: response.status, error });
      return { order: data, location: response.headers.get('location') ?? '' };
    },

    /** One page of the orders the key may see. */
    async listOrders(query: OrderQuery = {}): Promise<Order[]> {
      const { data, error, response } = await client.GET('/store/orders', { params: { query } });
      if (error) throw new PetsApiError({ status: response.status, error });
      return data;
    },

    /** Moves an order to `status`: approve, complete or cancel it. */
    async updateOrder(orderId: Order['id'], status: OrderStatus): Promise<Order> {
      const { data, error, response } = await client.PATCH('/store/orders/{orderId}', {
        params: { path: { orderId } },
        body: { status },
        headers: { 'Content-Type': 'application/merge-patch+json' },
      });
      if (error) throw new PetsApiError({ status: response.status, error });
      return data;
    },

    async inventory(): Promise<Inventory> {
      const { data, error, response } = await client.GET('/store/inventory');
      if (error) throw new PetsApiError({ status: response.status, error });
      return data;
    },

    /** Sends a body the way a caller with loose input would, to see the typed 400. */
    async createUnchecked(body: NewPet): Promise<Failure | null> {
      const { error, response } = await client.POST('/pets', { body });
      return error ? { status: response.status, error } : null;
    },
  };
}

// --- Compile-time checks of the generated types ---------------------------------------------

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends (<T>() => T extends B ? 1 : 2) ? true : false;
function expectType<T extends true>(): T | void {}

expectType<Equal<Pet['id'], number>>();
expectType<Equal<Pet['categoryId'], number>>();
expectType<Equal<Pet['status'], PetStatus>>();
expectType<Equal<PetStatus, (typeof PET_STATUSES)[number]>>();
expectType<Equal<NewPet, { name: string; categoryId: number; status?: PetStatus }>>();
expectType<Equal<ListQuery, { limit?: number; status?: PetStatus; cursor?: string }>>();
expectType<Equal<operations['getPet']['parameters']['path'], { petId: number }>>();
expectType<Equal<NonNullable<operations['createPet']['parameters']['header']>, { 'Idempotency-Key'?: string }>>();
expectType<Equal<ApiErrorBody['status'], number>>();
expectType<Equal<Extract<ApiErrorBody['code'], 'invalid_body' | 'missing_api_key' | 'gone'>, 'invalid_body' | 'missing_api_key' | 'gone'>>();
expectType<Equal<ListHeaders['Link'], string | undefined>>();
expectType<Equal<ListHeaders['X-RateLimit-Remaining'], number>>();
expectType<Equal<CreatedHeaders['Location'], string>>();
expectType<Equal<CreatedHeaders['Idempotent-Replayed'], 'true' | undefined>>();
expectType<Equal<GetPetHeaders['Sunset'], 'Thu, 05 Dec 2030 00:00:00 GMT'>>();
expectType<Equal<GetPetHeaders['Deprecation'], '@1764892800'>>();
expectType<Equal<operations['listPets']['responses'][429]['headers']['Retry-After'], number>>();
expectType<Equal<operations['createPet']['responses'][400]['content']['application/json']['code'], 'invalid_idempotency_key' | 'invalid_body' | 'invalid_json' | 'bad_request'>>();
expectType<Equal<PetPatch, { name?: string; categoryId?: number; status?: PetStatus }>>();
expectType<Equal<NonNullable<operations['updatePet']['parameters']['header']>, { 'If-Match'?: string }>>();
expectType<Equal<NonNullable<operations['deletePet']['parameters']['header']>, { 'If-Match'?: string }>>();
expectType<Equal<operations['updatePet']['parameters']['path'], { petId: number }>>();
expectType<Equal<UpdatedHeaders['ETag'], string>>();
expectType<Equal<CreatedHeaders['ETag'], string>>();
expectType<Equal<GetPetHeaders['ETag'], string>>();
expectType<Equal<operations['updatePet']['responses'][412]['content']['application/json']['code'], 'precondition_failed'>>();
expectType<Equal<operations['deletePet']['responses'][204]['content'], undefined>>();
expectType<Equal<Order, { id: number; petId: number; account: string; status: OrderStatus; placedAt: string; updatedAt: string; expiresAt: string | null }>>();
expectType<Equal<OrderStatus, 'placed' | 'approved' | 'completed' | 'cancelled'>>();
expectType<Equal<OrderQuery, { limit?: number; status?: OrderStatus; cursor?: string }>>();
expectType<Equal<Inventory, { available: number; pending: number; sold: number }>>();
expectType<Equal<PlacedHeaders['Location'], string>>();
expectType<Equal<operations['placeOrder']['responses'][409]['content']['application/json']['code'], 'pet_not_available' | 'too_many_open_orders' | 'idempotency_key_in_flight'>>();
expectType<Equal<operations['updateOrder']['responses'][403]['content']['application/json']['code'], 'insufficient_scope'>>();
expectType<Equal<operations['getOrder']['parameters']['path'], { orderId: number }>>();

/** Never called: each line must be refused by the compiler. */
export function misuses(client: ReturnType<typeof createClient<paths>>): void {
  // @ts-expect-error limit is a number
  void client.GET('/pets', { params: { query: { limit: '5' } } });
  // @ts-expect-error status is one of the three values
  void client.GET('/pets', { params: { query: { status: 'lost' } } });
  // @ts-expect-error categoryId is required
  void client.POST('/pets', { body: { name: 'Rex' } });
  // @ts-expect-error categoryId is a number
  void client.POST('/pets', { body: { name: 'Rex', categoryId: '5' } });
  // @ts-expect-error petId is required
  void client.GET('/pets/{petId}', { params: { path: {} } });
  // @ts-expect-error there is no PUT /pets
  void client.PUT('/pets', { body: {} });
  // @ts-expect-error categoryId is a number in a patch too
  void client.PATCH('/pets/{petId}', { params: { path: { petId: 1 } }, body: { categoryId: '5' } });
  // @ts-expect-error null removes nothing: it is not a value of any field
  void client.PATCH('/pets/{petId}', { params: { path: { petId: 1 } }, body: { status: null } });
  // @ts-expect-error status is one of the three values
  void client.PATCH('/pets/{petId}', { params: { path: { petId: 1 } }, body: { status: 'adopted' } });
  // @ts-expect-error petId is a number
  void client.POST('/store/orders', { body: { petId: '1' } });
  // @ts-expect-error an order has four statuses; "shipped" is not one
  void client.PATCH('/store/orders/{orderId}', { params: { path: { orderId: 1 } }, body: { status: 'shipped' } });
  // @ts-expect-error orders cannot be deleted
  void client.DELETE('/store/orders/{orderId}', { params: { path: { orderId: 1 } } });
  // @ts-expect-error DELETE takes no body
  void client.DELETE('/pets/{petId}', { params: { path: { petId: 1 } }, body: {} });
}
