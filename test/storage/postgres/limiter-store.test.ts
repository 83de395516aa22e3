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
});
