import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { DatabaseSync } from 'node:sqlite';
import { openDatabase } from '../../../src/storage/sqlite/database.ts';
import { createLimiter } from '../../../src/limits/limiter.ts';
import type { LimiterOptions } from '../../../src/limits/limiter.ts';
import { createLimiterPersistence, createLimiterStore } from '../../../src/storage/sqlite/limiter-store.ts';
import type { LimiterStore } from '../../../src/storage/sqlite/limiter-store.ts';
import { ANONYMOUS_LIMITS } from '../../../src/limits/plans.ts';

const FREE = ANONYMOUS_LIMITS;
const START = Date.UTC(2025, 0, 1);
const DAY = 86_400_000;

/**
 * One database and one fake clock shared by successive server "processes": `start()` builds a
 * fresh limiter from what the database holds, as main.ts does at boot.
 */
function setup(options: Partial<LimiterOptions> = {}) {
  let now = START;
  const db = openDatabase(':memory:');
  const store = createLimiterStore(db);
  function start(storeOverride: LimiterStore = store) {
    const limiter = createLimiter({ clock: () => now, banThreshold: 30, banSeconds: 900, ...options });
    const persistence = createLimiterPersistence({ limiter, store: storeOverride });
    persistence.load();
    return { limiter, persistence };
  }
  return {
    db,
    store,
    start,
    advance(ms: number) {
      now += ms;
    },
  };
}

function callersIn(db: DatabaseSync): string[] {
  return db
    .prepare('SELECT caller FROM rate_limit_callers ORDER BY caller')
    .all()
    .map((row) => row.caller as string);
}

test('an exhausted caller is still rejected after a restart', () => {
  const { start } = setup();
  const first = start();
  for (let i = 0; i < 60; i++) first.limiter.take('ip:1', FREE);
  first.persistence.flush();

  const second = start();
  const decision = second.limiter.take('ip:1', FREE);
  assert.equal(decision.code, 'rate_limited');
  assert.equal(decision.retryAfter, 1);
  assert.equal(decision.headers['RateLimit'], '"minute";r=0;t=60, "day";r=940;t=5184');
});

test('a restart never hands out a fresh daily quota', () => {
  const { start, advance } = setup();
  const limits = { perMinute: 60, perDay: 100 };
  const first = start();
  for (let minute = 0; minute < 2; minute++) {
    for (let i = 0; i < 50; i++) first.limiter.take('key:a', limits);
    advance(60_000);
  }
  first.persistence.flush();

  const second = start();
  // 100 spent, 120 s * 100/86400 s = 0.1389 regained: a whole token is 0.8611 * 864 s = 744 s away.
  const decision = second.limiter.take('key:a', limits);
  assert.equal(decision.code, 'rate_limited');
  assert.equal(decision.retryAfter, 744);
});

test('time that passed while the server was down refills the buckets', () => {
  const { start, advance } = setup();
  const first = start();
  for (let i = 0; i < 60; i++) first.limiter.take('ip:1', FREE);
  first.persistence.flush();
  advance(30_000);

  const second = start();
  for (let i = 0; i < 30; i++) assert.equal(second.limiter.take('ip:1', FREE).allowed, true, `request ${i}`);
  assert.equal(second.limiter.take('ip:1', FREE).allowed, false);
});

test('fractional tokens survive the round trip exactly', () => {
  const { start, advance } = setup();
  const limits = { perMinute: 7, perDay: 1000 };
  const first = start();
  for (let i = 0; i < 7; i++) first.limiter.take('key:a', limits);
  advance(300);
  const before = first.limiter.take('key:a', limits).headers;
  first.persistence.flush();

  const second = start();
  const after = second.limiter.take('key:a', limits).headers;
  assert.equal(before['RateLimit'], '"minute";r=0;t=60, "day";r=993;t=605');
  // Same instant, so the answer must be exactly what the first process would have given.
  assert.deepEqual(after, first.limiter.take('key:a', limits).headers);
});

test('a ban survives a restart, and so does its doubling', () => {
  const { start, advance } = setup({ banThreshold: 3, banSeconds: 10 });
  const first = start();
  for (let i = 0; i < 60; i++) first.limiter.take('ip:1', FREE);
  for (let i = 0; i < 3; i++) first.limiter.take('ip:1', FREE);
  first.persistence.flush();
  advance(4000);

  const second = start();
  let decision = second.limiter.take('ip:1', FREE);
  assert.equal(decision.code, 'temporarily_banned');
  assert.equal(decision.retryAfter, 6);
  advance(6000);
  decision = second.limiter.take('ip:1', FREE);
  while (decision.allowed) decision = second.limiter.take('ip:1', FREE);
  second.limiter.take('ip:1', FREE);
  second.persistence.flush();

  const third = start();
  decision = third.limiter.take('ip:1', FREE);
  assert.equal(decision.code, 'temporarily_banned');
  assert.equal(decision.retryAfter, 20, 'the second ban doubles across restarts');
});

test('429s counted before a restart still count towards a ban', () => {
  const { start } = setup({ banThreshold: 3, banSeconds: 10 });
  const first = start();
  for (let i = 0; i < 62; i++) first.limiter.take('ip:1', FREE);
  first.persistence.flush();

  const second = start();
  assert.equal(second.limiter.take('ip:1', FREE).code, 'temporarily_banned');
});

test('a crash between flushes loses at most what happened since the last flush', () => {
  const { start } = setup();
  const first = start();
  for (let i = 0; i < 10; i++) first.limiter.take('ip:1', FREE);
  first.persistence.flush();
  for (let i = 0; i < 20; i++) first.limiter.take('ip:1', FREE);
  first.limiter.take('ip:2', FREE);
  // Crash: no final flush.

  const second = start();
  for (let i = 0; i < 50; i++) assert.equal(second.limiter.take('ip:1', FREE).allowed, true, `request ${i}`);
  assert.equal(second.limiter.take('ip:1', FREE).allowed, false, 'the 10 flushed requests still count');
  assert.equal(second.limiter.take('ip:2', FREE).headers['X-RateLimit-Remaining'], '59');
});

test('a flush writes only what changed since the previous one', () => {
  const { start } = setup();
  const { limiter, persistence } = start();
  assert.equal(persistence.flush(), 0);
  limiter.take('ip:1', FREE);
  limiter.take('ip:1', FREE);
  limiter.take('ip:2', FREE);
  assert.equal(persistence.flush(), 2);
  assert.equal(persistence.flush(), 0);
  limiter.take('ip:2', FREE);
  assert.equal(persistence.flush(), 1);
});

test('callers that are forgotten are deleted from the table', () => {
  const { db, start, advance } = setup();
  const { limiter, persistence } = start();
  limiter.take('ip:1', FREE);
  limiter.take('ip:2', FREE);
  persistence.flush();
  assert.deepEqual(callersIn(db), ['ip:1', 'ip:2']);
  advance(DAY);
  limiter.take('ip:3', FREE); // the sweep drops ip:1 and ip:2, full again
  persistence.flush();
  assert.deepEqual(callersIn(db), ['ip:3']);
});

test('rows that are full by the time of a restart are not loaded, and are deleted', () => {
  const { db, start, advance } = setup();
  const first = start();
  first.limiter.take('ip:1', FREE);
  first.persistence.flush();
  advance(DAY);

  const second = start();
  assert.equal(second.limiter.size(), 0);
  second.persistence.flush();
  assert.deepEqual(callersIn(db), []);
});

test('a failed save keeps its changes for the next flush', () => {
  const { db, store, start } = setup();
  let failures = 1;
  const flaky: LimiterStore = {
    load: () => store.load(),
    save(changes) {
      if (failures-- > 0) throw new Error('disk full');
      store.save(changes);
    },
  };
  const { limiter, persistence } = start(flaky);
  limiter.take('ip:1', FREE);
  assert.throws(() => persistence.flush(), /disk full/);
  assert.equal(persistence.flush(), 1);
  assert.deepEqual(callersIn(db), ['ip:1']);
});

test('a save is one transaction: a bad row leaves the table as it was', () => {
  const { db, store } = setup();
  const caller = {
    caller: 'ip:1',
    perMinute: 60,
    perDay: 1000,
    minuteTokens: 59,
    dayTokens: 999,
    updatedAt: START,
    bannedUntil: 0,
    banCount: 0,
    recentRejections: [],
  };
  store.save({ saved: [caller], removed: [] });
  assert.throws(() =>
    store.save({ saved: [{ ...caller, caller: 'ip:2' }, { ...caller, caller: 'ip:3', perMinute: 0 }], removed: ['ip:1'] }),
  );
  assert.deepEqual(callersIn(db), ['ip:1']);
  assert.equal(db.isTransaction, false);
});

test('the store returns what it saved, least recently updated first', () => {
  const { store } = setup();
  const older = {
    caller: 'ip:2',
    perMinute: 60,
    perDay: 1000,
    minuteTokens: 0.5,
    dayTokens: 940.25,
    updatedAt: START,
    bannedUntil: START + 900_000,
    banCount: 1,
    recentRejections: [START - 1000, START],
  };
  const newer = { ...older, caller: 'ip:1', updatedAt: START + 1, bannedUntil: 0, banCount: 0, recentRejections: [] };
  store.save({ saved: [newer, older], removed: [] });
  assert.deepEqual(store.load(), [older, newer]);
});

test('a key\'s saved row is neither deleted nor rewritten to full by a flood of addresses', () => {
  const { db, start, advance } = setup({ maxAnonymousCallers: 100 });
  const { limiter, persistence } = start();
  const enterprise = { perMinute: 1_000, perDay: 300 };
  for (let i = 0; i < 298; i++) limiter.take('key:spent', enterprise);
  persistence.flush();
  for (let i = 0; i < 1_000; i++) {
    limiter.take(`ip:10.0.${i >> 8}.${i & 255}`, FREE);
    if (i % 100 === 0) {
      advance(1);
      persistence.flush();
    }
  }
  persistence.flush();
  const row = db.prepare("SELECT day_tokens FROM rate_limit_callers WHERE caller = 'key:spent'").get() as { day_tokens: number } | undefined;
  assert.ok(row !== undefined, 'the row is still there');
  assert.ok(row.day_tokens < 3, `day_tokens ${row.day_tokens}`);
  assert.ok(callersIn(db).length <= 101, 'addresses stay within the cap in the table too');
});
