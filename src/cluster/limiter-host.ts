/**
 * The primary thread's side of the workers' questions (WORKERS above 1): the one in-memory
 * limiter of the port and the one count of open connections, answering each worker's messages
 * in the order they come. The limiter is the single process's own (same code, same persistence
 * through limiter-store.ts, flushed every second by the primary), so limits stay exact: there is
 * one owner of every bucket.
 */
import type { Limiter } from '../limits/limiter.ts';
import type { ConnectionGate } from '../http/connection-gate.ts';
import type { StreamRefusal } from '../limits/stream-slots.ts';
import type { PrimaryMessage, WorkerMessage } from './protocol.ts';

export interface LimiterHostDeps {
  limiter: Pick<Limiter, 'take'>;
  /** A synchronous gate (`createConnectionGate`) of the server's caps. */
  gate: ConnectionGate;
  /** The event streams' counts of the instance (`createStreamSlots`): synchronous too. */
  streams: { acquire(keyId: string): StreamRefusal | null; release(keyId: string): void };
}

/**
 * Answers a worker's `take`, `admit`, `release` and streams' messages through `reply`; returns false for
 * any other message (the primary's own business).
 */
export function createLimiterHost({ limiter, gate, streams }: LimiterHostDeps) {
  return function handle(message: WorkerMessage, reply: (answer: PrimaryMessage) => void): boolean {
    switch (message.type) {
      case 'take': {
        const { takes } = message;
        const decisions = [];
        for (let i = 0; i < takes.length; i += 3) {
          decisions.push(limiter.take(takes[i] as string, { perMinute: takes[i + 1] as number, perDay: takes[i + 2] as number }));
        }
        reply({ type: 'decisions', batch: message.batch, decisions });
        return true;
      }
      case 'admit': {
        const refusal = gate.admit(message.address);
        // The primary's gate is synchronous; a promise here would be a wiring mistake.
        if (refusal instanceof Promise) throw new TypeError('the primary needs a synchronous connection gate');
        reply({ type: 'admitted', id: message.id, refusal });
        return true;
      }
      case 'release':
        gate.release(message.address);
        return true;
      case 'stream_acquire':
        reply({ type: 'stream_acquired', id: message.id, refusal: streams.acquire(message.keyId) });
        return true;
      case 'stream_release':
        streams.release(message.keyId);
        return true;
      default:
        return false;
    }
  };
}
