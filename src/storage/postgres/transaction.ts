/**
 * Every transaction of the service, with its outcome checked: a write is a success only once
 * PostgreSQL answered `COMMIT` to its `COMMIT`.
 *
 * PostgreSQL answers the `COMMIT` of a transaction that a failed statement aborted with the tag
 * `ROLLBACK`, not with an error, and the driver's `sql.begin` never looks at the tag: any path
 * that let such a transaction reach its commit had its writes answered as made. One did, through
 * PgBouncer in transaction pooling mode: the driver's own `commit` was a named prepared statement,
 * unknown on the server connection the transaction had been given; its failure aborted the
 * transaction, the driver prepared it again and sent it, and took the `ROLLBACK` for a success. Of
 * 200 chained updates of one pet, two were answered 200 and never committed.
 *
 * So every pool's `begin` is this one (database.ts): it sends `BEGIN`, `COMMIT` and `ROLLBACK`
 * itself, as simple queries (never prepared), and fails the transaction with
 * DatabaseUnavailableError (503, nothing acknowledged) unless its `COMMIT` committed.
 */
import { DatabaseUnavailableError } from '../errors.ts';
import type { PostgresSql, PostgresTransaction } from './driver.ts';

/** The reason of a transaction whose COMMIT answered ROLLBACK: something in it had failed. */
export const ROLLED_BACK = 'rolled_back';

/** Driver codes of a connection that is gone: nothing more may be sent on it, nor may it be handed back. */
const CONNECTION_GONE = new Set(['CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT']);

/** Whether `error` leaves the connection unusable: lost, or closed by PostgreSQL after a FATAL error. */
function connectionGone(error: unknown): boolean {
  const { code, severity } = (error ?? {}) as { code?: unknown; severity?: unknown };
  return (typeof code === 'string' && CONNECTION_GONE.has(code)) || severity === 'FATAL' || severity === 'PANIC';
}

/**
 * Runs `work` in a transaction on a connection of `pool` reserved for it, and resolves with its
 * result once the transaction committed. If `work` throws, the transaction is rolled back and the
 * error thrown. The connection goes back to the pool only once it is known to be out of any
 * transaction; one that failed is left to the driver, which drops it when it closes.
 */
export async function checkedTransaction<R>(pool: PostgresSql, work: (tx: PostgresTransaction) => Promise<R>): Promise<R> {
  const tx = await pool.reserve();
  let idle = false;
  try {
    await tx.unsafe('BEGIN');
    let result: R;
    try {
      result = await work(tx);
    } catch (error) {
      if (!connectionGone(error)) await tx.unsafe('ROLLBACK').then(() => (idle = true), () => {});
      throw error;
    }
    const { command } = await tx.unsafe('COMMIT');
    idle = true;
    if (command !== 'COMMIT') throw new DatabaseUnavailableError(ROLLED_BACK);
    return result;
  } finally {
    // Synchronously after its last answer: the connection cannot have closed in between.
    if (idle) tx.release();
  }
}

/**
 * Runs `work` in a savepoint of `tx`: if it throws, only what it did is rolled back (`ROLLBACK
 * TO`), and its error is thrown. The savepoint is not released (a round trip each; the driver did
 * not either): each item's savepoint sits inside the previous one until the transaction ends.
 */
export async function savepoint<R>(tx: Pick<PostgresSql, 'unsafe'>, work: () => Promise<R>): Promise<R> {
  await tx.unsafe('SAVEPOINT item');
  try {
    return await work();
  } catch (error) {
    if (!connectionGone(error)) await tx.unsafe('ROLLBACK TO SAVEPOINT item');
    throw error;
  }
}
