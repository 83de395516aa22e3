/**
 * `promtool check metrics`, from Debian's `prometheus` package, run on an exposition. Outside CI
 * a machine without it skips the one test that needs it, saying how to install it; with
 * CI=true a missing promtool fails (.ci/run installs it).
 */
import type { TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

export const PROMTOOL = '/usr/bin/promtool';

/** Promtool's verdict on `text`, or null when the test was skipped for want of promtool. */
export function promtoolCheckMetrics(t: TestContext, text: string): { status: number | null; output: string } | null {
  if (!existsSync(PROMTOOL)) {
    assert.notEqual(process.env.CI, 'true', `${PROMTOOL} is missing: CI must install it (apt-get install prometheus)`);
    t.skip(`${PROMTOOL} is missing; run this test after: apt-get install prometheus`);
    return null;
  }
  const result = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
  return { status: result.status, output: `${result.stdout}${result.stderr}`.trim() };
}
