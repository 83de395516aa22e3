/**
 * Events serialised by hand, in the interface's field order, `data` rendered by the very
 * functions that render a pet and an order elsewhere in the API.
 */
import type { StoredEvent } from '../../storage/events.ts';
import { orderJson } from '../orders/json.ts';
import { petJson } from '../pets/json.ts';

/** Who reads the feed: what decides whether an event's actor is shown to them. */
export interface EventReader {
  account: string;
  /** Holds `orders:manage`: sees every actor. */
  manage: boolean;
}

/**
 * `{"id":..,"type":..,"occurredAt":..,"actor":..,"data":..}`. The actor is null to a reader who is
 * neither of the actor's account nor holds `orders:manage`, so that a pet's event never tells one
 * adopter who ordered it.
 */
export function eventJson(event: StoredEvent, reader: EventReader): string {
  const { actor, subject } = event;
  const shown = actor !== null && (reader.manage || actor.account === reader.account)
    ? `{"account":${JSON.stringify(actor.account)},"keyId":${JSON.stringify(actor.keyId)}}`
    : 'null';
  const data = subject.kind === 'pet' ? petJson(subject.pet) : subject.kind === 'order' ? orderJson(subject.order) : `{"id":${subject.id}}`;
  return `{"id":${event.id},"type":"${event.type}","occurredAt":"${new Date(event.occurredAt).toISOString()}","actor":${shown},"data":${data}}`;
}

/** A JSON array of events. */
export function eventsJson(events: readonly StoredEvent[], reader: EventReader): string {
  return `[${events.map((event) => eventJson(event, reader)).join(',')}]`;
}
