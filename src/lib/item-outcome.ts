/**
 * Each request its own unit of success or failure inside a batched write (group commit).
 *
 * A batch is one transaction, but its items do not share a fate. A conflict (an Idempotency-Key
 * already taken, a version changed meanwhile) is an ordinary result of its item, in the store's
 * own type for that write. An item whose own work failed (a constraint that validation should
 * have caught, a bug in building its answer) is rolled back alone and reported as an
 * ItemFailure, while the rest of the batch commits. Only a failure of the database itself (or of
 * the commit) fails the whole batch: the store throws, and nothing of the batch is written.
 */

/** An item of a batch that was rolled back alone because its own work failed with `error`. */
export class ItemFailure {
  readonly error: unknown;

  constructor(error: unknown) {
    this.error = error;
  }
}

/** What a batched write reports for one item: its result (a conflict included), or its own failure. */
export type ItemOutcome<R> = R | ItemFailure;

/** Whether an item's outcome is its own failure rather than a result. */
export function isItemFailure<R>(outcome: ItemOutcome<R>): outcome is ItemFailure {
  return outcome instanceof ItemFailure;
}

/**
 * The results of a batch whose items must all have succeeded (seeding, tests); throws the first
 * item's own failure instead.
 */
export function allSucceeded<R>(outcomes: readonly ItemOutcome<R>[]): R[] {
  const failure = outcomes.find(isItemFailure);
  if (failure) throw failure.error;
  return outcomes as R[];
}
