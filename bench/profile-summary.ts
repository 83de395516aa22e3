/**
 * Where the time goes, from a V8 CPU profile (`node --cpu-prof`, `npm run bench -- --profile`):
 * the functions with the most self time, with their total (inclusive) time beside it.
 *
 *   node bench/profile-summary.ts FILE.cpuprofile [--top 25]
 *
 * Percentages are of the busy time: the samples in which the process was not idle.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';

/** The parts of the `.cpuprofile` JSON this reads (Chrome DevTools Protocol `Profiler.Profile`). */
export interface CpuProfile {
  nodes: Array<{
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
    children?: number[];
  }>;
  samples: number[];
  /** Microseconds since the previous sample (the first: since `startTime`). */
  timeDeltas: number[];
}

export interface FunctionTime {
  functionName: string;
  /** `path:line` (1-based), relative to `root` where it lies below it; '' for V8's own entries. */
  location: string;
  selfUs: number;
  /** Time in samples where this function was anywhere on the stack (recursion counted once). */
  totalUs: number;
}

export interface ProfileSummary {
  sampledUs: number;
  idleUs: number;
  busyUs: number;
  /** Every function, most self time first. */
  functions: FunctionTime[];
}

/** Adds up self and total time per function (same name and source position). */
export function summariseProfile(profile: CpuProfile, root = process.cwd()): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  // A sample lasts until the next one (as DevTools counts it); the last one gets no time.
  const selfByNode = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const duration = profile.timeDeltas[i + 1] ?? 0;
    const id = profile.samples[i]!;
    selfByNode.set(id, (selfByNode.get(id) ?? 0) + Math.max(0, duration));
  }
  const rootPrefix = pathToFileURL(root).href.replace(/\/?$/, '/');
  const keyOf = new Map<number, string>();
  const functions = new Map<string, FunctionTime>();
  for (const node of profile.nodes) {
    const { functionName, url, lineNumber, columnNumber } = node.callFrame;
    const key = `${functionName}\u0000${url}\u0000${lineNumber}\u0000${columnNumber}`;
    keyOf.set(node.id, key);
    if (!functions.has(key)) {
      const path = url.startsWith(rootPrefix) ? url.slice(rootPrefix.length) : url;
      functions.set(key, {
        functionName: functionName === '' ? '(anonymous)' : functionName,
        location: path === '' ? '' : `${path}:${lineNumber + 1}`,
        selfUs: 0,
        totalUs: 0,
      });
    }
    functions.get(key)!.selfUs += selfByNode.get(node.id) ?? 0;
  }

  // Inclusive time of every node, then credited to each function once per stack: a recursive
  // function's inner frames are skipped while an outer frame of it is on the path.
  const childIds = new Set(profile.nodes.flatMap((node) => node.children ?? []));
  const roots = profile.nodes.filter((node) => !childIds.has(node.id));
  const inclusive = new Map<number, number>();
  const onPath = new Map<string, number>();
  const visit = (id: number): number => {
    const node = byId.get(id)!;
    const key = keyOf.get(id)!;
    const depth = onPath.get(key) ?? 0;
    onPath.set(key, depth + 1);
    let time = selfByNode.get(id) ?? 0;
    for (const child of node.children ?? []) time += visit(child);
    onPath.set(key, depth);
    inclusive.set(id, time);
    if (depth === 0) functions.get(key)!.totalUs += time;
    return time;
  };
  let sampledUs = 0;
  for (const node of roots) sampledUs += visit(node.id);

  const idleUs = [...functions.values()].filter((fn) => fn.functionName === '(idle)').reduce((sum, fn) => sum + fn.selfUs, 0);
  const sorted = [...functions.values()].sort((a, b) => b.selfUs - a.selfUs);
  return { sampledUs, idleUs, busyUs: sampledUs - idleUs, functions: sorted };
}

/** The top `top` functions by self time as a text table, idle and the root left out. */
export function formatProfileSummary(summary: ProfileSummary, top = 25): string {
  const busy = summary.busyUs || 1;
  const percent = (us: number) => `${((100 * us) / busy).toFixed(1)}%`;
  const shown = summary.functions.filter((fn) => fn.functionName !== '(idle)' && fn.functionName !== '(root)').slice(0, top);
  const rows = shown.map((fn) => [(fn.selfUs / 1000).toFixed(0), percent(fn.selfUs), percent(fn.totalUs), fn.functionName, fn.location]);
  const headings = ['self ms', 'self', 'total', 'function', 'location'];
  const widths = headings.map((heading, i) => Math.max(heading.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => (i < 3 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ').trimEnd();
  return [
    `sampled ${(summary.sampledUs / 1e6).toFixed(1)} s, busy ${(summary.busyUs / 1e6).toFixed(1)} s, idle ${(summary.idleUs / 1e6).toFixed(1)} s; percentages of busy time`,
    line(headings),
    ...rows.map(line),
  ].join('\n') + '\n';
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '25' } } });
  if (positionals.length !== 1 || !/^[1-9][0-9]*$/.test(values.top)) {
    process.stderr.write('usage: node bench/profile-summary.ts FILE.cpuprofile [--top N]\n');
    process.exit(2);
  }
  const profile = JSON.parse(readFileSync(positionals[0]!, 'utf8')) as CpuProfile;
  process.stdout.write(formatProfileSummary(summariseProfile(profile), Number(values.top)));
}
