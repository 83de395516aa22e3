/**
 * The shared limiter on a real PostgreSQL: it decides exactly as the in-memory limiter does
 * (same units, same headers, same bans), and several instances together hand out one quota.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createLimiter } from '../../../src/limits/limiter.ts';
import { createLimiterStore } from '../../../src/storage/postgres/limiter-store.ts';
import { PLANS } from '../../../src/limits/plans.ts';
import { fakeClock } from '../../support/test-server.ts';
import { describeWithPostgres, openTestDatabase } from '../../support/postgres.ts';
import { connectPostgres, migratePostgres } from '../../../src/storage/postgres/database.ts';
import { MIGRATIONS } from '../../../src/storage/postgres/migrations.ts';
import type { PostgresSql } from '../../../src/storage/postgres/driver.ts';

describeWithPostgres('the PostgreSQL limiter', (cluster) => {

  test('it answers every request exactly as the in-memory limiter does, bans included', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    const clock = fakeClock();
    const options = { clock, banThreshold: 5, banSeconds: 30 };
    const memory = createLimiter(options);
    const shared = createLimiterStore({ sql, ...options });
    // A deterministic walk: bursts past the limits and pauses that refill. Each caller keeps its
    // limits (the in-memory sweep refills under a caller's previous limits, a timing artefact).
    let seed = 7;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const limitsOf = [PLANS.free, { perMinute: 3, perDay: 8 }, { perMinute: 2, perDay: 1_000 }];
    const seen = new Set<string>();
    for (let step = 0; step < 600; step++) {
      const which = Math.floor(random() * 3);
      const caller = `key:${which}`;
      const limits = limitsOf[which]!;
      const expected = memory.take(caller, limits);
      const actual = await shared.take(caller, limits);
      assert.deepEqual(actual, expected, `step ${step}, ${caller}`);
      seen.add(actual.code ?? 'allowed');
      clock.advance(Math.floor(random() ** 4 * 40_000));
    }
    assert.deepEqual([...seen].sort(), ['allowed', 'rate_limited', 'temporarily_banned'], 'the walk reached every outcome');
  });

  test('the takes of one turn go as one batch and keep their order per caller', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    const clock = fakeClock();
    const memory = createLimiter({ clock, banThreshold: 30, banSeconds: 900 });
    const shared = createLimiterStore({ sql, clock, banThreshold: 30, banSeconds: 900 });
    const callers = Array.from({ length: 150 }, (_, i) => `ip:10.0.0.${i % 4}`);
    const expected = callers.map((caller) => memory.take(caller, { perMinute: 30, perDay: 1_000 }));
    const actual = await Promise.all(callers.map((caller) => shared.take(caller, { perMinute: 30, perDay: 1_000 })));
    assert.deepEqual(actual, expected);
  });

  test('three instances on one database give a free key exactly 60 requests a minute, also concurrently', async (t) => {
    const { url } = await openTestDatabase(t, cluster());
    const clock = fakeClock();
    const instances = await Promise.all([0, 1, 2].map(async () => {
      const { sql } = await openTestDatabase(t, cluster(), { url, poolSize: 3 });
      return createLimiterStore({ sql, clock, banThreshold: 1_000, banSeconds: 900 });
    }));
    const decisions = await Promise.all(
      Array.from({ length: 240 }, (_, i) => instances[i % 3]!.take('key:free', PLANS.free)),
    );
    assert.equal(decisions.filter((decision) => decision.allowed).length, 60);
    const remaining = decisions.filter((decision) => decision.allowed).map((decision) => Number(decision.headers['X-RateLimit-Remaining'])).sort((a, b) => a - b);
    assert.deepEqual(remaining, Array.from({ length: 60 }, (_, i) => i), 'every token was handed out once');
    clock.advance(1_000);
    const next = await Promise.all(instances.map((instance) => instance.take('key:free', PLANS.free)));
    assert.equal(next.filter((decision) => decision.allowed).length, 1, 'one second refills one token, for all instances together');
  });

  test('a ban is shared: the instance that did not see the 429s refuses too', async (t) => {
    const { url } = await openTestDatabase(t, cluster());
    const clock = fakeClock();
    const [first, second] = await Promise.all([0, 1].map(async () => {
      const { sql } = await openTestDatabase(t, cluster(), { url });
      return createLimiterStore({ sql, clock, banThreshold: 3, banSeconds: 60 });
    }));
    const limits = { perMinute: 1, perDay: 100 };
    assert.equal((await first!.take('ip:192.0.2.1', limits)).allowed, true);
    for (let i = 0; i < 2; i++) assert.equal((await first!.take('ip:192.0.2.1', limits)).code, 'rate_limited');
    assert.equal((await first!.take('ip:192.0.2.1', limits)).code, 'temporarily_banned');
    clock.advance(59_000);
    const banned = await second!.take('ip:192.0.2.1', limits);
    assert.equal(banned.code, 'temporarily_banned');
    assert.equal(banned.retryAfter, 1);
  });

  test('the idle purge deletes only callers untouched for a day', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    const clock = fakeClock();
    const limiter = createLimiterStore({ sql, clock, banThreshold: 30, banSeconds: 900 });
    await limiter.take('ip:old', PLANS.free);
    clock.advance(86_400_000);
    await limiter.take('ip:new', PLANS.free);
    assert.equal(await limiter.purgeIdle(100), 1);
    const rows = await sql<{ caller: string }[]>`SELECT caller FROM rate_limit_callers`;
    assert.deepEqual(rows.map((row) => row.caller), ['ip:new']);
  });

  test('the rows of client addresses are bounded: at the cap an idle address is forgotten, and when none can be, a new one is refused 429 and not stored', async (t) => {
    // Each forged address used to add a row, with no cap: 402 rows from one script.
    const { sql } = await openTestDatabase(t, cluster());
    const clock = fakeClock();
    const limiter = createLimiterStore({ sql, clock, banThreshold: 30, banSeconds: 900, maxAnonymousCallers: 3 });
    const addresses = async () => (await sql<{ caller: string }[]>`SELECT caller FROM rate_limit_callers WHERE caller LIKE 'ip:%' ORDER BY caller`).map((row) => row.caller);
    const counted = async () => Number((await sql<{ n: string }[]>`SELECT addresses::text AS n FROM rate_limit_address_count`)[0]!.n);
    const tight = { perMinute: 1, perDay: 1_000 };
    for (const caller of ['ip:a', 'ip:b', 'ip:c']) {
      assert.equal((await limiter.take(caller, tight)).allowed, true);
      clock.advance(10_000);
    }
    // Every tracked address has an empty minute bucket now: none may be forgotten.
    const refused = await limiter.take('ip:d', tight);
    assert.equal(refused.allowed, false);
    assert.equal(refused.code, 'rate_limited');
    assert.equal(refused.headers['Retry-After'], '60');
    assert.equal(refused.headers['X-RateLimit-Remaining'], '0');
    assert.deepEqual(await addresses(), ['ip:a', 'ip:b', 'ip:c'], 'the refused address is not stored');
    // Keys are not counted and never make room: a key is always tracked.
    assert.equal((await limiter.take('key:k', tight)).allowed, true);
    // Once a's bucket has refilled (a minute after its request) it may be forgotten for a newcomer.
    clock.advance(30_000);
    assert.equal((await limiter.take('ip:d', tight)).allowed, true);
    assert.deepEqual(await addresses(), ['ip:b', 'ip:c', 'ip:d']);
    assert.equal(await counted(), 3);
    // A banned address is never forgotten to make room.
    const ban = createLimiterStore({ sql, clock, banThreshold: 1, banSeconds: 900, maxAnonymousCallers: 3 });
    clock.advance(60_000);
    for (const caller of ['ip:b', 'ip:c', 'ip:d']) {
      await ban.take(caller, tight);
      assert.equal((await ban.take(caller, tight)).code, 'temporarily_banned');
    }
    clock.advance(120_000);
    assert.equal((await ban.take('ip:e', tight)).code, 'rate_limited');
    assert.deepEqual(await addresses(), ['ip:b', 'ip:c', 'ip:d']);
    // The purge keeps the count exact.
    clock.advance(2 * 86_400_000);
    assert.equal(await limiter.purgeIdle(100), 4);
    assert.equal(await counted(), 0);
  });

  test('a batch of many new addresses at once stays within the cap', async (t) => {
    const { sql } = await openTestDatabase(t, cluster());
    const clock = fakeClock();
    const limiter = createLimiterStore({ sql, clock, banThreshold: 30, banSeconds: 900, maxAnonymousCallers: 50 });
    const decisions = await Promise.all(Array.from({ length: 200 }, (_, i) => limiter.take(`ip:10.0.${i >> 8}.${i & 255}`, { perMinute: 60, perDay: 1_000 })));
    assert.equal(decisions.filter((decision) => decision.allowed).length, 200, 'fresh addresses are idle-evictable: all served');
    const rows = await sql<{ n: string }[]>`SELECT count(*)::text AS n FROM rate_limit_callers WHERE caller LIKE 'ip:%'`;
    assert.ok(Number(rows[0]!.n) <= 50, `${rows[0]!.n} rows`);
  });

  test('the take_tokens of migration 5 answers every batch exactly as that of migration 2 did, and leaves the same rows', async (t) => {
    // Two databases: one at version 4 (take_tokens of migration 2), one at the latest. The same
    // batches go to both: runs of one caller, limits that change within a batch, new addresses at
    // the cap, rejections, bans, and a clock that steps back.
    const [older, newer] = await Promise.all([MIGRATIONS.slice(0, 4), MIGRATIONS].map(async (migrations) => {
      const url = await cluster().createDatabase();
      const sql = await connectPostgres(url, { poolSize: 1 });
      t.after(() => sql.end({ timeout: 1 }));
      await migratePostgres(sql, migrations);
      return sql;
    }));
    let seed = 11;
    const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    const pick = <T,>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
    const callers = ['key:a', 'key:b', 'ip:1', 'ip:2', 'ip:3', 'ip:4'];
    const limits = [[2, 5], [3, 1_000], [60, 1_000], [1_000, 100_000]] as const;
    let now = 1_700_000_000_000;
    const take = (sql: PostgresSql, batch: { caller: string; pm: number; pd: number }[]) => sql`
      SELECT ord, minute_units::text, day_units::text, updated_at::text, code, retry_after
        FROM take_tokens(${sql.array(batch.map((b) => b.caller))}::text[], ${sql.array(batch.map((b) => b.pm))}::bigint[],
                         ${sql.array(batch.map((b) => b.pd))}::bigint[], ${now}::bigint, 4, 30000::bigint, 3::bigint)`;
    const state = (sql: PostgresSql) => sql`SELECT * FROM rate_limit_callers ORDER BY caller`;
    const outcomes = new Set<string>();
    for (let step = 0; step < 300; step++) {
      const size = 1 + Math.floor(random() ** 2 * 40);
      const batch = Array.from({ length: size }, () => {
        const [pm, pd] = pick(limits);
        return { caller: pick(callers), pm, pd };
      });
      // Most batches are many takes of one caller under one limit, as a busy key sends them.
      if (random() < 0.5) batch.fill(batch[0]!);
      const [expected, actual] = await Promise.all([take(older!, batch), take(newer!, batch)]);
      assert.deepEqual([...actual], [...expected], `step ${step}`);
      for (const row of expected) outcomes.add(String(row.code));
      now += random() < 0.05 ? -2_000 : Math.floor(random() ** 3 * 90_000);
    }
    assert.deepEqual([...(await state(newer!))], [...(await state(older!))]);
    assert.deepEqual([...outcomes].sort(), ['null', 'rate_limited', 'temporarily_banned'], 'every outcome was reached');
  });
});
