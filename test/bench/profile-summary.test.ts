import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pathToFileURL } from 'node:url';
import { formatProfileSummary, summariseProfile, type CpuProfile } from '../../bench/profile-summary.ts';

const root = '/srv/app';
const frame = (functionName: string, url = '', lineNumber = -1) => ({ functionName, url, lineNumber, columnNumber: 0 });

/**
 * (root) -> handle -> walk -> walk (recursion) -> leaf, and (root) -> (idle).
 * Samples, each lasting until the next: leaf 3 ms, walk(inner) 1 ms, handle 1 ms, idle 5 ms.
 */
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 6] },
    { id: 2, callFrame: frame('handle', pathToFileURL(`${root}/src/app.ts`).href, 9), children: [3] },
    { id: 3, callFrame: frame('walk', pathToFileURL(`${root}/src/tree.ts`).href, 0), children: [4] },
    { id: 4, callFrame: frame('walk', pathToFileURL(`${root}/src/tree.ts`).href, 0), children: [5] },
    { id: 5, callFrame: frame('leaf', 'node:internal/leaf', 4) },
    { id: 6, callFrame: frame('(idle)') },
  ],
  samples: [5, 5, 5, 4, 2, 6, 6, 6, 6, 6, 6],
  timeDeltas: [0, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
};

test('self time is the time of the samples taken in the function itself', () => {
  const summary = summariseProfile(profile, root);
  const byName = Object.fromEntries(summary.functions.map((fn) => [fn.functionName, fn]));
  assert.equal(byName.leaf!.selfUs, 3000);
  assert.equal(byName.walk!.selfUs, 1000);
  assert.equal(byName.handle!.selfUs, 1000);
  assert.equal(summary.idleUs, 5000);
  assert.equal(summary.busyUs, 5000);
  assert.equal(summary.functions[0]!.functionName, '(idle)');
});

test('total time counts a recursive function once per stack', () => {
  const byName = Object.fromEntries(summariseProfile(profile, root).functions.map((fn) => [fn.functionName, fn]));
  assert.equal(byName.walk!.totalUs, 4000);
  assert.equal(byName.handle!.totalUs, 5000);
});

test('locations are relative to the project and 1-based; idle and root are not listed', () => {
  const text = formatProfileSummary(summariseProfile(profile, root), 10);
  assert.match(text, /leaf\s+node:internal\/leaf:5$/m);
  assert.match(text, /walk\s+src\/tree\.ts:1$/m);
  assert.match(text, /^\s+3\s+60\.0%\s+60\.0%\s+leaf/m);
  assert.doesNotMatch(text, /\(idle\)|\(root\)/);
});
