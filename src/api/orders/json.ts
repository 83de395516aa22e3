/**
 * Orders serialised by hand, in the contract's field order, with `petId`'s exact digits and the
 * instants as RFC 3339 UTC with milliseconds. Also the order's entity tag and its answers.
 */
import type { Reply } from '../../http/reply.ts';
import type { Inventory, Order } from '../../storage/orders.ts';
import { locationOf } from '../operation.ts';
import { OPERATIONS } from '../operations.ts';

/** `{"id":..,"petId":..,"account":..,"status":..,"placedAt":..,"updatedAt":..,"expiresAt":..}`. */
export function orderJson(order: Order): string {
  const expiresAt = order.expiresAt === null ? 'null' : `"${new Date(order.expiresAt).toISOString()}"`;
  return `{"id":${order.id},"petId":${order.petId},"account":${JSON.stringify(order.account)},"status":"${order.status}",` +
    `"placedAt":"${new Date(order.placedAt).toISOString()}","updatedAt":"${new Date(order.updatedAt).toISOString()}","expiresAt":${expiresAt}}`;
}

/** A JSON array of orders. */
export function ordersJson(orders: readonly Order[]): string {
  return `[${orders.map(orderJson).join(',')}]`;
}

/** The order's ETag: a strong validator made of its id and its version, like a pet's. */
export function orderETag(order: Pick<Order, 'id' | 'version'>): string {
  return `"${order.id}.${order.version}"`;
}

/** A 200 answer with the order and its ETag. */
export function orderReply(order: Order): Reply {
  return { status: 200, body: orderJson(order), headers: { ETag: orderETag(order) } };
}

/** The 201 answer of a placed order. */
export function placed(order: Order): Reply {
  return { status: 201, body: orderJson(order), headers: { Location: locationOf(OPERATIONS.placeOrder, order.id), ETag: orderETag(order) } };
}

/** `{"available":n,"pending":n,"sold":n}`. */
export function inventoryJson(inventory: Inventory): string {
  return `{"available":${inventory.available},"pending":${inventory.pending},"sold":${inventory.sold}}`;
}
