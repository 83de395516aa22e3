/**
 * No 500 from a race: random mixes of concurrent creates (with and without shared
 * Idempotency-Keys, with the same body and with another), PATCHes and DELETEs (without If-Match,
 * with the ETag the pet had, with one it never had, with `*`) are fired at once at one, then at
 * three real instances on one PostgreSQL database (the scale-out test's helpers). Every answer
 * must be one the contract allows, and the database must agree with the answers:
 *
 * - each first 201 is stored once, exactly as answered, and each key has exactly one;
 *   a replay is that 201 byte for byte, a 422 was sent with another body, and a 409 stored nothing;
 * - a pet is gone exactly when one DELETE got 204, and a 404 only follows that 204;
 * - the 200s of a pet's PATCHes are its states one after the other: versions 2, 3, ... with no
 *   gap, each the one before with that request's patch applied, and the row is the last of them;
 *   so a 412 (or anything else) changed nothing.
 *
 * The requests are drawn by fast-check with the suite's fixed seed (FC_SEED, FC_RUNS: see
 * test/support/property.ts), so a run's requests can be replayed; the interleaving is the
 * machine's. Creation batch sizes are read from the database (rows inserted by one transaction
 * share its xmin) and reported as a diagnostic.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createKeysStore } from '../../src/storage/postgres/keys-store.ts';
import type { PostgresSql } from '../../src/storage/postgres/driver.ts';
import { killAll, startInstance, type Instance } from '../support/instances.ts';
import { openTestDatabase, postgresSkip, startPostgres, type PostgresCluster } from '../support/postgres.ts';
import { CONTRACT_ERRORS, settings } from '../support/property.ts';
import { petJson } from '../../src/api/pets/json.ts';
import { MADE } from '../../src/storage/idempotency.ts';
import { parseStored, PET_FORM } from '../../src/storage/stored-forms.ts';

const readPet = parseStored(PET_FORM);

/** Pets each run changes and deletes; creates make new ones, which nothing changes. */
const PETS = 3;
const KEYS = ['a', 'b'] as const;
const STATUSES = ['available', 'pending', 'sold'] as const;

type IfMatch = 'none' | 'first' | 'never' | 'any';
type Patch = { name?: string; categoryId?: number; status?: (typeof STATUSES)[number] };
type Op =
  | { kind: 'create'; key: (typeof KEYS)[number] | null; variant: 0 | 1; at: number }
  | { kind: 'patch'; pet: number; patch: Patch; ifMatch: IfMatch; at: number }
  | { kind: 'delete'; pet: number; ifMatch: IfMatch; at: number };

const ifMatch = fc.constantFrom<IfMatch>('none', 'first', 'never', 'any');
const at = fc.nat(2);
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('create' as const), key: fc.constantFrom(null, ...KEYS), variant: fc.constantFrom(0 as const, 1 as const), at }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('patch' as const),
      pet: fc.nat(PETS - 1),
      patch: fc.record({ name: fc.constantFrom('A', 'B', 'C'), categoryId: fc.constantFrom(1, 2), status: fc.constantFrom(...STATUSES) }, { requiredKeys: [] })
        .filter((patch) => Object.keys(patch).length > 0),
      ifMatch,
      at,
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), pet: fc.nat(PETS - 1), ifMatch, at }) },
);
const ops = fc.array(op, { minLength: 6, maxLength: 24 });

interface Answer {
  status: number;
  code: string | null;
  body: string;
  etag: string | null;
  replayed: boolean;
}

interface Seeded {
  id: number;
  etag: string;
  state: { name: string; categoryId: number; status: string };
}

describe('concurrent writes on PostgreSQL: every answer is the contract\'s, and the database agrees', { skip: postgresSkip }, () => {
  let cluster: PostgresCluster;
  let sql: PostgresSql;
  let key: string;
  const instances: Instance[] = [];
  /** Creation batch sizes seen (rows per inserting transaction), over every run. */
  const batchSizes = new Map<number, number>();
  let run = 0;

  before(async () => {
    cluster = await startPostgres();
    let url: string;
    ({ sql, url } = await openTestDatabase({ after: () => {} }, cluster, { poolSize: 2 }));
    key = (await createKeysStore(sql, { appEnv: 'staging' }).create({ plan: 'enterprise', perMinute: 10_000_000, perDay: 10_000_000, now: Date.now() })).key;
    const env = { DATABASE_URL: url, APP_ENV: 'staging', DATABASE_POOL_SIZE: '4' };
    instances.push(...(await Promise.all([0, 1, 2].map(() => startInstance(env)))));
  });
  after(async () => {
    killAll(instances);
    await sql?.end({ timeout: 1 });
    cluster?.remove();
  });

  async function send(instance: number, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
    const response = await fetch(instances[instance]!.url + path, { method, headers: { authorization: `Bearer ${key}`, ...headers }, ...(body === undefined ? {} : { body }) });
    const text = await response.text();
    return {
      status: response.status,
      code: response.status >= 400 ? (JSON.parse(text) as { code: string }).code : null,
      body: text,
      etag: response.headers.get('etag'),
      replayed: response.headers.get('idempotent-replayed') === 'true',
    };
  }

  /** Checks an answer against the statuses and codes allowed for its request. */
  function allowed(answer: Answer, statuses: Record<number, string | null | undefined>, context: string): void {
    assert.ok(answer.status in statuses, `${context}: ${answer.status} ${answer.body}`);
    if (answer.status < 400) return;
    assert.equal(CONTRACT_ERRORS[answer.code!], answer.status, context);
    assert.equal(answer.code, statuses[answer.status], `${context}: ${answer.body}`);
  }

  async function oneRun(instanceCount: number, list: readonly Op[]): Promise<void> {
    const prefix = `r${++run}`;
    const seeded: Seeded[] = [];
    for (let i = 0; i < PETS; i++) {
      const state = { name: `${prefix} pet ${i}`, categoryId: 1, status: 'available' };
      const made = await send(0, 'POST', '/v1/pets', { 'content-type': 'application/json' }, JSON.stringify(state));
      assert.equal(made.status, 201);
      seeded.push({ id: (JSON.parse(made.body) as { id: number }).id, etag: made.etag!, state });
    }
    const bodyOf = (create: Extract<Op, { kind: 'create' }>, index: number) =>
      JSON.stringify({ name: create.key === null ? `${prefix} plain ${index}` : `${prefix} key ${create.key}`, categoryId: 1 + create.variant });
    const ifMatchHeader = (value: IfMatch, pet: Seeded): Record<string, string> =>
      value === 'none' ? {} : { 'if-match': value === 'first' ? pet.etag : value === 'never' ? `"${pet.id}.0"` : '*' };

    const answers = await Promise.all(list.map((request, index) => {
      const instance = request.at % instanceCount;
      if (request.kind === 'create') {
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (request.key !== null) headers['idempotency-key'] = `${prefix}-${request.key}`;
        return send(instance, 'POST', '/v1/pets', headers, bodyOf(request, index));
      }
      const pet = seeded[request.pet]!;
      if (request.kind === 'patch') {
        return send(instance, 'PATCH', `/v1/pets/${pet.id}`, { 'content-type': 'application/merge-patch+json', ...ifMatchHeader(request.ifMatch, pet) }, JSON.stringify(request.patch));
      }
      return send(instance, 'DELETE', `/v1/pets/${pet.id}`, ifMatchHeader(request.ifMatch, pet));
    }));

    // Every answer is one the contract allows for its request: never a 500 or a 503.
    list.forEach((request, index) => {
      const answer = answers[index]!;
      const context = `${prefix} request ${index} ${JSON.stringify(request)}`;
      const conditional = request.kind !== 'create' && (request.ifMatch === 'first' || request.ifMatch === 'never');
      if (request.kind === 'create') {
        allowed(answer, request.key === null ? { 201: null } : { 201: null, 409: 'idempotency_key_in_flight', 422: 'idempotency_key_reused' }, context);
      } else if (request.kind === 'patch') {
        allowed(answer, { 200: null, 404: 'pet_not_found', ...(conditional ? { 412: 'precondition_failed' } : {}) }, context);
      } else {
        allowed(answer, { 204: null, 404: 'pet_not_found', ...(conditional ? { 412: 'precondition_failed' } : {}) }, context);
      }
      if (request.kind !== 'create' && request.ifMatch === 'never') assert.ok(answer.status >= 400, `${context}: an ETag the pet never had matched`);
    });

    // Creates: each first 201 stored once, exactly as answered; one per key; replays are it.
    const rows = await sql<{ id: string; name: string; category_id: string; status: string; version: number; tx: string }[]>`
      SELECT id::text, name, category_id::text, status, version, xmin::text AS tx FROM pets
       WHERE name LIKE ${`${prefix} %`} OR id = ANY(${seeded.map((pet) => String(pet.id))}::bigint[]) ORDER BY id`;
    const byId = new Map(rows.map((row) => [Number(row.id), row]));
    const creates = list.flatMap((request, index) => (request.kind === 'create' ? [{ request, answer: answers[index]!, body: bodyOf(request, index) }] : []));
    const firsts = creates.filter(({ answer }) => answer.status === 201 && !answer.replayed);
    for (const { answer, body } of firsts) {
      const stored = JSON.parse(answer.body) as { id: number; name: string; categoryId: number; status: string };
      const row = byId.get(stored.id);
      assert.ok(row, `${prefix}: the 201 of ${body} is stored`);
      assert.deepEqual({ name: row.name, categoryId: Number(row.category_id), status: row.status, version: row.version }, { ...JSON.parse(body), status: 'available', version: 1 });
      assert.deepEqual({ name: stored.name, categoryId: stored.categoryId, status: stored.status }, { ...JSON.parse(body), status: 'available' });
    }
    const createdRows = rows.filter((row) => !seeded.some((pet) => pet.id === Number(row.id)));
    assert.equal(createdRows.length, firsts.length, `${prefix}: one row per first 201, none for anything else`);
    for (const name of KEYS) {
      const sent = creates.filter(({ request }) => request.key === name);
      if (sent.length === 0) continue;
      const winners = sent.filter(({ answer }) => answer.status === 201 && !answer.replayed);
      assert.equal(winners.length, 1, `${prefix}: key ${name} created exactly once: ${JSON.stringify(sent.map(({ answer }) => answer.code ?? answer.status))}`);
      const winner = winners[0]!;
      for (const { request, answer } of sent) {
        if (answer.replayed) {
          assert.equal(answer.body, winner.answer.body, `${prefix}: a replay is the first 201`);
          assert.equal(request.variant, winner.request.variant, `${prefix}: replayed for the same body`);
        }
        if (answer.status === 422) assert.notEqual(request.variant, winner.request.variant, `${prefix}: 422 only for another body`);
      }
      // The record keeps the pet it made; rendered as the API renders it, that is its first 201.
      const [record] = await sql<{ response_status: number; response_body: string }[]>`
        SELECT response_status, response_body FROM idempotency_keys WHERE idempotency_key = ${`${prefix}-${name}`}`;
      assert.equal(record?.response_status, MADE, `${prefix}: the record of key ${name} keeps what was made`);
      assert.equal(petJson(readPet(record.response_body)), winner.answer.body, `${prefix}: the record of key ${name} is its first 201`);
    }
    const perTransaction = new Map<string, number>();
    for (const row of createdRows) perTransaction.set(row.tx, (perTransaction.get(row.tx) ?? 0) + 1);
    for (const size of perTransaction.values()) batchSizes.set(size, (batchSizes.get(size) ?? 0) + 1);

    // Changes: the database holds what the 200s and 204s say, and nothing else happened.
    for (const [index, pet] of seeded.entries()) {
      const mine = list.flatMap((request, i) => (request.kind !== 'create' && request.pet === index ? [{ request, answer: answers[i]! }] : []));
      const context = `${prefix} pet ${index}: ${JSON.stringify(mine.map(({ request, answer }) => [request.kind, request.ifMatch, answer.code ?? answer.status]))}`;
      const deleted = mine.filter(({ answer }) => answer.status === 204);
      const row = byId.get(pet.id);
      assert.ok(deleted.length <= 1, context);
      assert.equal(row === undefined, deleted.length === 1, `${context}: gone exactly when a DELETE got 204`);
      if (mine.some(({ answer }) => answer.status === 404)) assert.equal(deleted.length, 1, `${context}: a 404 only after the 204`);
      const patched = mine
        .filter(({ answer }) => answer.status === 200)
        .map(({ request, answer }) => ({ request: request as Extract<Op, { kind: 'patch' }>, answer, version: Number(/^"\d+\.(\d+)"$/.exec(answer.etag ?? '')?.[1]) }))
        .sort((a, b) => a.version - b.version);
      let state = pet.state;
      patched.forEach(({ request, answer, version }, i) => {
        assert.equal(version, i + 2, `${context}: versions 2, 3, ... one per 200`);
        if (request.ifMatch === 'first') assert.equal(version, 2, `${context}: If-Match of the first ETag applies only to version 1`);
        state = { ...state, ...request.patch };
        const body = JSON.parse(answer.body) as Record<string, unknown>;
        assert.deepEqual({ name: body.name, categoryId: body.categoryId, status: body.status }, state, `${context}: a 200 is the pet's state after its own patch`);
      });
      if (deleted[0]?.request.ifMatch === 'first') assert.equal(patched.length, 0, `${context}: deleted at version 1, so no change came before`);
      if (row) {
        assert.equal(row.version, patched.length + 1, `${context}: no change but the 200s`);
        assert.deepEqual({ name: row.name, categoryId: Number(row.category_id), status: row.status }, state, `${context}: the row is the last 200's state`);
      }
    }
  }

  for (const instanceCount of [1, 3]) {
    test(`at ${instanceCount === 1 ? 'one instance' : 'three instances'}`, async (t) => {
      batchSizes.clear();
      let requests = 0;
      await fc.assert(
        fc.asyncProperty(ops, async (list) => {
          requests += list.length;
          await oneRun(instanceCount, list);
        }),
        { ...settings(40), endOnFailure: true },
      );
      const sizes = [...batchSizes].sort(([a], [b]) => a - b).map(([size, count]) => `${size} x ${count}`).join(', ');
      t.diagnostic(`${requests} concurrent requests; creation batches (rows per transaction): ${sizes}`);
      for (const instance of instances) assert.equal(instance.child.exitCode, null, 'no instance stopped');
    });
  }
});
