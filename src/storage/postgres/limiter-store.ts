/**
 * The rate limiter on PostgreSQL (contract 1.1, "Limits are global"): every request takes its
 * token in the shared table `rate_limit_callers`, atomically, so that all instances together hand
 * out exactly a key's quota; bans and per-address limits are shared the same way.
 *
 * A round trip per request would cost more than the request itself, so the takes of one
 * event-loop turn leave as one call of `take_tokens` (see migrations.ts), like group commit of
 * creates: while a batch is out, new takes gather into the next one.
 *
 * Nothing is held in memory: a key's state is never evicted or reset, and an instance restart
 * changes nothing. Rows idle for a day (both buckets full again) are purged in chunks, and the
 * rows of client addresses are bounded (maxAnonymousCallers), as in memory on SQLite.
 */
import type { Clock } from '../../clock.ts';
import { assertLimits, decide, type Decision } from '../../limits/buckets.ts';
import { MAX_ANONYMOUS_CALLERS } from '../../limits/limiter.ts';
import type { Limits } from '../../limits/plans.ts';
import { createGroupCommit } from '../../lib/group-commit.ts';
import { guard } from './database.ts';
import type { PostgresSql } from './driver.ts';

export interface PostgresLimiterOptions {
  sql: PostgresSql;
  clock: Clock;
  banThreshold: number;
  banSeconds: number;
  /** Batches of takes awaited at once; default 2 (one being answered while the next gathers). */
  maxInFlight?: number;
  /**
   * Most client addresses with a row; default MAX_ANONYMOUS_CALLERS, as in memory on SQLite. At
   * the cap the least recently seen address that is neither banned nor being refused is forgotten
   * for the new one; when none can be, the new address is refused (429 rate_limited), never let
   * through unlimited. Keys are not counted.
   */
  maxAnonymousCallers?: number;
}

export interface PostgresLimiter {
  /** Counts one request of `caller` against `limits`; resolves with the shared decision. */
  take(caller: string, limits: Limits): Promise<Decision>;
  /** Deletes up to `limit` callers untouched for a day or more (full again, ban forgotten). */
  purgeIdle(limit: number): Promise<number>;
}

interface Take {
  caller: string;
  perMinute: number;
  perDay: number;
}

interface TakeRow {
  ord: number;
  minute_units: string;
  day_units: string;
  updated_at: string;
  code: 'rate_limited' | 'temporarily_banned' | null;
  retry_after: number;
}

const DAY_MS = 86_400_000;

/** The shared limiter over a migrated database. */
export function createLimiterStore({ sql, clock, banThreshold, banSeconds, maxInFlight = 2, maxAnonymousCallers = MAX_ANONYMOUS_CALLERS }: PostgresLimiterOptions): PostgresLimiter {
  const banMs = Math.round(banSeconds * 1000);

  async function commit(takes: readonly Take[]): Promise<Decision[]> {
    const now = clock();
    // Plain arrays, typed by the casts (database.ts writes them): sql.array() would type them from
    // the driver's catalog query, and a connection on which that query failed sent them as text.
    const rows = await guard(() => sql<TakeRow[]>`
      SELECT ord, minute_units::text, day_units::text, updated_at::text, code, retry_after
        FROM take_tokens(${takes.map((take) => take.caller)}::text[],
                         ${takes.map((take) => take.perMinute)}::bigint[],
                         ${takes.map((take) => take.perDay)}::bigint[],
                         ${now}::bigint, ${banThreshold}::integer, ${banMs}::bigint, ${maxAnonymousCallers}::bigint)`);
    const decisions = new Array<Decision>(takes.length);
    for (const row of rows) {
      const take = takes[row.ord - 1]!;
      // Units stay below 2^53 (per-day limits up to about 100 million), so Number is exact.
      const state = { minute: Number(row.minute_units), day: Number(row.day_units), updatedAt: Number(row.updated_at) };
      decisions[row.ord - 1] = decide(state, take.perMinute, take.perDay, row.code ?? undefined, row.retry_after);
    }
    return decisions;
  }

  const batches = createGroupCommit<Take, Decision>({ commit, maxInFlight });

  return {
    take(caller, { perMinute, perDay }) {
      assertLimits({ perMinute, perDay });
      return batches.submit({ caller, perMinute, perDay });
    },

    async purgeIdle(limit) {
      const now = clock();
      // The WHERE is checked again on each row once it is locked, so a caller that a take just
      // touched is kept.
      // The address count's lock first, as take_tokens takes it, so that the two never wait for
      // each other in a cycle (deleting an address updates the count).
      const rows = await guard(() => sql.begin(async (tx) => {
        await tx`SELECT addresses FROM rate_limit_address_count FOR UPDATE`;
        return tx`
        DELETE FROM rate_limit_callers
         WHERE caller IN (SELECT caller FROM rate_limit_callers WHERE updated_at <= ${now - DAY_MS}::bigint ORDER BY updated_at LIMIT ${limit})
           AND updated_at <= ${now - DAY_MS}::bigint
           AND banned_until + ${DAY_MS}::bigint <= ${now}::bigint`;
      }));
      return rows.count;
    },
  };
}
