/**
 * The way of a write that carries an Idempotency-Key (createPet, placeOrder): answered from its
 * record when it was already made, refused while it is being made, and remembered in the same
 * transaction as what it made when it succeeds. Only the operation's own success is remembered:
 * a request refused before the operation ran never gets here, and a failed write rolls back its
 * record with it, so a retry can still succeed.
 */
import type { ApiError } from '../http/api-error.ts';
import { apiError } from './errors.ts';
import type { Reply } from '../http/reply.ts';
import type { MaybePromise } from '../lib/maybe-promise.ts';
import type { IdempotencyConflict, IdempotencyRecord, StoredResponse } from '../storage/idempotency.ts';

/** The two steps of one idempotent write, over its store. */
export interface IdempotentSteps<R> {
  /** The live record of the key at `now`, if the request was already made. */
  lookup(now: number): MaybePromise<IdempotencyRecord | null>;
  /** The write, with its record; resolves with its result, or the conflict its key met meanwhile. */
  submit(now: number): Promise<R | IdempotencyConflict>;
}

/** Runs idempotent writes for one process (or worker thread); `replayed` is told of each replay. */
export function createIdempotentWrites({ clock, replayed }: { clock: () => number; replayed(): void }) {
  // Keys whose request is between its lookup and its answer, in this process. With one writer on
  // the database that is all there is; with several (PostgreSQL instances, SQLite WORKERS) the
  // store also checks the key in the batch's transaction and reports a conflict.
  const inFlight = new Set<string>();

  /** The answer to a request with an Idempotency-Key: `slot` names the key (its API key and operation). */
  return async function write<R>(slot: string, fingerprint: string, steps: IdempotentSteps<R>, answer: (result: R) => Reply): Promise<Reply> {
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
      if (record) return replayOrRefuse(record, fingerprint, replayed);
      const result = await steps.submit(now);
      if (!isConflict(result)) return answer(result);
      // Another instance took the key between our lookup and our commit.
      if (result.conflict === 'in_flight') throw inFlightError();
      return replayOrRefuse(result.record, fingerprint, replayed);
    } finally {
      inFlight.delete(slot);
    }
  };
}

function isConflict<R>(result: R | IdempotencyConflict): result is IdempotencyConflict {
  return typeof result === 'object' && result !== null && 'conflict' in result;
}

function inFlightError(): ApiError {
  return apiError('idempotency_key_in_flight');
}

/** The first response again for the same body; 422 for another body under the same key. */
function replayOrRefuse(record: IdempotencyRecord, fingerprint: string, replayed: () => void): Reply {
  if (record.fingerprint !== fingerprint) {
    throw apiError('idempotency_key_reused');
  }
  replayed();
  const { response } = record;
  return { status: response.status, body: response.body, headers: { ...response.headers, 'Idempotent-Replayed': 'true' } };
}

/** A reply as its record stores it. */
export function storedResponse(reply: Reply): StoredResponse {
  return { status: reply.status, headers: { ...reply.headers }, body: reply.body };
}
