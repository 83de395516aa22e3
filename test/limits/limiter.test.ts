import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createLimiter } from '../../src/limits/limiter.ts';
import type { LimiterOptions } from '../../src/limits/limiter.ts';
import { ANONYMOUS_LIMITS, PLANS } from '../../src/limits/plans.ts';

const FREE = ANONYMOUS_LIMITS;
/** A whole second, so Reset values are easy to write down. */
const START = Date.UTC(2025, 0, 1);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** A limiter on a fake clock that the test moves with `advance`. */
function setup(options: Partial<LimiterOptions> = {}) {
  let now = START;
  const limiter = createLimiter({ clock: () => now, banThreshold: 30, banSeconds: 900, ...options });
  return {
    limiter,
    advance(ms: number) {
      now += ms;
    },
    now: () => now,
  };
}

test('a fresh free caller gets exactly 60 requests at one instant, then 429 rate_limited with Retry-After 1', () => {
  const { limiter } = setup();
  for (let i = 1; i <= 60; i++) assert.equal(limiter.take('ip:1', FREE).allowed, true, `request ${i}`);
  const decision = limiter.take('ip:1', FREE);
  assert.equal(decision.allowed, false);
  assert.equal(decision.code, 'rate_limited');
  assert.equal(decision.retryAfter, 1);
  assert.equal(decision.headers['Retry-After'], '1');
});

test('after 1 s an exhausted free caller gets exactly one more request', () => {
  const { limiter, advance } = setup();
  for (let i = 0; i < 60; i++) limiter.take('ip:1', FREE);
  advance(1000);
  assert.equal(limiter.take('ip:1', FREE).allowed, true);
  assert.equal(limiter.take('ip:1', FREE).allowed, false);
});

test('a first request carries the exact headers of the contract example', () => {
  const { limiter } = setup();
  const decision = limiter.take('ip:1', FREE);
  assert.deepEqual(decision, {
    allowed: true,
    headers: {
      'X-RateLimit-Limit': '60',
      'X-RateLimit-Remaining': '59',
      'X-RateLimit-Reset': String(START / 1000 + 1),
      'RateLimit-Policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
      RateLimit: '"minute";r=59;t=1, "day";r=999;t=87',
    },
  });
});

test('a rejected request takes nothing', () => {
  const { limiter, advance } = setup({ banThreshold: 1000 });
  for (let i = 0; i < 60; i++) limiter.take('ip:1', FREE);
  for (let i = 0; i < 100; i++) assert.equal(limiter.take('ip:1', FREE).allowed, false);
  // Rejections that took tokens would leave the bucket in debt, and this would still fail.
  advance(1000);
  const decision = limiter.take('ip:1', FREE);
  assert.equal(decision.allowed, true);
  assert.equal(decision.headers['RateLimit'], '"minute";r=0;t=60, "day";r=939;t=5270');
});

test('a rejected request reports the binding bucket and no token taken', () => {
  const { limiter } = setup();
  for (let i = 0; i < 60; i++) limiter.take('ip:1', FREE);
  const decision = limiter.take('ip:1', FREE);
  assert.deepEqual(decision.headers, {
    'X-RateLimit-Limit': '60',
    'X-RateLimit-Remaining': '0',
    'X-RateLimit-Reset': String(START / 1000 + 60),
    'RateLimit-Policy': '"minute";q=60;w=60, "day";q=1000;w=86400',
    RateLimit: '"minute";r=0;t=60, "day";r=940;t=5184',
    'Retry-After': '1',
  });
});

test('the day bucket becomes binding once it has fewer whole tokens left', () => {
  const { limiter, advance } = setup();
  const limits = { perMinute: 60, perDay: 100 };
  let decision = limiter.take('key:a', limits);
  assert.equal(decision.headers['X-RateLimit-Limit'], '60', 'minute binds: 59 left against 99');
  for (let i = 1; i < 60; i++) limiter.take('key:a', limits);
  advance(60_000);
  // The minute bucket is full again; the day bucket regained 60 s * 100/86400 s = 0.0694 tokens.
  decision = limiter.take('key:a', limits);
  assert.equal(decision.headers['X-RateLimit-Limit'], '100', 'day binds: 39 left against 59');
  assert.equal(decision.headers['X-RateLimit-Remaining'], '39');
  for (let i = 0; i < 38; i++) decision = limiter.take('key:a', limits);
  // Minute: 21 left. Day: 40.0694 - 39 = 1.0694 left, full after 98.93 tokens * 864 s = 85476 s.
  assert.deepEqual(decision.headers, {
    'X-RateLimit-Limit': '100',
    'X-RateLimit-Remaining': '1',
    'X-RateLimit-Reset': String(START / 1000 + 60 + 85_476),
    'RateLimit-Policy': '"minute";q=60;w=60, "day";q=100;w=86400',
    RateLimit: '"minute";r=21;t=39, "day";r=1;t=85476',
  });
  assert.equal(limiter.take('key:a', limits).headers['X-RateLimit-Remaining'], '0');
  // 0.0694 tokens left: a whole one is (1 - 0.0694) * 864 s = 804 s away.
  decision = limiter.take('key:a', limits);
  assert.equal(decision.code, 'rate_limited');
  assert.equal(decision.retryAfter, 804);
});

test('on a tie the minute bucket is the binding one', () => {
  const { limiter } = setup();
  const decision = limiter.take('key:a', { perMinute: 100, perDay: 100 });
  assert.equal(decision.headers['X-RateLimit-Limit'], '100');
  assert.equal(decision.headers['X-RateLimit-Remaining'], '99');
  // One token of a 100/min bucket refills in 0.6 s.
  assert.equal(decision.headers['X-RateLimit-Reset'], String(START / 1000 + 1));
  assert.equal(decision.headers['RateLimit'], '"minute";r=99;t=1, "day";r=99;t=864');
});

test('Reset and t round a fractional time to full up to the next second', () => {
  const { limiter, advance } = setup();
  advance(300); // not on a whole second
  const decision = limiter.take('key:a', { perMinute: 7, perDay: 1000 });
  // One token of a 7/min bucket: 8.571 s.
  assert.equal(decision.headers['RateLimit'], '"minute";r=6;t=9, "day";r=999;t=87');
  assert.equal(decision.headers['X-RateLimit-Reset'], String(START / 1000 + 9), '0.3 s + 8.571 s');
});

test('a lowered limit clamps the tokens a caller holds; a raised one refills at the new rate', () => {
  const { limiter, advance } = setup();
  limiter.take('key:a', PLANS.pro);
  let decision = limiter.take('key:a', FREE);
  assert.equal(decision.headers['RateLimit'], '"minute";r=59;t=1, "day";r=999;t=87');
  decision = limiter.take('key:a', PLANS.pro);
  assert.equal(decision.headers['RateLimit'], '"minute";r=58;t=49, "day";r=998;t=77778');
  advance(1000);
  decision = limiter.take('key:a', PLANS.pro);
  assert.equal(decision.headers['RateLimit'], '"minute";r=62;t=48, "day";r=997;t=77785');
});

test('limits that are not positive integers are a programmer error', () => {
  const { limiter } = setup();
  assert.throws(() => limiter.take('ip:1', { perMinute: 0, perDay: 10 }), RangeError);
  assert.throws(() => limiter.take('ip:1', { perMinute: 10, perDay: Number.NaN }), RangeError);
  assert.throws(() => createLimiter({ clock: () => 0, banThreshold: 0, banSeconds: 900 }), RangeError);
  assert.throws(() => createLimiter({ clock: () => 0, banThreshold: 30, banSeconds: -1 }), RangeError);
  assert.throws(() => createLimiter({ clock: () => 0, banThreshold: 30, banSeconds: 900, maxAnonymousCallers: 0 }), RangeError);
});

/** Spends the caller's free tokens at one instant, then returns the answer to its `rejections`-th 429. */
function hammer(limiter: ReturnType<typeof setup>['limiter'], caller: string, rejections: number) {
  let decision = limiter.take(caller, FREE);
  while (decision.allowed) decision = limiter.take(caller, FREE);
  for (let i = 1; i < rejections; i++) decision = limiter.take(caller, FREE);
  return decision;
}

test('a ban starts exactly at the threshold-th 429 within 60 s', () => {
  const { limiter } = setup({ banThreshold: 3, banSeconds: 10 });
  assert.equal(hammer(limiter, 'ip:1', 2).code, 'rate_limited');
  const decision = limiter.take('ip:1', FREE);
  assert.equal(decision.allowed, false);
  assert.equal(decision.code, 'temporarily_banned');
  assert.equal(decision.retryAfter, 10);
  assert.equal(decision.headers['Retry-After'], '10');
});

test('429s spread over more than 60 s do not ban', () => {
  const { limiter, advance } = setup({ banThreshold: 3, banSeconds: 10 });
  const limits = { perMinute: 60, perDay: 1 }; // one day token per 86.4 s
  limiter.take('ip:1', limits);
  assert.equal(limiter.take('ip:1', limits).code, 'rate_limited');
  advance(59_999);
  assert.equal(limiter.take('ip:1', limits).code, 'rate_limited');
  advance(1);
  assert.equal(limiter.take('ip:1', limits).code, 'rate_limited', 'the first 429 is 60 s old');
  assert.equal(limiter.take('ip:1', limits).code, 'temporarily_banned', 'three 429s within 60 s');
});

test('a banned caller is answered temporarily_banned until the ban ends, without taking tokens', () => {
  const { limiter, advance } = setup({ banThreshold: 3, banSeconds: 10 });
  hammer(limiter, 'ip:1', 3);
  advance(500);
  let decision = limiter.take('ip:1', FREE);
  assert.equal(decision.code, 'temporarily_banned');
  assert.equal(decision.retryAfter, 10, '9.5 s rounds up');
  advance(9000);
  for (let i = 0; i < 100; i++) decision = limiter.take('ip:1', FREE);
  assert.equal(decision.code, 'temporarily_banned');
  assert.equal(decision.retryAfter, 1);
  // 9.5 s of refill, none of it spent by the answers during the ban.
  assert.equal(decision.headers['RateLimit'], '"minute";r=9;t=51, "day";r=940;t=5175');
  advance(500);
  for (let i = 0; i < 10; i++) assert.equal(limiter.take('ip:1', FREE).allowed, true);
  assert.equal(limiter.take('ip:1', FREE).code, 'rate_limited', 'answers during the ban did not count');
});

test('each later ban of the same caller doubles, up to 24 h', () => {
  const { limiter, advance } = setup({ banThreshold: 3, banSeconds: 3600 });
  const lengths: number[] = [];
  for (let ban = 0; ban < 8; ban++) {
    const decision = hammer(limiter, 'ip:1', 3);
    assert.equal(decision.code, 'temporarily_banned');
    lengths.push(decision.retryAfter!);
    advance(decision.retryAfter! * 1000);
    assert.equal(limiter.take('ip:1', FREE).allowed, true, 'the ban has ended');
    advance(60_000);
  }
  assert.deepEqual(lengths, [3600, 7200, 14_400, 28_800, 57_600, 86_400, 86_400, 86_400]);
});

test('the doubling is forgotten once 24 h pass after the last ban ended', () => {
  const { limiter, advance } = setup({ banThreshold: 3, banSeconds: 10 });
  hammer(limiter, 'ip:1', 3);
  advance(10_000);
  assert.equal(hammer(limiter, 'ip:1', 3).retryAfter, 20);
  advance(20_000 + DAY - 1);
  assert.equal(hammer(limiter, 'ip:1', 3).retryAfter, 40, 'one millisecond short of a day: still doubling');
  advance(40_000 + DAY);
  assert.equal(hammer(limiter, 'ip:1', 3).retryAfter, 10);
});

test('callers are limited independently', () => {
  const { limiter } = setup();
  hammer(limiter, 'ip:1', 1);
  assert.equal(limiter.take('ip:2', FREE).allowed, true);
  assert.equal(limiter.take('key:1', FREE).allowed, true);
});

test('a caller whose buckets are full again is dropped from memory', () => {
  const { limiter, advance } = setup();
  limiter.take('ip:1', FREE);
  limiter.take('ip:2', FREE);
  assert.equal(limiter.size(), 2);
  advance(DAY);
  limiter.take('ip:3', FREE);
  assert.equal(limiter.size(), 1);
});

test('a caller with a ban count is kept for a day after its ban, even with full buckets', () => {
  const { limiter, advance } = setup({ banThreshold: 3, banSeconds: 10 });
  hammer(limiter, 'ip:1', 3);
  advance(10_000 + DAY - 1);
  limiter.take('ip:2', FREE);
  limiter.take('ip:2', FREE);
  assert.equal(limiter.size(), 2);
  advance(1);
  limiter.take('ip:2', FREE);
  limiter.take('ip:2', FREE);
  assert.equal(limiter.size(), 1);
});

test('a flood of a million addresses never grows memory past the cap nor frees a limited caller', () => {
  const { limiter, advance } = setup({ banThreshold: 3, banSeconds: 3600, maxAnonymousCallers: 10_000 });
  hammer(limiter, 'ip:banned', 3);
  const tight = { perMinute: 60, perDay: 5 }; // a day token every 4.8 h
  for (let i = 0; i < 5; i++) limiter.take('ip:exhausted', tight);
  assert.equal(limiter.take('ip:exhausted', tight).code, 'rate_limited');

  let largest = 0;
  for (let i = 0; i < 1_000_000; i++) {
    limiter.take(`ip:10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, FREE);
    if (i % 1000 === 0) advance(1);
    if (limiter.size() > largest) largest = limiter.size();
  }
  assert.equal(largest, 10_000);
  assert.equal(limiter.take('ip:banned', FREE).code, 'temporarily_banned');
  assert.equal(limiter.take('ip:exhausted', tight).code, 'rate_limited');
});

test('when every address slot holds a limited caller, a new address is refused with 429 and not remembered', () => {
  // It used to be answered as a fresh caller and let through: 5,000 of 5,000 requests allowed.
  const { limiter, advance } = setup({ banThreshold: 3, banSeconds: 10, maxAnonymousCallers: 2 });
  hammer(limiter, 'ip:1', 3);
  hammer(limiter, 'ip:2', 3);
  for (let i = 0; i < 5_000; i++) {
    const decision = limiter.take('ip:3', FREE);
    assert.equal(decision.allowed, false);
    assert.equal(decision.code, 'rate_limited');
    assert.equal(decision.retryAfter, 1);
    assert.equal(decision.headers['Retry-After'], '1');
    assert.equal(decision.headers['X-RateLimit-Remaining'], '0');
  }
  assert.equal(limiter.size(), 2);
  assert.equal(limiter.take('ip:1', FREE).code, 'temporarily_banned');
  assert.equal(limiter.take('ip:2', FREE).code, 'temporarily_banned');
  // Once a slot holds a caller that may go, the new address is tracked and served.
  advance(10_000);
  assert.equal(limiter.take('ip:3', FREE).allowed, true);
  assert.equal(limiter.size(), 2);
});

test('keys are never evicted: a flood of addresses leaves a partly spent key as it was', () => {
  const { limiter, advance } = setup({ banThreshold: 3, banSeconds: 3600, maxAnonymousCallers: 1_000 });
  const enterprise = { perMinute: 1_000, perDay: 300 };
  for (let i = 0; i < 298; i++) assert.equal(limiter.take('key:spent', enterprise).allowed, true);
  hammer(limiter, 'key:banned', 3);
  for (let i = 0; i < 100_100; i++) {
    limiter.take(`ip:10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, FREE);
    if (i % 1000 === 0) advance(1);
  }
  assert.ok(limiter.size() <= 1_002, `size ${limiter.size()}`);
  const spent = limiter.take('key:spent', enterprise);
  assert.match(spent.headers.RateLimit!, /"day";r=1;/);
  assert.equal(limiter.take('key:banned', FREE).code, 'temporarily_banned');
  const saved = limiter.exportChanges().saved.find((caller) => caller.caller === 'key:spent');
  assert.ok(saved !== undefined && saved.dayTokens < 2, 'the saved row is not rewritten to full');
});

test('keys do not count against the address cap, and an address flood never refuses a key', () => {
  const { limiter } = setup({ banThreshold: 3, banSeconds: 10, maxAnonymousCallers: 2 });
  hammer(limiter, 'ip:1', 3);
  hammer(limiter, 'ip:2', 3);
  for (let i = 0; i < 50; i++) assert.equal(limiter.take(`key:${i}`, FREE).allowed, true);
  assert.equal(limiter.size(), 52);
  assert.equal(limiter.take('ip:3', FREE).code, 'rate_limited');
});

test('a restore keeps every saved key whatever the address cap; addresses beyond it start afresh', () => {
  const { limiter } = setup({ maxAnonymousCallers: 3 });
  for (const caller of ['key:1', 'key:2', 'key:3', 'ip:1', 'ip:2', 'ip:3']) limiter.take(caller, FREE);
  const saved = limiter.exportChanges().saved;
  const { limiter: restarted } = setup({ maxAnonymousCallers: 1 });
  restarted.restore(saved);
  assert.equal(restarted.size(), 4);
  for (const caller of ['key:1', 'key:2', 'key:3']) assert.equal(restarted.take(caller, FREE).headers['X-RateLimit-Remaining'], '58');
  assert.deepEqual(restarted.exportChanges().removed.sort(), ['ip:1', 'ip:2']);
});

test('exportChanges returns each changed caller once, then nothing until the next change', () => {
  const { limiter } = setup();
  limiter.take('ip:1', FREE);
  limiter.take('ip:1', FREE);
  limiter.take('ip:2', FREE);
  const changes = limiter.exportChanges();
  assert.deepEqual(
    changes.saved.map((saved) => [saved.caller, saved.minuteTokens, saved.dayTokens, saved.updatedAt]),
    [
      ['ip:1', 58, 998, START],
      ['ip:2', 59, 999, START],
    ],
  );
  assert.deepEqual(changes.removed, []);
  assert.deepEqual(limiter.exportChanges(), { saved: [], removed: [] });
});

for (const kind of ['ip', 'key']) {
  // A key leaves memory this way only: once forgetting it changes no answer.
  test(`a saved ${kind} caller whose buckets are full again is forgotten and exported as removed`, () => {
    const { limiter, advance } = setup();
    limiter.take(`${kind}:1`, FREE);
    limiter.exportChanges();
    advance(DAY);
    limiter.take(`${kind}:2`, FREE);
    assert.equal(limiter.size(), 1);
    const changes = limiter.exportChanges();
    assert.deepEqual(changes.removed, [`${kind}:1`]);
    assert.deepEqual(
      changes.saved.map((saved) => saved.caller),
      [`${kind}:2`],
    );
  });
}

test('restored 429s count towards the ban, whether they filled the threshold or not', () => {
  for (const [saved, threshold] of [[2, 3], [5, 3]] as const) {
    const before = setup({ banThreshold: 10, banSeconds: 10 });
    hammer(before.limiter, 'ip:1', saved);
    const { saved: callers } = before.limiter.exportChanges();
    assert.equal(callers[0]!.recentRejections.length, saved);
    const after = setup({ banThreshold: threshold, banSeconds: 10 });
    after.limiter.restore(callers);
    // One more 429 at the same instant, within 60 s of the saved ones: the threshold-th or later.
    const decision = after.limiter.take('ip:1', FREE);
    assert.equal(decision.code, 'temporarily_banned', `${saved} saved, threshold ${threshold}`);
  }
});

test('the memory of 429s follows the 429s a caller got, not the ban threshold', () => {
  // At the allowed maximum threshold, 2,000 addresses refused once each. A ring made full on the
  // first 429 held 10,000 times (80 KB) per address: 160 MB here.
  const { limiter } = setup({ banThreshold: 10_000 });
  const limits = { perMinute: 1, perDay: 1 };
  // A full collection first, so that garbage left by earlier tests cannot hide the growth.
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < 2000; i++) {
    limiter.take(`ip:10.0.${i >> 8}.${i & 255}`, limits);
    assert.equal(limiter.take(`ip:10.0.${i >> 8}.${i & 255}`, limits).code, 'rate_limited');
  }
  gc();
  const grown = process.memoryUsage().heapUsed - before;
  assert.ok(grown < 40 * 1024 * 1024, `heap grew ${(grown / 1048576).toFixed(1)} MiB`);
  assert.equal(limiter.size(), 2000);
});

test('the idle sweep never forgets a key whose minute bucket is only partly refilled, even when its day bucket is full again', () => {
  // An enterprise key of 2 a minute and 1,000,000 a day: its day bucket refills one token every
  // 86 ms, so 30 s after two requests it is full while the minute bucket holds one token. A sweep
  // that looked at the day bucket alone forgot the key, which came back with 2 more requests.
  const { limiter, advance } = setup();
  const key = { perMinute: 2, perDay: 1_000_000 };
  assert.equal(limiter.take('key:ent', key).allowed, true);
  assert.equal(limiter.take('key:ent', key).allowed, true);
  advance(30_000);
  // Other callers' requests drive the sweep over every held caller, the key included, many times.
  for (let i = 0; i < 50; i++) limiter.take(`key:other-${i % 3}`, PLANS.pro);
  assert.equal(limiter.take('key:ent', key).allowed, true, 'the one token refilled in 30 s');
  assert.equal(limiter.take('key:ent', key).allowed, false, 'and no more');
});
