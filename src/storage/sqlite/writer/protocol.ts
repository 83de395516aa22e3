/**
 * The messages between the threads that serve requests and the writer thread. Each request
 * thread (the single process, each worker of WORKERS, and the primary for the limiter's saves)
 * has a MessagePort of its own to the writer; everything on it is structured-cloned plain data.
 *
 * Two things do not clone and are carried another way: the function that builds the response an
 * Idempotency-Key record remembers (the writer thread is given the API's, by operation: `Responders`),
 * and errors, whose SQLite result code the error mapping needs (sent as their fields and made
 * again on the other side).
 */
import type { MessagePort } from 'node:worker_threads';
import { isItemFailure, ItemFailure, type ItemOutcome } from '../../../lib/item-outcome.ts';
import type { IdempotencyOperation, IdempotencyWrite, StoredResponse } from '../../idempotency.ts';
import type { Responders } from '../../stores.ts';
import type { WriteItem, WriteOp } from './executor.ts';

/** What the shared memory of one writer holds: its journal and its publication (data-version.ts). */
export interface WriterMemory {
  journal: SharedArrayBuffer;
  publication: SharedArrayBuffer;
}

/** A request thread to the writer: one batch of one operation. */
export interface WriteMessage {
  id: number;
  op: WriteOp;
  items: readonly unknown[];
}

/** An error as it crosses threads: what the error mapping and the logs read of it. */
export interface SentError {
  name: string;
  message: string;
  code?: unknown;
  errcode?: unknown;
  errstr?: unknown;
}

/** The writer's answer to a WriteMessage: one outcome per item (failures by index), or why nothing was written. */
export type WriteAnswer =
  | { id: number; outcomes: unknown[]; failures: [number, SentError][] }
  | { id: number; error: SentError };

/** The owner of the writer thread to the writer (the thread's `parentPort`). */
export type WriterControl =
  /** A new request thread: its port. */
  | { type: 'connect'; port: MessagePort }
  /** Finish what was sent, close the connection, answer `closed`. */
  | { type: 'close' };

/** The operation whose Idempotency-Key records a write's items carry. */
const RECORDED: Partial<Record<WriteOp, IdempotencyOperation>> = { insertPets: 'createPet', placeOrders: 'placeOrder' };

type Recorded = { idempotency?: IdempotencyWrite<never> };

/** The items as they can be sent: an Idempotency-Key record without its `respond`. */
export function sendableItems(op: WriteOp, items: readonly unknown[]): readonly unknown[] {
  if (RECORDED[op] === undefined) return items;
  return (items as Recorded[]).map((item) => {
    if (item.idempotency === undefined) return item;
    const { respond: _respond, ...record } = item.idempotency;
    return { ...item, idempotency: record };
  });
}

/** The items as the writer runs them: each record given back the `respond` of its operation. */
export function receivedItems<Op extends WriteOp>(op: Op, items: readonly unknown[], responders: Responders): readonly WriteItem<Op>[] {
  const operation = RECORDED[op];
  if (operation === undefined) return items as WriteItem<Op>[];
  const respond = responders[operation] as (made: never) => StoredResponse;
  return (items as Recorded[]).map((item) => (item.idempotency === undefined ? item : { ...item, idempotency: { ...item.idempotency, respond } })) as WriteItem<Op>[];
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
export function sendOutcomes(id: number, outcomes: readonly ItemOutcome<unknown>[]): WriteAnswer {
  const failures: [number, SentError][] = [];
  const sent = outcomes.map((outcome, index) => {
    if (!isItemFailure(outcome)) return outcome;
    failures.push([index, sendError(outcome.error)]);
    return null;
  });
  return { id, outcomes: sent, failures };
}

/** The outcomes again, each failure an ItemFailure. */
export function receivedOutcomes(answer: Extract<WriteAnswer, { outcomes: unknown[] }>): ItemOutcome<unknown>[] {
  const outcomes: ItemOutcome<unknown>[] = answer.outcomes;
  for (const [index, error] of answer.failures) outcomes[index] = new ItemFailure(receivedError(error));
  return outcomes;
}
