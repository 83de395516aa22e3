/**
 * What the in-memory limiter has not saved yet: the callers changed since the last save, and the
 * callers forgotten whose rows must be deleted. The store reads them once a second
 * (exportChanges) instead of being written once per request; a save that fails puts them back.
 */
import { snapshot, type CallerState, type SavedCaller } from './caller-state.ts';

/** What changed since the previous `exportChanges`: callers to upsert and callers to delete. */
export interface LimiterChanges {
  saved: SavedCaller[];
  removed: string[];
}

export interface ChangeTracker {
  /** `state` changed: the next export saves it. */
  changed(state: CallerState): void;
  /** `state` left memory: the next export deletes its row, if it may have one. */
  forgotten(state: CallerState): void;
  /** `caller`, absent from memory, may have a row: the next export deletes it. */
  removedRow(caller: string): void;
  /** `state` enters memory: a row still waiting to be deleted is overwritten instead. */
  admitted(state: CallerState): void;
  /** The changes since the last export; tracking restarts empty. */
  exportChanges(now: number): LimiterChanges;
  /** Puts back changes that could not be saved; `find` gives a caller still in memory. */
  requeue(changes: LimiterChanges, find: (caller: string) => CallerState | undefined): void;
}

export function createChangeTracker(): ChangeTracker {
  const dirty = new Set<CallerState>();
  const removed = new Set<string>();
  const changed = (state: CallerState) => {
    if (!state.dirty) {
      state.dirty = true;
      dirty.add(state);
    }
  };
  return {
    changed,
    forgotten(state) {
      if (state.dirty) {
        state.dirty = false;
        dirty.delete(state);
      }
      if (state.persisted) removed.add(state.caller);
    },
    removedRow: (caller) => void removed.add(caller),
    admitted(state) {
      if (removed.delete(state.caller)) state.persisted = true;
    },
    exportChanges(now) {
      const saved: SavedCaller[] = [];
      for (const state of dirty) {
        saved.push(snapshot(state, now));
        state.dirty = false;
        state.persisted = true;
      }
      dirty.clear();
      const gone = [...removed];
      removed.clear();
      return { saved, removed: gone };
    },
    requeue(changes, find) {
      for (const caller of [...changes.removed, ...changes.saved.map((saved) => saved.caller)]) {
        const state = find(caller);
        if (state === undefined) {
          // Whether or not its row was written, deleting it is right: absent means full.
          removed.add(caller);
        } else {
          state.persisted = true;
          changed(state);
        }
      }
    },
  };
}
