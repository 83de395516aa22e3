/**
 * Whether PostgreSQL can be reached, for `GET /healthz` (contract 1.1): asked at most once per
 * second however many probes arrive, so a load balancer's checks cannot load the database, and
 * never waited for longer than HEALTH_WAIT_MS. While the pool is down (availability.ts) the answer
 * is "no" at once; once it is back, the next check asks again rather than repeat an old "no".
 */
import type { Clock } from '../../clock.ts';
import type { PostgresSql } from './driver.ts';
import type { Availability } from './availability.ts';

/** How long one answer stands. */
export const HEALTH_TTL_MS = 1000;
/** A check that has no answer by then is "no": a load balancer's check must not hang. */
export const HEALTH_WAIT_MS = 500;

/** A check that answers from the last result while it is younger than a second. */
export function createHealthCheck(sql: PostgresSql, clock: Clock, availability?: Pick<Availability, 'isUp' | 'generation'>): () => boolean | Promise<boolean> {
  let checkedAt = -Infinity;
  let checkedGeneration = 0;
  let healthy = true;
  let pending: Promise<boolean> | null = null;
  return () => {
    if (availability !== undefined && !availability.isUp()) return false;
    const generation = availability?.generation() ?? 0;
    if (clock() - checkedAt < HEALTH_TTL_MS && (healthy || generation === checkedGeneration)) return healthy;
    // Once more on failure: after PostgreSQL restarts, a pooled connection first reports the old
    // server's shutdown (57P01), and the next query on a fresh connection succeeds.
    const ping = () => sql`SELECT 1`.then(() => true);
    pending ??= ping().catch(ping).catch(() => false).then((ok) => {
      healthy = ok;
      checkedAt = clock();
      checkedGeneration = generation;
      pending = null;
      return ok;
    });
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), HEALTH_WAIT_MS);
      timer.unref();
    });
    return Promise.race([pending, late]).finally(() => clearTimeout(timer));
  };
}
