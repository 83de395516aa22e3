/** The published per-plan rate limits (users' text, "Limits"). */
export const PLANS = {
  free: { perMinute: 60, perDay: 1_000 },
  pro: { perMinute: 300, perDay: 10_000 },
  business: { perMinute: 1_000, perDay: 100_000 },
  /** Enterprise numbers are custom: each enterprise key carries its own. */
  enterprise: null,
} as const;

export type Plan = keyof typeof PLANS;

export const PLAN_NAMES = Object.keys(PLANS) as Plan[];

/** The numbers that a caller is limited by. */
export interface Limits {
  perMinute: number;
  perDay: number;
}

/** Limits of anonymous callers (no valid key): the free plan's, so that guessing keys is slow. */
export const ANONYMOUS_LIMITS: Limits = PLANS.free;

export function isPlan(value: string): value is Plan {
  return Object.hasOwn(PLANS, value);
}
