/**
 * A worker's connection gate (WORKERS above 1): the open connections of every worker are counted
 * in the primary thread, so `MAX_CONNECTIONS_PER_ADDRESS` and the server's total cap hold for
 * the port, not per worker. A new connection waits, unread, for one round trip to the primary;
 * the requests on an admitted connection pay nothing.
 */
import type { ConnectionGate, ConnectionRefusal } from '../http/connection-gate.ts';
import type { WorkerMessage } from './protocol.ts';
import { createReplies } from './replies.ts';

export interface RemoteGate extends ConnectionGate {
  admit(address: string): Promise<ConnectionRefusal | null>;
  /** The primary's answer to admission `id`. */
  answered(id: number, refusal: ConnectionRefusal | null): void;
}

/** A gate that asks the primary through `post`; its answers come back through `answered`. */
export function createRemoteGate(post: (message: WorkerMessage) => void): RemoteGate {
  const replies = createReplies<ConnectionRefusal | null>();
  return {
    admit(address) {
      return replies.ask((id) => post({ type: 'admit', id, address }));
    },
    release(address) {
      post({ type: 'release', address });
    },
    answered: replies.answer,
  };
}
