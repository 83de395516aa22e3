/**
 * The handlers of the store's operations, by the operationId of their entry in ../operations.ts:
 * placing, listing, reading and changing orders, and the inventory. Each validates its input in
 * the contract's order; an order of another account is, to a key without `orders:manage`, an
 * order that does not exist.
 */
import { parseIfMatch, ifMatchHolds } from '../../http/if-match.ts';
import type { Reply } from '../../http/reply.ts';
import { allows } from '../../keys/scopes.ts';
import { insufficientScopeError } from '../../http/bearer.ts';
import { andThen, type MaybePromise } from '../../lib/maybe-promise.ts';
import { orderAt, transition, TRANSITIONS, type Order, type OrderChange, type OrderChangeOutcome, type OrderStatus, type OrdersStore } from '../../storage/orders.ts';
import { cutPage, decodeCursor } from '../cursor.ts';
import { fingerprintBody, parseIdempotencyKey, type IdempotentRequest } from '../idempotency.ts';
import { actorOf, type Caller } from '../../keys/caller.ts';
import { apiError } from '../errors.ts';
import type { ContextOf, Handlers } from '../operations.ts';
import { inventoryJson, orderETag, orderReply, ordersJson } from './json.ts';

export interface OrdersHandlersDeps {
  orders: Pick<OrdersStore, 'get' | 'list' | 'inventory'>;
  clock: () => number;
  /** Places an order durably (honouring its Idempotency-Key) and returns the answer (placements.ts). */
  placeOrder: (petId: bigint, caller: Caller, idempotency: IdempotentRequest | null) => Promise<Reply>;
  /** Applies a step of an order durably; resolves with its outcome once committed. */
  changeOrder: (change: OrderChange) => Promise<OrderChangeOutcome>;
}

const orderNotFound = (orderId: bigint) => apiError('order_not_found', orderId);
const preconditionFailed = () => apiError('precondition_failed', 'order');

/** The 409 of a step the contract does not allow, naming the ones it allows from `from`. */
const invalidTransition = (from: OrderStatus, to: OrderStatus) => apiError('invalid_transition', from, to, TRANSITIONS[from].map((step) => step.to));

const needsManage = () => insufficientScopeError('orders:manage', 'approve or complete an order');

/** A key with `orders:manage` sees every order; any other, only its own account's. */
const canManage = (caller: Caller) => allows(caller.scopes, 'orders:manage');
const visible = (order: Order | null, caller: Caller) => (order !== null && (order.account === caller.account || canManage(caller)) ? order : null);

/** The answer to a step once it was applied, or the error saying why it was not. */
function stepped(outcome: OrderChangeOutcome, orderId: bigint, to: OrderStatus): Reply {
  switch (outcome.kind) {
    case 'changed':
    case 'unchanged':
      return orderReply(outcome.order);
    case 'not_found':
      throw orderNotFound(orderId);
    case 'version_mismatch':
      throw preconditionFailed();
    case 'invalid_transition':
      throw invalidTransition(outcome.from, to);
    case 'forbidden':
      throw needsManage();
  }
}

/** Builds the store's handlers. */
export function createOrdersHandlers({ orders, clock, placeOrder, changeOrder }: OrdersHandlersDeps): Pick<
  Handlers,
  'placeOrder' | 'listOrders' | 'getOrder' | 'updateOrder' | 'getInventory'
> {
  /**
   * The path (400), then the order's existence and visibility (404). The order as it stands at
   * `now`: one whose hold has ended is already cancelled, whether or not the sweep has recorded it.
   */
  function target(context: ContextOf<'getOrder' | 'updateOrder'>, now: number): MaybePromise<{ orderId: bigint; order: Order }> {
    const { orderId } = context.path();
    return andThen(orders.get(orderId), (found) => {
      const order = visible(found, context.caller);
      if (order === null) throw orderNotFound(orderId);
      return { orderId, order: orderAt(order, now) };
    });
  }

  return {
    async placeOrder(context) {
      // The Idempotency-Key header is the first check of step 5, before the body is looked at.
      const key = parseIdempotencyKey(context.req.headers['idempotency-key']);
      const { value: { petId }, sent } = await context.body();
      return placeOrder(petId, context.caller, key === null ? null : { key, fingerprint: fingerprintBody(sent) });
    },

    listOrders(context) {
      const { limit, status, cursor } = context.query();
      const afterId = cursor === undefined ? 0n : decodeCursor(cursor);
      const { caller } = context;
      // One row more than asked tells whether a next page exists without a COUNT.
      return andThen(orders.list({ afterId, status, account: canManage(caller) ? null : caller.account, limit: limit + 1 }), (page) => {
        const headers = cutPage(context.operation, page, { limit, status });
        return { status: 200, body: ordersJson(page), headers };
      });
    },

    getOrder(context) {
      return andThen(target(context, clock()), ({ order }) => orderReply(order));
    },

    async updateOrder(context) {
      // One instant for the whole request: the checks here and the store's agree on the hold.
      const now = clock();
      const { orderId, order } = await target(context, now);
      const condition = parseIfMatch(context.req.headers['if-match']);
      if (condition !== null && !condition.any && !ifMatchHolds(condition, orderETag(order))) throw preconditionFailed();
      const expectedVersion = condition === null || condition.any ? null : order.version;
      const { value: { status: to } } = await context.body();
      // `{}` or the current status changes nothing: the order as it is, same ETag and updatedAt.
      if (to === undefined || to === order.status) return orderReply(order);
      const step = transition(order.status, to);
      if (step === undefined) throw invalidTransition(order.status, to);
      const { caller } = context;
      if (step.manage && !canManage(caller)) throw needsManage();
      // The store checks the transition and the version again, in the transaction that makes it.
      const outcome = await changeOrder({
        id: orderId, to, expectedVersion, manage: canManage(caller), account: canManage(caller) ? null : caller.account, now, actor: actorOf(caller),
      });
      return stepped(outcome, orderId, to);
    },

    getInventory(context) {
      // It takes no parameter: any is 400 invalid_query.
      context.query();
      return andThen(orders.inventory(), (inventory) => ({ status: 200, body: inventoryJson(inventory) }));
    },
  };
}
