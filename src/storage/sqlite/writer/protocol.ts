/**
 * The messages between the threads that serve requests and the writer thread. Each request
 * thread (the single process, each worker of WORKERS, and the primary for the limiter's saves)
 * has a MessagePort of its own to the writer; everything on it is structured-cloned plain data,
 * typed per operation (`WriteMessage<Op>`, `WriteOutcomes<Op>`): each operation says how its items
 * cross (`CARRIERS`), and one without a way across does not compile.
 *
 * Two things do not clone and are carried another way: the function that builds the response an
 * Idempotency-Key record remembers (the writer thread is given the API's, by operation: `Responders`),
 * and errors, whose SQLite result code the error mapping needs (sent as their fields and made
 * again on the other side).
 */
import type { MessagePort } from 'node:worker_threads';
import { isItemFailure, ItemFailure, type ItemOutcome } from '../../../lib/item-outcome.ts';
import type { LimiterChanges } from '../../../limits/limiter.ts';
import type { IdempotencyWrite, StoredResponse } from '../../idempotency.ts';
import type { Order, OrderChange, OrderPlacement } from '../../orders.ts';
import type { Pet, PetChange, PetCreation } from '../../pets.ts';
import type { Responders } from '../../stores.ts';
import type { CreatedWebhook, WebhookChange, WebhookCreation } from '../../webhooks.ts';
import type { WriteItem, WriteOp, WriteRequest, WriteResult } from './executor.ts';

/** What the shared memory of one writer holds: its journal and its publication (data-version.ts). */
export interface WriterMemory {
  journal: SharedArrayBuffer;
  publication: SharedArrayBuffer;
}

/** An Idempotency-Key record as it crosses threads: without its `respond`, which does not clone. */
export type SentRecord = Omit<IdempotencyWrite<never>, 'respond'>;

/** An item that may carry a record, as it crosses threads. */
type WithSentRecord<T extends { idempotency?: IdempotencyWrite<never> }> = Omit<T, 'idempotency'> & { idempotency?: SentRecord };

/** Each operation's item as it crosses threads: a new operation must say how it is sent. */
interface SentItems {
  insertPets: WithSentRecord<PetCreation>;
  changePets: PetChange;
  placeOrders: WithSentRecord<OrderPlacement>;
  changeOrders: OrderChange;
  expireOrders: WriteItem<'expireOrders'>;
  saveLimiter: LimiterChanges;
  purgeEvents: WriteItem<'purgeEvents'>;
  purgeRecords: WriteItem<'purgeRecords'>;
  createWebhooks: WithSentRecord<WebhookCreation>;
  changeWebhooks: WebhookChange;
  removeWebhooks: WriteItem<'removeWebhooks'>;
  claimDeliveries: WriteItem<'claimDeliveries'>;
  recordAttempts: WriteItem<'recordAttempts'>;
  releaseDeliveries: WriteItem<'releaseDeliveries'>;
}
export type SentItem<Op extends WriteOp> = SentItems[Op];

/** A request thread to the writer: one batch of one operation, a message type per operation. */
export type WriteMessage<Op extends WriteOp = WriteOp> = { [K in Op]: { id: number; op: K; items: readonly SentItem<K>[] } }[Op];

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

/** How the items of one operation cross threads, each way. */
interface Carrier<Op extends WriteOp> {
  send(items: readonly WriteItem<Op>[]): readonly SentItem<Op>[];
  /** The items as the writer runs them: each record given back the `respond` of its operation. */
  receive(items: readonly SentItem<Op>[], responders: Responders): readonly WriteItem<Op>[];
}

/** Items without a record cross as they are. */
const asTheyAre = <T>(): { send(items: readonly T[]): readonly T[]; receive(items: readonly T[]): readonly T[] } => ({ send: (items) => items, receive: (items) => items });

/** A record without its `respond` (a function); given back the responder of its operation on the other side. */
function withoutRespond<T extends { idempotency?: IdempotencyWrite<M> }, M>(item: T): WithSentRecord<T> {
  if (item.idempotency === undefined) return item;
  const { respond: _respond, ...record } = item.idempotency;
  return { ...item, idempotency: record };
}

function withRespond<T extends { idempotency?: IdempotencyWrite<M> }, M>(item: WithSentRecord<T>, respond: (made: M) => StoredResponse): T {
  return (item.idempotency === undefined ? item : { ...item, idempotency: { ...item.idempotency, respond } }) as T;
}

/** Every operation's way across: a new operation without one does not compile. */
const CARRIERS: { [Op in WriteOp]: Carrier<Op> } = {
  insertPets: {
    send: (items) => items.map((item) => withoutRespond<PetCreation, Pet>(item)),
    receive: (items, responders) => items.map((item) => withRespond<PetCreation, Pet>(item, responders.createPet)),
  },
  placeOrders: {
    send: (items) => items.map((item) => withoutRespond<OrderPlacement, Order>(item)),
    receive: (items, responders) => items.map((item) => withRespond<OrderPlacement, Order>(item, responders.placeOrder)),
  },
  changePets: asTheyAre<PetChange>(),
  changeOrders: asTheyAre<OrderChange>(),
  expireOrders: asTheyAre<WriteItem<'expireOrders'>>(),
  saveLimiter: asTheyAre<LimiterChanges>(),
  purgeEvents: asTheyAre<WriteItem<'purgeEvents'>>(),
  purgeRecords: asTheyAre<WriteItem<'purgeRecords'>>(),
  createWebhooks: {
    send: (items) => items.map((item) => withoutRespond<WebhookCreation, CreatedWebhook>(item)),
    receive: (items, responders) => items.map((item) => withRespond<WebhookCreation, CreatedWebhook>(item, responders.createWebhook)),
  },
  changeWebhooks: asTheyAre<WebhookChange>(),
  removeWebhooks: asTheyAre<WriteItem<'removeWebhooks'>>(),
  claimDeliveries: asTheyAre<WriteItem<'claimDeliveries'>>(),
  recordAttempts: asTheyAre<WriteItem<'recordAttempts'>>(),
  releaseDeliveries: asTheyAre<WriteItem<'releaseDeliveries'>>(),
};

/** A batch as it is sent to the writer. */
export function messageOf<Op extends WriteOp>(id: number, op: Op, items: readonly WriteItem<Op>[]): WriteMessage<Op> {
  const carrier: Carrier<Op> = CARRIERS[op];
  return { id, op, items: carrier.send(items) } as WriteMessage<Op>;
}

/** A batch as the writer runs it. */
export function requestOf<Op extends WriteOp>(message: WriteMessage<Op>, responders: Responders): WriteRequest<Op> {
  const carrier: Carrier<Op> = CARRIERS[message.op];
  return { op: message.op, items: carrier.receive(message.items, responders) };
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
