/**
 * The messages between the primary thread and its HTTP workers (WORKERS above 1). One channel per
 * worker (its `parentPort`); everything on it is structured-cloned plain data.
 *
 * The primary owns what must be counted once for the whole port: the rate limiter (every
 * bucket and ban) and the open connections per address. Workers ask; the primary answers in
 * the order asked.
 */
import type { MessagePort } from 'node:worker_threads';
import type { Decision } from '../limits/buckets.ts';
import type { WriterMemory } from '../storage/sqlite/writer.ts';
import type { ConnectionRefusal } from '../http/connection-gate.ts';
import type { StreamRefusal } from '../limits/stream-slots.ts';
import type { EventLoopDelay, MetricsCounts } from '../ops/metrics.ts';

/** What a worker is started with (`workerData`). */
export interface WorkerStart {
  /** The worker's number, from 1; the metrics label its requests with it. */
  index: number;
  /** The port to listen on: the configured one, or the one the first worker was given for 0. */
  port: number;
}

/** How a worker reaches the writer thread (`workerData.writer`): its own port, and the writer's shared memory. */
export interface WorkerWriter {
  port: MessagePort;
  memory: WriterMemory;
}

/** A worker to the primary. */
export type WorkerMessage =
  /** The takes of one event-loop turn: caller, perMinute, perDay, caller, ... */
  | { type: 'take'; batch: number; takes: (string | number)[] }
  | { type: 'admit'; id: number; address: string }
  | { type: 'release'; address: string }
  /** A slot for an event stream of this key (the caps are the instance's). */
  | { type: 'stream_acquire'; id: number; keyId: string }
  | { type: 'stream_release'; keyId: string }
  | { type: 'listening'; address: string; port: number }
  | { type: 'listen_failed'; code: string }
  | { type: 'counts'; id: number; counts: MetricsCounts; eventLoopDelay: EventLoopDelay }
  /** Drained after a `drain`: every request answered, the database closed. */
  | { type: 'stopped' };

/** The primary to a worker. */
export type PrimaryMessage =
  | { type: 'decisions'; batch: number; decisions: Decision[] }
  | { type: 'admitted'; id: number; refusal: ConnectionRefusal | null }
  | { type: 'stream_acquired'; id: number; refusal: StreamRefusal | null }
  | { type: 'counts'; id: number }
  /** Stop accepting, finish what is in flight (shutdown). */
  | { type: 'drain' };
