/**
 * Changing and deleting pets. Like creations, the changes validated during one event-loop turn
 * are written in one transaction (one fsync) by group commit, and each is answered once that
 * transaction is durable. Inside the transaction each change is still its own statement, version
 * check included, so a batch holding two changes that expect the same version applies exactly
 * one of them, and each is its own unit of success or failure: a change whose statement fails is
 * rolled back alone and answered with its error (500), the others are committed. Only when the
 * database itself fails does every change of the batch get the error (503), none stored.
 */
import { createGroupCommit } from '../../lib/group-commit.ts';
import type { ChangeOutcome, PetChange, PetsStore } from '../../storage/pets.ts';
import type { OrdersObserver } from '../orders/placements.ts';

export interface PetChangesOptions {
  pets: Pick<PetsStore, 'changeMany'>;
  /** On by default; off commits each change alone. */
  groupCommit?: boolean;
  /** See GroupCommitOptions.schedule. */
  schedule?: (flush: () => void) => void;
  /** Batches out at once (GroupCommitOptions.maxInFlight); default the path's own. */
  maxInFlight?: number;
  /** Told of the orders a change expired first (their holds on the pet had ended), for the metrics. */
  observer?: Pick<OrdersObserver, 'ordersExpired'>;
}

/** Applies one change durably; resolves with its outcome once its batch is committed. */
export type ChangePet = (change: PetChange) => Promise<ChangeOutcome>;

/** Builds the change path over a pets store. */
export function createPetChanges({ pets, groupCommit = true, schedule, maxInFlight, observer }: PetChangesOptions): ChangePet {
  const writer = createGroupCommit<PetChange, ChangeOutcome>({
    commit: (changes) => pets.changeMany(changes),
    enabled: groupCommit,
    ...(maxInFlight !== undefined ? { maxInFlight } : {}),
    ...(schedule ? { schedule } : {}),
  });
  return async (change) => {
    const outcome = await writer.submit(change);
    if (outcome.expired !== undefined) observer?.ordersExpired(outcome.expired);
    return outcome;
  };
}
