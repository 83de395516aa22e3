/**
 * The workloads of `npm run bench`, in one table. Each says what every connection sends, in
 * order, over and over: a sequence of requests, which wrk sends with bench/wrk/sequence.lua (or a
 * script of its own when it reacts to answers) and the bench sends once before a load (each must
 * answer 2xx); the tests check that wrk sends exactly the sequence. Both servers get the same
 * requests (the baseline ignores what they ask for); only the service's answers differ.
 *
 * To add a workload, add a row to WORKLOADS; only one that reacts to answers needs a Lua script.
 */
import { encodeCursor } from '../src/api/cursor.ts';
import { fetchOnce } from './processes.ts';

export interface WorkloadFixture {
  /** Pets in the seeded database (ids 1..pets). */
  pets: number;
  /** The id after which a `status=sold` page near the end of the table starts. */
  deepSoldAfterId: number;
}

/** One request of a sequence; the bench key's `Authorization` header is added to every one. */
export interface BenchRequest {
  method: 'GET' | 'POST' | 'PATCH';
  path: string;
  headers: Record<string, string>;
  body?: string;
}

/** What the connections send. */
interface Drive {
  /**
   * The requests each connection sends, in order. A script that reacts to answers (adopt.lua)
   * sends ids it learns: its sequence writes them `{id}` and `{petId}`.
   */
  sequence: BenchRequest[];
  /** A script of its own in bench/wrk/ and its arguments; else sequence.lua sends `sequence`. */
  wrk?: Workload['wrk'];
  /**
   * For a workload that leaves state behind (open orders): puts it back, through the API, after
   * each run on the service, so that every round starts alike; also the check before the loads.
   */
  settle?: (url: string, authorization: string) => Promise<void>;
}

/** A valid NewPet: the service answers 201 and stores it durably. */
const NEW_PET_BODY = JSON.stringify({ name: 'Benchmark pet', categoryId: 7, status: 'available' });

/** Distinct ids the get-by-id workload cycles through. */
const GET_IDS = 256;

/** The workloads, in the order they run and are shown; target: the lowest acceptable ratio to the baseline. */
export const WORKLOADS = [
  { name: 'list20', label: 'GET /v1/pets?limit=20', target: 0.8, drive: () => ({ sequence: [get('/v1/pets?limit=20')] }) },
  { name: 'list100', label: 'GET /v1/pets?limit=100', target: null, drive: () => ({ sequence: [get('/v1/pets?limit=100')] }) },
  {
    name: 'deep',
    label: 'GET /v1/pets?limit=20&status=sold&cursor=<deep>',
    target: 0.8,
    drive: (f) => ({ sequence: [get(`/v1/pets?limit=20&status=sold&cursor=${encodeCursor(f.deepSoldAfterId)}`)] }),
  },
  // Ids spread over the whole table, the same in every run: the service reads a different row
  // each time, as real traffic would make it.
  { name: 'get', label: 'GET /v1/pets/{id}', target: 0.8, drive: (f) => ({ sequence: spreadIds(f.pets, GET_IDS).map((id) => get(`/v1/pets/${id}`)) }) },
  { name: 'create', label: 'POST /v1/pets (durable)', target: 0.55, drive: () => ({ sequence: [create()] }) },
  // Nine reads, then one create: the writes spread evenly in time.
  { name: 'mix', label: 'mix 90% GET limit=20 / 10% POST', target: 0.7, drive: () => ({ sequence: [...Array.from({ length: 9 }, () => get('/v1/pets?limit=20')), create()] }) },
  { name: 'adopt', label: 'POST an order / PATCH it cancelled (durable)', target: null, drive: (f) => adopt(f) },
  // Reads while pets change. It runs last: it changes statuses, which the deep workload's
  // cursor was chosen from.
  { name: 'patchmix', label: 'mix 90% GET limit=20 or by id / 10% PATCH', target: 0.6, drive: (f) => ({ sequence: patchMix(f) }) },
] as const satisfies readonly { name: string; label: string; target: number | null; drive(fixture: WorkloadFixture): Drive }[];

export type WorkloadName = (typeof WORKLOADS)[number]['name'];
export const WORKLOAD_NAMES: readonly WorkloadName[] = WORKLOADS.map((row) => row.name);

/** A workload ready to run on a seeded database: its wrk script and arguments, and what they send. */
export interface Workload {
  name: WorkloadName;
  label: string;
  target: number | null;
  sequence: BenchRequest[];
  wrk: { script: string; args: string[] };
  settle?: Drive['settle'];
}

/** The workloads `names` (all by default), in the table's order, for a seeded database. */
export function buildWorkloads(fixture: WorkloadFixture, names: readonly WorkloadName[] = WORKLOAD_NAMES): Workload[] {
  return WORKLOADS.filter((row) => names.includes(row.name)).map((row) => {
    const { sequence, wrk, settle }: Drive = row.drive(fixture);
    // sequence.lua's arguments: "METHOD PATH [BODY]" per request.
    const args = sequence.map((request) => [request.method, request.path, ...(request.body === undefined ? [] : [request.body])].join(' '));
    return { name: row.name, label: row.label, target: row.target, sequence, wrk: wrk ?? { script: 'sequence.lua', args }, ...(settle === undefined ? {} : { settle }) };
  });
}

/** Blocks of ten requests (one of them a PATCH) in the patchmix sequence. */
const PATCH_MIX_BLOCKS = 64;

/**
 * Per ten requests: five first pages, four pets by id and one PATCH of one of the get
 * workload's pets, so that changes drop cached answers as they would. Each PATCH flips the
 * status with If-Match: * (sequence.lua sends it), so it is a real change whatever the version.
 */
function patchMix(fixture: WorkloadFixture): BenchRequest[] {
  const ids = spreadIds(fixture.pets, GET_IDS);
  const headers = { 'content-type': 'application/merge-patch+json', 'if-match': '*' };
  return ids.slice(0, PATCH_MIX_BLOCKS).flatMap((changed, block) => [
    ...[0, 1, 2, 3].flatMap((i) => [get('/v1/pets?limit=20'), get(`/v1/pets/${ids[(block * 4 + i) % ids.length]}`)]),
    get('/v1/pets?limit=20'),
    { method: 'PATCH', path: `/v1/pets/${changed}`, headers, body: JSON.stringify({ status: block % 2 === 0 ? 'sold' : 'available' }) },
  ]);
}

/** Pets the adopt workload orders: enough for 200 connections with one each in flight, twice over. */
const ADOPTABLE_PETS = 400;

/**
 * Places an order for a free pet, then cancels it, each a durable write of the order and its pet
 * in one transaction; the pets are the seed's available ones (id % 3 = 1, see seed.ts), which no
 * workload before this one changes.
 */
function adopt(fixture: WorkloadFixture): Drive {
  const pets = Array.from({ length: Math.min(ADOPTABLE_PETS, Math.floor((fixture.pets + 2) / 3)) }, (_, i) => 1 + 3 * i);
  return {
    wrk: { script: 'adopt.lua', args: pets.map(String) },
    sequence: [
      { method: 'POST', path: '/v1/store/orders', headers: { 'content-type': 'application/json' }, body: '{"petId":{petId}}' },
      { method: 'PATCH', path: '/v1/store/orders/{id}', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"status":"cancelled"}' },
    ],
    settle: cancelOpenOrders,
  };
}

/** Cancels every placed order, page by page, through the API. */
async function cancelOpenOrders(url: string, authorization: string): Promise<void> {
  const ok = async (path: string, options: Parameters<typeof fetchOnce>[1] = {}) => {
    const answer = await fetchOnce(url + path, { ...options, headers: { authorization, ...options.headers } });
    if (answer.status !== 200) throw new Error(`${options.method ?? 'GET'} ${path} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
    return JSON.parse(answer.body) as { id: number }[];
  };
  const placed = '/v1/store/orders?status=placed&limit=100';
  for (let orders = await ok(placed); orders.length > 0; orders = await ok(placed)) {
    for (const { id } of orders) await ok(`/v1/store/orders/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: '{"status":"cancelled"}' });
  }
}

const get = (path: string): BenchRequest => ({ method: 'GET', path, headers: {} });
const create = (): BenchRequest => ({ method: 'POST', path: '/v1/pets', headers: { 'content-type': 'application/json' }, body: NEW_PET_BODY });

/** `count` ids from 1 to `pets`, spread over the table by the golden ratio's fractions: the same in every run. */
function spreadIds(pets: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => 1 + Math.floor((((i + 1) * 0.6180339887498949) % 1) * pets));
}
