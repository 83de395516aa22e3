/**
 * An order as every storage engine stores it (the rules of orders are orders.ts's). Apart, so
 * that pets.ts may name an order (an expired hold frees its pet) without importing the rules of
 * orders, which import pets.
 */
/** Where an order stands. */
export const ORDER_STATUSES = ['placed', 'approved', 'completed', 'cancelled'] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export interface Order {
  id: number;
  petId: bigint;
  account: string;
  status: OrderStatus;
  /** Milliseconds since the epoch. */
  placedAt: number;
  updatedAt: number;
  /** While placed: when the hold ends (ms since the epoch); null in every other status. */
  expiresAt: number | null;
  /** 1 when placed; every change adds 1 (the ETag). */
  version: number;
}

