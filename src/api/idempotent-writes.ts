/**
 * The way of a write that carries an Idempotency-Key (createPet, placeOrder, createWebhook):
 * answered from its record when it was already made, refused while it is being made, and
 * remembered in the same transaction as what it made when it succeeds. Only the operation's own
 * success is remembered: a request refused before the operation ran never gets here, and a failed
 * write rolls back its record with it, so a retry can still succeed.
 *
 * The record keeps what the write made, not an answer (storage/idempotency.ts): a replay is built
 * by the operation's own `again`, the function that built its first 201, so the two are the same
 * status, headers and body. A record written by an earlier version kept the answer, which is
 * replayed as it was kept.
 */
import type { ApiError } from '../http/api-error.ts';
import { apiError } from './errors.ts';
import type { Reply } from '../http/reply.ts';
import type { MaybePromise } from '../lib/maybe-promise.ts';
import type { IdempotencyConflict, IdempotencyRecord } from '../storage/idempotency.ts';

/** The steps of one idempotent write, over its store, and its answers. */
export interface IdempotentSteps<R, T> {
  /** The live record of the key at `now`, if the request was already made. */
  lookup(now: number): MaybePromise<IdempotencyRecord<T> | null>;
  /** The write, with its record; resolves with its result, or the conflict its key met meanwhile. */
  submit(now: number): Promise<R | IdempotencyConflict<T>>;
  /** The answer to the write just made (its 201, or why not). */
  answer(result: R): Reply;
  /** The 201 of what a record keeps (`answer` of the same thing, without its side effects): the replay. */
  again(made: T): Reply;
}

/** Runs idempotent writes for one process (or worker thread); `replayed` is told of each replay. */
export function createIdempotentWrites({ clock, replayed }: { clock: () => number; replayed(): void }) {
  // Keys whose request is between its lookup and its answer, in this process. With one writer on
  // the database that is all there is; with several (PostgreSQL instances, SQLite WORKERS) the
  // store also checks the key in the batch's transaction and reports a conflict.
  const inFlight = new Set<string>();

  /** The answer to a request with an Idempotency-Key: `slot` names the key (its API key and operation). */
  return async function write<R, T>(slot: string, fingerprint: string, steps: IdempotentSteps<R, T>): Promise<Reply> {
    // The check and the claim are one synchronous step, before anything is awaited: a second
    // request with the key, on this process, is refused here for as long as the first is
    // anywhere between its lookup and its answer, and never reaches a batch beside it.
    if (inFlight.has(slot)) throw inFlightError();
    inFlight.add(slot);
    try {
      const now = clock();
      const found = steps.lookup(now);
      // Await only a real promise (PostgreSQL): SQLite answers at once, for nothing.
      const record = found instanceof Promise ? await found : found;
      if (record) return replayOrRefuse(record, fingerprint, steps.again, replayed);
      const result = await steps.submit(now);
      if (!isConflict(result)) return steps.answer(result);
      // Another instance took the key between our lookup and our commit.
      if (result.conflict === 'in_flight') throw inFlightError();
      return replayOrRefuse(result.record, fingerprint, steps.again, replayed);
    } finally {
      inFlight.delete(slot);
    }
  };
}

function isConflict<R, T>(result: R | IdempotencyConflict<T>): result is IdempotencyConflict<T> {
  return typeof result === 'object' && result !== null && 'conflict' in result;
}

function inFlightError(): ApiError {
  return apiError('idempotency_key_in_flight');
}

/** The first response again for the same body; 422 for another body under the same key. */
function replayOrRefuse<T>(record: IdempotencyRecord<T>, fingerprint: string, again: (made: T) => Reply, replayed: () => void): Reply {
  if (record.fingerprint !== fingerprint) {
    throw apiError('idempotency_key_reused');
  }
  replayed();
  const first = 'made' in record ? again(record.made) : record.response;
  return { status: first.status, body: first.body, headers: { ...first.headers, 'Idempotent-Replayed': 'true' } };
}
