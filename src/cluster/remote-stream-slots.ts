/**
 * A worker's caps on event streams (WORKERS above 1): the streams of every worker are counted in
 * the primary thread, so that 5 per key and 1,000 per instance hold for the instance, not per
 * worker. Opening a stream waits for one round trip to the primary; closing one is a message.
 */
import type { StreamRefusal, StreamSlots } from '../limits/stream-slots.ts';
import type { WorkerMessage } from './protocol.ts';
import { createReplies } from './replies.ts';

export interface RemoteStreamSlots extends StreamSlots {
  acquire(keyId: string): Promise<StreamRefusal | null>;
  /** The primary's answer to request `id`. */
  answered(id: number, refusal: StreamRefusal | null): void;
}

/** Slots that the primary counts, asked through `post`; its answers come back through `answered`. */
export function createRemoteStreamSlots(post: (message: WorkerMessage) => void): RemoteStreamSlots {
  const replies = createReplies<StreamRefusal | null>();
  return {
    acquire(keyId) {
      return replies.ask((id) => post({ type: 'stream_acquire', id, keyId }));
    },
    release(keyId) {
      post({ type: 'stream_release', keyId });
    },
    answered: replies.answer,
  };
}
