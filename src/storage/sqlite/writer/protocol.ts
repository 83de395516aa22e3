/**
 * The messages between the threads that serve requests and the writer thread. Each request
 * thread (the single process, each worker of WORKERS, and the primary for the limiter's saves)
 * has a MessagePort of its own to the writer; everything on it is structured-cloned plain data,
 * typed per operation (`WriteMessage<Op>`, `WriteOutcomes<Op>`). A write's items are data and
 * cross as they are: nothing the writer needs is a function (an Idempotency-Key record keeps what
 * its creation made, not an answer built by the API: storage/idempotency.ts), so the writer
 * thread loads no code above the storage layer.
 *
 * Errors do not clone with their fields, which the error mapping needs (SQLite's result code):
 * they are sent as those fields and made again on the other side.
 */
import type { MessagePort } from 'node:worker_threads';
import { isItemFailure, ItemFailure, type ItemOutcome } from '../../../lib/item-outcome.ts';
import type { WriteItem, WriteOp, WriteRequest, WriteResult } from './executor.ts';

/** What the shared memory of one writer holds: its journal and its publication (data-version.ts). */
export interface WriterMemory {
  journal: SharedArrayBuffer;
  publication: SharedArrayBuffer;
}

/** A request thread to the writer: one batch of one operation, a message type per operation. */
export type WriteMessage<Op extends WriteOp = WriteOp> = { [K in Op]: { id: number; op: K; items: readonly WriteItem<K>[] } }[Op];

/** An error as it crosses threads: what the error mapping and the logs read of it. */
export interface SentError {
  name: string;
  message: string;
  code?: unknown;
  errcode?: unknown;
  errstr?: unknown;
}

/** The writer's answer to a WriteMessage of `Op`: one outcome per item (failures by index, null in their place). */
export type WriteOutcomes<Op extends WriteOp = WriteOp> = { [K in Op]: { id: number; op: K; outcomes: (WriteResult<K> | null)[]; failures: [number, SentError][] } }[Op];

/** The writer's answer to a WriteMessage: its outcomes, or why nothing was written. */
export type WriteAnswer = WriteOutcomes | { id: number; error: SentError };

/** The owner of the writer thread to the writer (the thread's `parentPort`). */
export type WriterControl =
  /** A new request thread: its port. */
  | { type: 'connect'; port: MessagePort }
  /** Finish what was sent, close the connection, answer `closed`. */
  | { type: 'close' };

/** A batch as it is sent to the writer. */
export function messageOf<Op extends WriteOp>(id: number, op: Op, items: readonly WriteItem<Op>[]): WriteMessage<Op> {
  return { id, op, items } as WriteMessage<Op>;
}

/** A batch as the writer runs it. */
export function requestOf<Op extends WriteOp>(message: WriteMessage<Op>): WriteRequest<Op> {
  return { op: message.op, items: message.items } as WriteRequest<Op>;
}

/** An error as it can be sent. */
export function sendError(error: unknown): SentError {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const { code, errcode, errstr } = error as { code?: unknown; errcode?: unknown; errstr?: unknown };
  return { name: error.name, message: error.message, code, errcode, errstr };
}

/** The error again, with the fields that recognise it (`sqliteErrorOf` reads `code` and `errcode`). */
export function receivedError(sent: SentError): Error {
  const error = Object.assign(new Error(sent.message), { code: sent.code, errcode: sent.errcode, errstr: sent.errstr });
  error.name = sent.name;
  return error;
}

/** Outcomes as they can be sent: the failures apart, by index. */
export function sendOutcomes<Op extends WriteOp>(id: number, op: Op, outcomes: readonly ItemOutcome<WriteResult<Op>>[]): WriteOutcomes<Op> {
  const failures: [number, SentError][] = [];
  const sent = outcomes.map((outcome, index) => {
    if (!isItemFailure(outcome)) return outcome;
    failures.push([index, sendError(outcome.error)]);
    return null;
  });
  return { id, op, outcomes: sent, failures } as WriteOutcomes<Op>;
}

/** The outcomes again, each failure an ItemFailure. */
export function receivedOutcomes<Op extends WriteOp>(answer: WriteOutcomes<Op>): ItemOutcome<WriteResult<Op>>[] {
  const outcomes: ItemOutcome<WriteResult<Op>>[] = answer.outcomes as (WriteResult<Op> | null)[] as ItemOutcome<WriteResult<Op>>[];
  for (const [index, error] of answer.failures) outcomes[index] = new ItemFailure(receivedError(error));
  return outcomes;
}
