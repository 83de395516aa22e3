/**
 * Where the inline writer's `fdatasync` of the WAL runs: on the event loop while the disk syncs
 * quickly, in libuv's thread pool while it does not.
 *
 * On the event loop, a sync holds every request for as long as the disk takes, and a group is
 * answered as soon as it returns. In the pool, the loop serves reads meanwhile, but a group is
 * answered only about two turns after its commit (the sync ends during the next turn's callbacks,
 * and the loop notices it at the poll after them), and on one core the pool's thread takes the
 * same core from the loop anyway. Measured on one core, with syncs of 0.3 to 0.4 ms, the loop was
 * the better place: durable creates 1.05 to 1.18 times as many, the 90/10 create mix about as
 * many, its p99 a quarter to a half lower (docs/making-it-faster.md). A slow disk turns that
 * round: a sync of several milliseconds on the loop would hold every read for that long, once a
 * turn. Hence the rule: a sync goes on the loop while the typical sync made there, the median of
 * the last RECENT_SYNCS, took less than QUICK_SYNC_MS, and to the pool otherwise; while they go to
 * the pool, every PROBE_EVERY-th is made on the loop again, timed, to see whether the disk has
 * become quicker.
 *
 * The median, not an average: a virtual machine's disk that syncs in 0.4 ms had single syncs of 2
 * to 5 ms about once a second under the create mix (and, rarely, of tens of milliseconds). No rule
 * can foresee such a sync, and an average of the last four, which one of them pushed over the
 * threshold, sent the next PROBE_EVERY syncs to the pool, where each group waits two turns: a
 * tenth to two fifths of the syncs went there, for nothing. A median moves only when most of the
 * recent syncs were slow, as they are on a disk that has become slow, after three of them.
 *
 * Either way the sync starts after the commit of every group it answers, so what decision 0023
 * says of durability holds unchanged (docs/decisions/0023-inline-writer-on-one-core.md).
 */

// Not `import ... from 'node:fs'`: its ES-module view loads what a start does not use (http/access-log.ts).
const { fdatasync, fdatasyncSync } = process.getBuiltinModule('node:fs');

/** Syncs the file of a descriptor's data to the disk, then calls `done` (at once, when it ran on the calling thread). */
export type DataSync = (fd: number, done: (error: Error | null) => void) => void;

/**
 * A typical sync on the loop under this many milliseconds keeps the syncs there. Syncs of 0.3 to
 * 0.4 ms were measured better there. The millisecond is a judgement, not a measurement (no slower
 * disk was at hand): about a third of a create's wait in the pool under the mix (two turns, 3 to
 * 6 ms), which every read would pay instead, once a turn.
 */
export const QUICK_SYNC_MS = 1;
/** While the syncs go to the pool, one in this many is made on the loop to time the disk again. */
export const PROBE_EVERY = 64;
/** How many of the last syncs on the loop the typical one is the median of (odd, so that it is one of them). */
export const RECENT_SYNCS = 5;

export interface WalSyncOptions {
  /** `fdatasync` on the calling thread; throws as node:fs does. */
  onLoop?: (fd: number) => void;
  /** `fdatasync` in libuv's thread pool. */
  inPool?: DataSync;
  /** A monotonic clock, in milliseconds, to time the syncs on the loop. */
  now?: () => number;
}

/** A DataSync that chooses, for each sync, between the event loop and the thread pool (see above). */
export function createWalSync({ onLoop = fdatasyncSync, inPool = fdatasync, now = performance.now.bind(performance) }: WalSyncOptions = {}): DataSync {
  const recent = createRecentSyncs();
  let inPoolSince = 0;
  return (fd, done) => {
    const slow = recent.typical() >= QUICK_SYNC_MS;
    const probing = slow && ++inPoolSince % PROBE_EVERY === 0;
    if (slow && !probing) {
      inPool(fd, done);
      return;
    }
    const started = now();
    try {
      onLoop(fd);
    } catch (error) {
      done(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    // A probe starts afresh: the slow syncs it follows are what it is to check.
    recent.add(now() - started, probing);
    if (recent.typical() < QUICK_SYNC_MS) inPoolSince = 0;
    done(null);
  };
}

/** The times of the last RECENT_SYNCS syncs on the loop (none yet: 0), and their median. */
function createRecentSyncs(): { add(ms: number, alone: boolean): void; typical(): number } {
  const times = new Array<number>(RECENT_SYNCS).fill(0);
  let next = 0;
  let median = 0;
  return {
    /** Keeps `ms` in place of the oldest; `alone`: in place of them all. */
    add(ms, alone) {
      if (alone) times.fill(ms);
      else times[next] = ms;
      next = (next + 1) % RECENT_SYNCS;
      median = times.toSorted((a, b) => a - b)[RECENT_SYNCS >> 1]!;
    },
    typical: () => median,
  };
}
