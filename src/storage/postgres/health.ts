/**
 * Whether PostgreSQL can be reached, for `GET /healthz` (contract 1.1): asked at most once per
 * second however many probes arrive, so a load balancer's checks cannot load the database.
 */
import type { Clock } from '../../clock.ts';
import type { PostgresSql } from './driver.ts';

/** How long one answer stands. */
const HEALTH_TTL_MS = 1000;

/** A check that answers from the last result while it is younger than a second. */
export function createHealthCheck(sql: PostgresSql, clock: Clock): () => boolean | Promise<boolean> {
  let checkedAt = -Infinity;
  let healthy = true;
  let pending: Promise<boolean> | null = null;
  return () => {
    if (clock() - checkedAt < HEALTH_TTL_MS) return healthy;
    // Once more on failure: after PostgreSQL restarts, a pooled connection first reports the old
    // server's shutdown (57P01), and the next query on a fresh connection succeeds.
    const ping = () => sql`SELECT 1`.then(() => true);
    pending ??= ping().catch(ping).catch(() => false).then((ok) => {
      healthy = ok;
      checkedAt = clock();
      pending = null;
      return ok;
    });
    return pending;
  };
}
