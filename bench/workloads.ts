/**
 * The workloads of `npm run bench`, in one table. Each says what every connection sends: a wrk
 * Lua script in bench/wrk/ with its arguments, and the same sequence as plain requests, which the
 * bench sends once before a load (each must answer 2xx) and the tests compare with what wrk sent.
 * Both servers get exactly the same requests (the baseline ignores what they ask for); only the
 * service's answers differ.
 *
 * To add a workload: add a row to WORKLOADS. A fixed sequence of requests needs no new script
 * (`gets`, `creates` and `mix` below); one that reacts to answers (an ETag to send back in
 * If-Match) gets its own script with a response() hook.
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
export interface Drive {
  /** The script's file name in bench/wrk/ and its arguments (its init(args)). */
  wrk: { script: string; args: string[] };
  /**
   * The requests each connection sends, in order, over and over. A script that reacts to answers
   * (adopt.lua) sends ids it learns: its sequence writes them `{id}` and `{petId}`.
   */
  sequence: BenchRequest[];
  /**
   * For a workload that leaves state behind (open orders): puts it back, through the API, after
   * each run on the service, so that every round starts alike; also the check before the loads.
   */
  settle?: (url: string, authorization: string) => Promise<void>;
}

interface WorkloadRow {
  name: string;
  /** What it sends, as shown in the tables. */
  label: string;
  /** Lowest acceptable ratio of the service's requests/s to the baseline's, or null. */
  target: number | null;
  drive(fixture: WorkloadFixture): Drive;
}

/** A valid NewPet: the service answers 201 and stores it durably. */
export const NEW_PET_BODY = JSON.stringify({ name: 'Benchmark pet', categoryId: 7, status: 'available' });

/** Distinct ids the get-by-id workload cycles through. */
const GET_IDS = 256;

/** The workloads, in the order they run and are shown. */
export const WORKLOADS = [
  { name: 'list20', label: 'GET /v1/pets?limit=20', target: 0.8, drive: () => gets(['/v1/pets?limit=20']) },
  { name: 'list100', label: 'GET /v1/pets?limit=100', target: null, drive: () => gets(['/v1/pets?limit=100']) },
  {
    name: 'deep',
    label: 'GET /v1/pets?limit=20&status=sold&cursor=<deep>',
    target: 0.8,
    drive: (f) => gets([`/v1/pets?limit=20&status=sold&cursor=${encodeCursor(f.deepSoldAfterId)}`]),
  },
  {
    name: 'get',
    label: 'GET /v1/pets/{id}',
    target: 0.8,
    // Ids spread over the whole table (fixed seed, so every run asks for the same ones): the
    // service reads a different row each time, as real traffic would make it.
    drive: (f) => gets(spreadIds(f.pets, GET_IDS).map((id) => `/v1/pets/${id}`)),
  },
  { name: 'create', label: 'POST /v1/pets (durable)', target: 0.55, drive: () => ({ wrk: { script: 'create.lua', args: [NEW_PET_BODY] }, sequence: [create()] }) },
  { name: 'mix', label: 'mix 90% GET limit=20 / 10% POST', target: 0.7, drive: () => mix(9, '/v1/pets?limit=20') },
  { name: 'adopt', label: 'POST an order / PATCH it cancelled (durable)', target: null, drive: (f) => adopt(f) },
  // Reads while pets change. It runs last: it changes statuses, which the deep workload's
  // cursor was chosen from.
  { name: 'patchmix', label: 'mix 90% GET limit=20 or by id / 10% PATCH', target: 0.6, drive: (f) => patchMix(f) },
] as const satisfies readonly WorkloadRow[];

export type WorkloadName = (typeof WORKLOADS)[number]['name'];
export const WORKLOAD_NAMES: readonly WorkloadName[] = WORKLOADS.map((row) => row.name);

/** A workload ready to run on a seeded database. */
export interface Workload extends Drive {
  name: WorkloadName;
  label: string;
  target: number | null;
}

/** The workloads `names` (all by default), in the table's order, for a seeded database. */
export function buildWorkloads(fixture: WorkloadFixture, names: readonly WorkloadName[] = WORKLOAD_NAMES): Workload[] {
  return WORKLOADS.filter((row) => names.includes(row.name)).map((row) => ({
    name: row.name,
    label: row.label,
    target: row.target,
    ...(row.drive(fixture) as Drive),
  }));
}

/** GET each path in turn. */
function gets(paths: string[]): Drive {
  return { wrk: { script: 'get.lua', args: paths }, sequence: paths.map(get) };
}

/** `reads` GETs of `path`, then one create: the writes spread evenly in time. */
function mix(reads: number, path: string): Drive {
  return {
    wrk: { script: 'mix.lua', args: [String(reads), path, NEW_PET_BODY] },
    sequence: [...Array.from({ length: reads }, () => get(path)), create()],
  };
}

/** Blocks of ten requests (one of them a PATCH) in the patchmix sequence. */
const PATCH_MIX_BLOCKS = 64;

/**
 * Per ten requests: five first pages, four pets by id and one PATCH of one of the get
 * workload's pets, so that changes drop cached answers as they would. Each PATCH flips the
 * status with If-Match: *, so it is a real change whatever the version, and still goes through
 * the If-Match parser and the existence check.
 */
function patchMix(fixture: WorkloadFixture): Drive {
  const ids = spreadIds(fixture.pets, GET_IDS);
  const lines = ids.slice(0, PATCH_MIX_BLOCKS).flatMap((changed, block) => [
    ...[0, 1, 2, 3].flatMap((i) => ['GET /v1/pets?limit=20', `GET /v1/pets/${ids[(block * 4 + i) % ids.length]}`]),
    'GET /v1/pets?limit=20',
    `PATCH /v1/pets/${changed} ${JSON.stringify({ status: block % 2 === 0 ? 'sold' : 'available' })}`,
  ]);
  return {
    wrk: { script: 'patchmix.lua', args: lines },
    sequence: lines.map((line) => {
      const [method, path, body] = line.split(' ') as ['GET' | 'PATCH', string, string | undefined];
      if (method === 'GET') return get(path);
      return { method, path, headers: { 'content-type': 'application/merge-patch+json', 'if-match': '*' }, body: body! };
    }),
  };
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
    settle: (url, authorization) => cancelOpenOrders(url, authorization),
  };
}

/** Cancels every placed order, page by page, through the API. */
export async function cancelOpenOrders(url: string, authorization: string): Promise<void> {
  for (;;) {
    const page = await fetchOnce(`${url}/v1/store/orders?status=placed&limit=100`, { headers: { authorization } });
    if (page.status !== 200) throw new Error(`GET /v1/store/orders answered ${page.status}: ${page.body.slice(0, 300)}`);
    const orders = JSON.parse(page.body) as { id: number }[];
    if (orders.length === 0) return;
    for (const { id } of orders) {
      const answer = await fetchOnce(`${url}/v1/store/orders/${id}`, {
        method: 'PATCH', headers: { authorization, 'content-type': 'application/merge-patch+json' }, body: '{"status":"cancelled"}',
      });
      if (answer.status !== 200) throw new Error(`cancelling order ${id} answered ${answer.status}: ${answer.body.slice(0, 300)}`);
    }
  }
}

function get(path: string): BenchRequest {
  return { method: 'GET', path, headers: {} };
}

function create(): BenchRequest {
  return { method: 'POST', path: '/v1/pets', headers: { 'content-type': 'application/json' }, body: NEW_PET_BODY };
}

/** `count` ids from 1 to `pets`, the same in every run. */
function spreadIds(pets: number, count: number): number[] {
  const random = mulberry32(6);
  return Array.from({ length: count }, () => 1 + Math.floor(random() * pets));
}

/** A small deterministic PRNG (mulberry32): the same ids in every run. */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
