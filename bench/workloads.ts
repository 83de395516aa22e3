/**
 * The workloads of issue #6, as autocannon request sequences. Both servers get exactly the
 * same requests (the baseline ignores what they ask for); only the service's answers differ.
 */
import type autocannon from 'autocannon';
import { encodeCursor } from '../src/api/cursor.ts';

export const WORKLOAD_NAMES = ['list20', 'list100', 'deep', 'get', 'create', 'mix', 'patchmix'] as const;
export type WorkloadName = (typeof WORKLOAD_NAMES)[number];

export interface Workload {
  name: WorkloadName;
  /** What it sends, as shown in the tables. */
  label: string;
  /** Lowest acceptable ratio of the service's requests/s to the baseline's (issue #6), or null. */
  target: number | null;
  /**
   * Each connection sends these in order, over and over. A new array of new objects per call:
   * autocannon stores each request's encoded bytes (Host header included) on the object.
   */
  requests(): autocannon.Request[];
}

export interface WorkloadFixture {
  /** The bench key, sent as `Authorization: Bearer` on every request. */
  key: string;
  /** Pets in the seeded database (ids 1..pets). */
  pets: number;
  /** The id after which a `status=sold` page near the end of the table starts. */
  deepSoldAfterId: number;
}

/** A valid NewPet: the service answers 201 and stores it durably. */
export const NEW_PET_BODY = JSON.stringify({ name: 'Benchmark pet', categoryId: 7, status: 'available' });

/** Distinct ids the get-by-id workload cycles through on each connection. */
const GET_IDS = 256;
/** Blocks of ten requests (one of them a PATCH) in the patchmix sequence of each connection. */
const PATCH_MIX_BLOCKS = 64;

/** Builds every workload for a seeded database. */
export function buildWorkloads(fixture: WorkloadFixture): Workload[] {
  const auth = { authorization: `Bearer ${fixture.key}` };
  const get = (path: string): autocannon.Request => ({ method: 'GET', path, headers: auth });
  const create = (): autocannon.Request => ({
    method: 'POST',
    path: '/v1/pets',
    headers: { ...auth, 'content-type': 'application/json' },
    body: NEW_PET_BODY,
  });
  const list20 = () => get('/v1/pets?limit=20');
  // A real change every time (the status flips), made whatever the pet's version: If-Match: *
  // still goes through the If-Match parser and the existence check.
  const change = (id: number, status: string): autocannon.Request => ({
    method: 'PATCH',
    path: `/v1/pets/${id}`,
    headers: { ...auth, 'content-type': 'application/merge-patch+json', 'if-match': '*' },
    body: JSON.stringify({ status }),
  });
  // Ids spread over the whole table (fixed seed, so every run asks for the same ones): the
  // service reads a different row each time, as real traffic would make it.
  const random = mulberry32(6);
  const ids = Array.from({ length: GET_IDS }, () => 1 + Math.floor(random() * fixture.pets));

  return [
    { name: 'list20', label: 'GET /v1/pets?limit=20', target: 0.75, requests: () => [list20()] },
    { name: 'list100', label: 'GET /v1/pets?limit=100', target: null, requests: () => [get('/v1/pets?limit=100')] },
    {
      name: 'deep',
      label: 'GET /v1/pets?limit=20&status=sold&cursor=<deep>',
      target: null,
      requests: () => [get(`/v1/pets?limit=20&status=sold&cursor=${encodeCursor(fixture.deepSoldAfterId)}`)],
    },
    { name: 'get', label: 'GET /v1/pets/{id}', target: 0.8, requests: () => ids.map((id) => get(`/v1/pets/${id}`)) },
    { name: 'create', label: 'POST /v1/pets', target: 0.5, requests: () => [create()] },
    // 9 reads then 1 write on every connection: 90/10 overall, writes spread evenly in time.
    { name: 'mix', label: 'mix 90% GET limit=20 / 10% POST', target: 0.7, requests: () => [...Array.from({ length: 9 }, list20), create()] },
    // Issue #10: reads while pets change. Per ten requests: five first pages, four pets by id and
    // one PATCH, over the get workload's ids, so that changes drop cached answers as they would.
    {
      name: 'patchmix',
      label: 'mix 90% GET limit=20 or by id / 10% PATCH',
      target: null,
      requests: () => ids.slice(0, PATCH_MIX_BLOCKS).flatMap((changed, block) => [
        ...[0, 1, 2, 3].flatMap((i) => [list20(), get(`/v1/pets/${ids[(block * 4 + i) % ids.length]}`)]),
        list20(),
        change(changed, block % 2 === 0 ? 'sold' : 'available'),
      ]),
    },
  ];
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
