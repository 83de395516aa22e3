/** What the write paths report of the event log, for the metrics (src/ops/metrics.ts). */
import type { ItemOutcome } from '../../lib/item-outcome.ts';
import { andThen, type MaybePromise } from '../../lib/maybe-promise.ts';
import { eventsOfBatch, type EventType, type LoggedOp, type NewEvent } from '../../storage/events.ts';

export interface EventsObserver {
  /** A committed write recorded these events (`events_total{type}`). */
  eventsWritten(events: readonly Pick<NewEvent, 'type'>[]): void;
  /** `count` events of `type`, made where the events themselves are not at hand (the sweep). */
  eventsCounted(type: EventType, count: number): void;
}

/**
 * `commit` (a write path's batch to its store) telling `observer` the events each committed batch
 * recorded: derived from the batch's outcomes by the very function the stores append them with.
 */
export function reportingEvents<I, R>(op: LoggedOp, commit: (batch: readonly I[]) => MaybePromise<ItemOutcome<R>[]>, observer: Partial<EventsObserver> | undefined): (batch: readonly I[]) => MaybePromise<ItemOutcome<R>[]> {
  const written = observer?.eventsWritten?.bind(observer);
  if (written === undefined) return commit;
  return (batch) => andThen(commit(batch), (outcomes) => {
    written(eventsOfBatch(op, batch, outcomes));
    return outcomes;
  });
}
