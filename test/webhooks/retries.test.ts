/**
 * The retry and disable rules, on an injected clock: each retry is due the schedule's wait after
 * the failure before it, the attempt after the last wait is the last, and an endpoint is disabled
 * once every attempt has failed for five days, a success forgetting the failures before it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_RETRY_SCHEDULE } from '../../src/config.ts';
import { afterAttempt, afterFailure, DISABLE_AFTER_MS, maxAttempts, type EndpointHealth } from '../../src/webhooks/retries.ts';

const T0 = Date.UTC(2026, 10, 28, 12);
const HOUR = 3_600_000;

test('attempt N + 1 is due the N-th wait after attempt N failed; after the last wait\'s attempt, the delivery is abandoned', () => {
  const schedule = DEFAULT_RETRY_SCHEDULE;
  assert.equal(maxAttempts(schedule), 8);
  let failedAt = T0;
  const due: number[] = [];
  for (let attempt = 1; attempt <= 7; attempt++) {
    const next = afterFailure(schedule, attempt, failedAt);
    assert.ok('retryAt' in next, `attempt ${attempt}`);
    due.push((next.retryAt - failedAt) / 1000);
    failedAt = next.retryAt + 250; // the next attempt fails a little after it was due
  }
  assert.deepEqual(due, [5, 300, 1800, 7200, 18000, 36000, 36000]);
  assert.deepEqual(afterFailure(schedule, 8, failedAt), { abandoned: true });
  assert.deepEqual(afterFailure([1], 1, T0), { retryAt: T0 + 1000 });
  assert.deepEqual(afterFailure([1], 2, T0), { abandoned: true });
  assert.throws(() => afterFailure(schedule, 0, T0), RangeError);
});

test('an endpoint is disabled by the first failure five days or more after its first failure since its last success', () => {
  let health: EndpointHealth = { failingSince: null };
  const first = afterAttempt(health, false, T0);
  assert.deepEqual(first, { failingSince: T0, disable: false });
  health = first;
  for (let at = T0 + HOUR; at < T0 + DISABLE_AFTER_MS; at += HOUR) {
    const next = afterAttempt(health, false, at);
    assert.deepEqual(next, { failingSince: T0, disable: false }, `${(at - T0) / HOUR} h`);
    health = next;
  }
  assert.deepEqual(afterAttempt(health, false, T0 + DISABLE_AFTER_MS - 1), { failingSince: T0, disable: false });
  assert.deepEqual(afterAttempt(health, false, T0 + DISABLE_AFTER_MS), { failingSince: T0, disable: true });
});

test('one success forgets every failure before it: the five days count again from the next failure', () => {
  const failing = { failingSince: T0 };
  assert.deepEqual(afterAttempt(failing, true, T0 + 4 * 24 * HOUR), { failingSince: null, disable: false });
  const again = afterAttempt({ failingSince: null }, false, T0 + 4 * 24 * HOUR + 1);
  assert.deepEqual(again, { failingSince: T0 + 4 * 24 * HOUR + 1, disable: false });
  assert.equal(afterAttempt(again, false, T0 + 6 * 24 * HOUR).disable, false, 'two days of failures only');
});

test('an endpoint that fails every attempt of every delivery, one event an hour, is disabled five days after its first failure, not before', () => {
  // Deliveries of one event an hour, each retried on the default schedule: attempts at many
  // times, all failing. The endpoint's health sees them in time order.
  const attempts: number[] = [];
  for (let event = 0; event < 24 * 6; event++) {
    let at = T0 + event * HOUR;
    for (let attempt = 1; ; attempt++) {
      attempts.push(at);
      const next = afterFailure(DEFAULT_RETRY_SCHEDULE, attempt, at);
      if (!('retryAt' in next)) break;
      at = next.retryAt;
    }
  }
  attempts.sort((a, b) => a - b);
  let health: EndpointHealth = { failingSince: null };
  let disabledAt: number | null = null;
  for (const at of attempts) {
    const next = afterAttempt(health, false, at);
    health = next;
    if (next.disable) {
      disabledAt = at;
      break;
    }
  }
  assert.equal(disabledAt, T0 + DISABLE_AFTER_MS, 'the first attempt at five days exactly (an event\'s first attempt falls on it)');
});
