/**
 * Fail fast while PostgreSQL cannot be reached, recover at once when it can (contract 1.1,
 * "Faults"). The driver alone did neither: while it reconnects it queues every query, and its
 * back-off between attempts grows to 20 s, so after the first seconds of an outage every request
 * hung (13 s was seen, /healthz included), and after PostgreSQL came back /healthz hung 4 to 8 s
 * more while connections waited out their back-off.
 *
 * The pool the stores use is a stand-in for the driver's, in one of two states:
 * - up: every call goes to the driver, bounded by CALL_TIMEOUT_MS. A call that fails to connect
 *   (refused, timed out, "the database system is shutting down") or runs out of time turns the
 *   state to down.
 * - down: every call fails at once with DatabaseUnavailableError (503 with Retry-After), without
 *   touching the driver. The pool that failed is destroyed, so no query it had queued runs later,
 *   after its request was already answered 503. A fresh pool is asked `SELECT 1` every
 *   PROBE_INTERVAL_MS (one probe at a time, bounded like a call), or, for a list of hosts, each
 *   host whether it is a primary (`probe`); the first answer turns the state back to up, with a
 *   fresh pool opened on the primary the probe found.
 */
import { DatabaseUnavailableError } from '../errors.ts';
import type { PostgresSql } from './driver.ts';

/** Longest a database call of a request (or a chore) may take: then 503, and PostgreSQL is checked. */
export const CALL_TIMEOUT_MS = 1_000;
/** How often a down instance asks PostgreSQL whether it is back. */
export const PROBE_INTERVAL_MS = 250;

/**
 * Codes of a connection that could not be opened: PostgreSQL is stopped, restarting, unreachable
 * or refusing. A failure on an open connection (57P01 when PostgreSQL shuts down, a reset) is not
 * one: a read is sent once more on a fresh connection (database.ts), whose failure then tells.
 * 08P01 is how PgBouncer answers while it cannot reach PostgreSQL ("server conn crashed?", "server
 * login has been failing"); meanwhile it holds every other query until it can, so waiting for a
 * timeout would hold each request 1 s: the pool it holds them in is dropped instead.
 */
const CONNECT_FAILURES = new Set([
  'ECONNREFUSED', 'CONNECT_TIMEOUT', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
  '57P03', '08001', '08004', '08006', '08P01',
]);

/**
 * Codes of a server that is no longer the primary, for a list of hosts, whose probe can find the
 * one that is: 25006, a write refused by a standby; CONNECTION_DESTROYED, a connection the driver
 * closed at its start because the server was in recovery (a pool opened on one host of a list
 * asks for a primary, database.ts). Both happen after a switchover, when the old primary comes
 * back as a standby before the instance noticed it had gone. With one host there is nowhere else
 * to go: the failure is passed on.
 */
const NOT_PRIMARY = new Set(['25006', 'CONNECTION_DESTROYED']);

export interface Timers {
  set(callback: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const REAL_TIMERS: Timers = {
  set: (callback, ms) => setTimeout(callback, ms).unref(),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface AvailabilityOptions<S> {
  /** A fresh pool of the driver's, on `server` if given: the first, and one after each failure. */
  open: (server?: S) => PostgresSql;
  /** The first pool, already open (main.ts migrated through it); default `open(server)`. */
  initial?: PostgresSql;
  /** The server the first pool is on, when `probe` names servers. */
  server?: S;
  /**
   * How a down instance asks whether PostgreSQL is back, and where: it resolves with the server to
   * open the next pool on. Default `SELECT 1` on a fresh pool, which is then the next pool.
   */
  probe?: (() => Promise<S>) | null;
  callTimeoutMs?: number;
  probeIntervalMs?: number;
  timers?: Timers;
  /** Told of each change of state: false with the reason it went down, true once it is back. */
  changed?: (up: boolean, reason: string | null) => void;
}

export interface Availability {
  /** The pool for the stores: the driver's interface, with the states above. */
  sql: PostgresSql;
  isUp(): boolean;
  /** Counts the changes to up: an answer older than the last one says nothing about now. */
  generation(): number;
  /** Stops probing and ends the current pool (pending queries get `timeoutSeconds`). */
  end(options?: { timeout?: number }): Promise<void>;
}

/** Wraps the driver's pools; see the file comment. */
export function watchAvailability<S>(options: AvailabilityOptions<S>): Availability {
  const { open, probe: find = null, callTimeoutMs = CALL_TIMEOUT_MS, probeIntervalMs = PROBE_INTERVAL_MS, timers = REAL_TIMERS, changed = () => {} } = options;
  let server = options.server;
  let current = options.initial ?? open(server);
  let up = true;
  let reason = 'unreachable';
  let generation = 0;
  let probing = false;
  let ended = false;
  let probeTimer: unknown = null;

  /** Drops `pool` (if it is still the current one) for a fresh one; whatever it had queued fails now. */
  function replace(pool: PostgresSql): void {
    if (pool !== current || ended) return;
    current = open(server);
    pool.end({ timeout: 0 }).catch(() => {});
  }

  function goDown(pool: PostgresSql, why: string): void {
    if (pool !== current || !up || ended) return;
    up = false;
    reason = why;
    changed(false, why);
    replace(pool);
    scheduleProbe(0);
  }

  function scheduleProbe(ms: number): void {
    if (ended || up || probing || probeTimer !== null) return;
    probeTimer = timers.set(() => {
      probeTimer = null;
      probe();
    }, ms);
  }

  function probe(): void {
    if (ended || up || probing) return;
    probing = true;
    const pool = current;
    bounded(pool, () => (find ? find().then((found) => ({ found })) : pool`SELECT 1`.then(() => null))).then(
      (answer) => {
        probing = false;
        if (ended || pool !== current) return;
        if (answer !== null) {
          // The pool opened while down was never used: the next one is on the primary found.
          server = answer.found;
          current = open(server);
          pool.end({ timeout: 0 }).catch(() => {});
        }
        up = true;
        generation++;
        changed(true, null);
      },
      (error: unknown) => {
        probing = false;
        // A probe that ran out of time may still sit in the driver's queue: start afresh.
        if ((error as DatabaseUnavailableError).reason === 'timeout') replace(pool);
        scheduleProbe(probeIntervalMs);
      },
    );
  }

  /** `work` on `pool`, failed with 'timeout' after callTimeoutMs. */
  function bounded<T>(pool: PostgresSql, work: () => PromiseLike<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const timer = timers.set(() => {
        // An answer that arrived in this same turn of the event loop is taken, not refused.
        setImmediate(() => {
          if (settled) return;
          settled = true;
          reject(new DatabaseUnavailableError('timeout'));
        });
      }, callTimeoutMs);
      let started: PromiseLike<T>;
      try {
        started = work();
      } catch (error) {
        timers.clear(timer);
        reject(error);
        return;
      }
      Promise.resolve(started).then(
        (value) => {
          timers.clear(timer);
          if (settled) return;
          settled = true;
          resolve(value);
        },
        (error: unknown) => {
          timers.clear(timer);
          if (settled) return;
          settled = true;
          reject(error);
        },
      );
    });
  }

  /** A call of the stores: refused at once while down, else bounded and watched. */
  function call<T>(work: (pool: PostgresSql) => PromiseLike<T>): Promise<T> {
    if (ended) return work(current) as Promise<T>;
    if (!up) return Promise.reject(new DatabaseUnavailableError(reason));
    const pool = current;
    return bounded(pool, () => work(pool)).catch((error: unknown) => {
      const code = error instanceof DatabaseUnavailableError ? error.reason : (error as { code?: unknown } | null)?.code;
      if (typeof code === 'string' && (code === 'timeout' || CONNECT_FAILURES.has(code) || (find !== null && NOT_PRIMARY.has(code)))) goDown(pool, code);
      throw error;
    });
  }

  const sql = new Proxy(current, {
    apply: (_target, _this, args: unknown[]) => call((pool) => (pool as unknown as (...a: unknown[]) => PromiseLike<unknown>)(...args)),
    get: (_target, property) => {
      if (property === 'unsafe' || property === 'begin') {
        return (...args: unknown[]) => call((pool) => (pool[property] as (...a: unknown[]) => PromiseLike<unknown>)(...args));
      }
      if (property === 'end') return end;
      const value = Reflect.get(current, property) as unknown;
      return typeof value === 'function' ? value.bind(current) : value;
    },
  });

  function end(endOptions: { timeout?: number } = {}): Promise<void> {
    ended = true;
    if (probeTimer !== null) timers.clear(probeTimer);
    probeTimer = null;
    return current.end(endOptions);
  }

  return { sql, isUp: () => up, generation: () => generation, end };
}
