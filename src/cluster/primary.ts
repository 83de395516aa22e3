/**
 * The primary thread of WORKERS above 1: one process that uses every core of one machine over
 * one SQLite file, with every guarantee of the single process.
 *
 * - N worker threads (worker.ts) each run the whole HTTP service on their own connection to the
 *   file, which only reads, and listen on the same HOST:PORT with SO_REUSEPORT; the kernel
 *   spreads new connections over them. Every write of every worker goes to the one writer thread
 *   (src/storage/sqlite/writer/thread.ts), which main.ts started: no two connections ever wait
 *   for each other's write lock. Reads stay exact across workers: the writer journals what each
 *   write touched in memory every worker shares, and publishes each commit before answering it,
 *   so the next request on any worker drops exactly the cached answers the write touched; a
 *   commit by any other connection drops them all.
 * - This thread holds what must be counted once for the port: the in-memory rate limiter (the
 *   one of the stores main.ts opened, saved by the same chores as in one process) and the open
 *   connections per address (limiter-host.ts). Workers ask it, a batch per event-loop turn.
 * - A worker that dies takes the whole process down (main.ts exits 1 with the line `failed`
 *   resolves with): no service silently runs on fewer cores than configured.
 */
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import type { Config } from '../config.ts';
import { createConnectionGate } from '../http/connection-gate.ts';
import { SERVER_LIMITS } from '../http/server.ts';
import type { Limiter } from '../limits/limiter.ts';
import type { WriterHost } from '../storage/sqlite/writer.ts';
import { listen, listenFailure } from '../service/serving.ts';
import { createLimiterHost } from './limiter-host.ts';
import { createStreamSlots } from '../limits/stream-slots.ts';
import { createWorkerPool, type WorkerCounts } from './worker-pool.ts';

export interface PrimaryDeps {
  config: Config;
  /** The port's one limiter: in memory, restored and saved by main.ts. */
  limiter: Pick<Limiter, 'take'>;
  /** The module every worker thread runs (main.ts). */
  entry: URL;
  /** The writer thread, which gives each worker a port of its own. */
  writer: Pick<WriterHost, 'connect' | 'memory'>;
}

export interface Primary {
  /** Starts every worker on HOST:PORT; resolves with the address, or rejects with the one line saying why not. */
  start(): Promise<AddressInfo>;
  /** Every worker's metrics now, for a scrape. */
  gatherCounts(): Promise<WorkerCounts[]>;
  /** Drains every worker as one process drains; resolves once the last one has stopped. */
  drain(): Promise<void>;
  /** Resolves, with one line saying which and why, once a worker fails. */
  failed: Promise<string>;
}

/** The primary, its workers not started yet (so that the metrics listener can come up first). */
export function createPrimary({ config, limiter, entry, writer }: PrimaryDeps): Primary {
  const failure = Promise.withResolvers<string>();
  const stopped = Promise.withResolvers<void>();
  const host = createLimiterHost({
    limiter,
    streams: createStreamSlots(),
    gate: createConnectionGate({ maxConnections: SERVER_LIMITS.maxConnections, maxConnectionsPerAddress: config.maxConnectionsPerAddress }),
  });
  const pool = createWorkerPool({ config, entry, writer, host, failed: failure.resolve, stopped: stopped.resolve });
  /** `step`, unless a worker failed meanwhile: then the failure's line is thrown. */
  const unlessFailed = <T>(step: Promise<T>) => Promise.race([step, failure.promise.then((line) => Promise.reject(new Error(line)))]);

  return {
    async start() {
      // A fixed port is first bound once without SO_REUSEPORT: if anything holds it (even another
      // server with WORKERS, which the kernel would otherwise let share it) the start fails as a
      // single process's would, instead of splitting the traffic with a stranger.
      if (config.port !== 0) {
        const probe = createNetServer();
        await listen(probe as never, { port: config.port, host: config.host }).catch((error: Error & { code?: string }) => {
          throw new Error(listenFailure(config.host, config.port, error.code ?? error.name));
        });
        await new Promise((resolve) => probe.close(resolve));
      }
      // With PORT=0 the first worker is given a free port, and the others join it.
      const bound = await unlessFailed(pool.start(1, config.port));
      await unlessFailed(Promise.all(Array.from({ length: config.workers - 1 }, (_, i) => pool.start(i + 2, bound.port))));
      return bound;
    },
    gatherCounts: pool.gatherCounts,
    drain() {
      pool.drain();
      return stopped.promise;
    },
    failed: failure.promise,
  };
}
