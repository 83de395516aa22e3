/**
 * Persistence of the rate limiter (contract: "Bucket state and bans survive a restart ... state
 * lags the truth by at most 5 s").
 *
 * The limiter stays in memory; `flush` writes the callers that changed since the previous flush
 * in one transaction, once a second. A crash loses at most the last second of counting, which
 * is within the contract's 5 s, and costs one commit per second instead of one per request.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { Limiter, LimiterChanges, SavedCaller } from '../../limits/limiter.ts';
import type { MaybePromise } from '../../lib/maybe-promise.ts';
import { transaction } from './database.ts';

export interface LimiterStore {
  /** Every saved caller, least recently updated first (the order `Limiter.restore` expects). */
  load(): SavedCaller[];
  /**
   * Upserts `changes.saved` and deletes `changes.removed`, in one transaction: at once on this
   * connection, or later through the writer thread (writer/executor.ts).
   */
  save(changes: LimiterChanges): MaybePromise<void>;
}

interface CallerRow {
  caller: string;
  per_minute: number;
  per_day: number;
  minute_tokens: number;
  day_tokens: number;
  updated_at: number;
  banned_until: number;
  ban_count: number;
  recent_rejections: string;
}

/** The SQL side of the limiter, on a database migrated by `openDatabase`; `save` through `write` when given. */
export function createLimiterStore(db: DatabaseSync, write?: (changes: LimiterChanges) => MaybePromise<void>): LimiterStore {
  const selectAll = db.prepare(
    `SELECT caller, per_minute, per_day, minute_tokens, day_tokens, updated_at, banned_until, ban_count,
            recent_rejections
       FROM rate_limit_callers
      ORDER BY updated_at, caller`,
  );
  const save = write ?? ownTransaction(db, limiterRows(db));
  return {
    load() {
      return (selectAll.all() as unknown as CallerRow[]).map((row) => ({
        caller: row.caller,
        perMinute: row.per_minute,
        perDay: row.per_day,
        minuteTokens: row.minute_tokens,
        dayTokens: row.day_tokens,
        updatedAt: row.updated_at,
        bannedUntil: row.banned_until,
        banCount: row.ban_count,
        recentRejections: parseTimes(row.recent_rejections),
      }));
    },
    save,
  };
}

/**
 * A save in a transaction of its own. IMMEDIATE takes the write lock up front, so busy_timeout
 * applies instead of a mid-way SQLITE_BUSY; and a flush never nests inside someone else's
 * transaction unnoticed.
 */
function ownTransaction(db: DatabaseSync, rows: (changes: LimiterChanges) => void): (changes: LimiterChanges) => void {
  return (changes) => transaction(db, () => rows(changes));
}

/**
 * Writes the limiter's changes inside the caller's transaction (the writer thread's group, or
 * the transaction of `save` on a connection that makes its own writes).
 */
export function limiterRows(db: DatabaseSync): (changes: LimiterChanges) => void {
  const upsert = db.prepare(
    `INSERT INTO rate_limit_callers
            (caller, per_minute, per_day, minute_tokens, day_tokens, updated_at, banned_until, ban_count,
             recent_rejections)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (caller) DO UPDATE SET
            per_minute = excluded.per_minute, per_day = excluded.per_day,
            minute_tokens = excluded.minute_tokens, day_tokens = excluded.day_tokens,
            updated_at = excluded.updated_at, banned_until = excluded.banned_until,
            ban_count = excluded.ban_count, recent_rejections = excluded.recent_rejections`,
  );
  const remove = db.prepare('DELETE FROM rate_limit_callers WHERE caller = ?');
  return (changes) => {
    // Deletes first: a caller listed in both (after a requeue) must end up saved.
    for (const caller of changes.removed) remove.run(caller);
    for (const saved of changes.saved) {
      upsert.run(
        saved.caller,
        saved.perMinute,
        saved.perDay,
        saved.minuteTokens,
        saved.dayTokens,
        saved.updatedAt,
        saved.bannedUntil,
        saved.banCount,
        JSON.stringify(saved.recentRejections),
      );
    }
  };
}

/** Reads the JSON list of times; anything else means no recent rejections rather than a crash at boot. */
function parseTimes(text: string): number[] {
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) ? value.filter((time): time is number => Number.isFinite(time)) : [];
  } catch {
    return [];
  }
}

export interface LimiterPersistence {
  /** Restores the saved state into the limiter; call once at start. Returns the callers read. */
  load(): number;
  /**
   * Saves what changed since the previous flush; call every second (src/service/chores.ts) and once
   * at shutdown. Returns the rows written or deleted, once saved (later, through the writer
   * thread). On a database error the changes are kept for the next flush and the error is thrown
   * (or the promise rejected) for the caller to log.
   */
  flush(): MaybePromise<number>;
}

/** Connects a limiter to its store (storage/sqlite/stores.ts wires them). */
export function createLimiterPersistence(parts: { limiter: Limiter; store: LimiterStore }): LimiterPersistence {
  const { limiter, store } = parts;
  return {
    load() {
      const saved = store.load();
      limiter.restore(saved);
      return saved.length;
    },
    flush() {
      const changes = limiter.exportChanges();
      const count = changes.saved.length + changes.removed.length;
      if (count === 0) return 0;
      const failed = (error: unknown): never => {
        limiter.requeue(changes);
        throw error;
      };
      let saved: MaybePromise<void>;
      try {
        saved = store.save(changes);
      } catch (error) {
        return failed(error);
      }
      return saved instanceof Promise ? saved.then(() => count, failed) : count;
    },
  };
}
