/**
 * Placing orders and moving them, durably: like pets' creates and changes, the placements (and
 * the steps) validated during one event-loop turn are written in one transaction by group commit,
 * and each is answered once that transaction is durable, as its own unit of success or failure.
 * A placement with an Idempotency-Key takes the way of every idempotent write
 * (../idempotent-writes.ts); its only stored outcome is the 201 (a 404 or a 409 is not remembered:
 * the pet may become available later).
 */
import type { Reply } from '../../http/reply.ts';
import { createGroupCommit } from '../../lib/group-commit.ts';
import type { IdempotencyConflict } from '../../storage/idempotency.ts';
import type { Order, OrderChange, OrderChangeOutcome, OrderPlacement, OrdersStore, OrderStatus, PlacementResult } from '../../storage/orders.ts';
import type { IdempotentRequest } from '../idempotency.ts';
import { apiError } from '../errors.ts';
import { createIdempotentWrites } from '../idempotent-writes.ts';
import { actorOf, type Caller } from '../../keys/caller.ts';
import { allows } from '../../keys/scopes.ts';
import { DEFAULT_HOLD_SECONDS, DEFAULT_MAX_OPEN_ORDERS } from '../../config.ts';
import { placed } from './json.ts';
import { reportingEvents, type EventsObserver } from '../events/observer.ts';

/** What the order paths report, for the metrics (src/ops/metrics.ts). */
export interface OrdersObserver {
  /** An order reached `status` (placed, approved, completed or cancelled). */
  orderReached(status: OrderStatus): void;
  /** A placement was answered from its Idempotency-Key record. */
  idempotentReplayed(): void;
  /** Orders whose holds had ended were cancelled by the service (a write's, or the sweep's). */
  ordersExpired(count: number): void;
}

const NO_OBSERVER: OrdersObserver = { orderReached() {}, idempotentReplayed() {}, ordersExpired() {} };


export interface OrderWritesOptions {
  orders: Pick<OrdersStore, 'placeMany' | 'changeMany' | 'findIdempotencyRecord'>;
  clock: () => number;
  groupCommit?: boolean;
  /** See GroupCommitOptions.schedule (tests flush batches by hand). */
  schedule?: (flush: () => void) => void;
  /** Batches of a kind out at once (GroupCommitOptions.maxInFlight); default the path's own. */
  maxInFlight?: number;
  observer?: OrdersObserver & Partial<EventsObserver>;
  /** How long a placed order holds its pet (`ORDER_HOLD_SECONDS`). */
  holdSeconds?: number;
  /** Open orders an account may have (`MAX_OPEN_ORDERS_PER_ACCOUNT`); keys with `orders:manage` are not capped. */
  maxOpenOrders?: number;
}


/** The write paths of orders: `place` answers a placement, `change` applies a step. */
export function createOrderWrites({
  orders, clock, groupCommit = true, schedule, maxInFlight, observer = NO_OBSERVER, holdSeconds = DEFAULT_HOLD_SECONDS, maxOpenOrders = DEFAULT_MAX_OPEN_ORDERS,
}: OrderWritesOptions) {
  const placements = createGroupCommit<OrderPlacement, PlacementResult>({
    commit: reportingEvents('placeOrders', (batch: readonly OrderPlacement[]) => orders.placeMany(batch), observer),
    enabled: groupCommit,
    maxInFlight: maxInFlight ?? 2,
    ...(schedule ? { schedule } : {}),
  });
  const changes = createGroupCommit<OrderChange, OrderChangeOutcome>({
    commit: reportingEvents('changeOrders', (batch: readonly OrderChange[]) => orders.changeMany(batch), observer),
    enabled: groupCommit,
    ...(maxInFlight !== undefined ? { maxInFlight } : {}),
    ...(schedule ? { schedule } : {}),
  });
  const write = createIdempotentWrites({ clock, replayed: () => observer.idempotentReplayed() });

  /** The answer to a placement once made: 201, or why the pet could not be ordered. */
  function answer(petId: bigint) {
    return (result: Exclude<PlacementResult, IdempotencyConflict<Order>>): Reply => {
      if (result.expired !== undefined) observer.ordersExpired(result.expired.length);
      if (result.kind === 'pet_not_found') throw apiError('pet_not_found', petId);
      if (result.kind === 'pet_not_available') throw apiError('pet_not_available', petId, result.status);
      if (result.kind === 'too_many_open_orders') throw apiError('too_many_open_orders', result.limit);
      observer.orderReached('placed');
      return placed(result.order);
    };
  }

  return {
    place(petId: bigint, caller: Caller, idempotency: IdempotentRequest | null): Promise<Reply> {
      // Every open order of the account counts, whoever placed it; staff are never refused.
      const maxOpen = allows(caller.scopes, 'orders:manage') ? null : maxOpenOrders;
      const placement = (now: number): OrderPlacement => ({ petId, account: caller.account, now, expiresAt: now + holdSeconds * 1000, maxOpen, actor: actorOf(caller) });
      if (idempotency === null) {
        return placements.submit(placement(clock())).then((result) => answer(petId)(result as Exclude<PlacementResult, IdempotencyConflict<Order>>));
      }
      const { key, fingerprint } = idempotency;
      return write(`placeOrder ${caller.id} ${key}`, fingerprint, {
        lookup: (now) => orders.findIdempotencyRecord(caller.id, key, now),
        submit: (now) => placements.submit({
          ...placement(now),
          idempotency: { apiKeyId: caller.id, key, fingerprint, createdAt: now },
        }),
        answer: answer(petId),
        again: placed,
      });
    },

    async change(change: OrderChange): Promise<OrderChangeOutcome> {
      const outcome = await changes.submit(change);
      if (outcome.expired !== undefined) observer.ordersExpired(outcome.expired.length);
      if (outcome.kind === 'changed') observer.orderReached(outcome.order.status);
      return outcome;
    },
  };
}
