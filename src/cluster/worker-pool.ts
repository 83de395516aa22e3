/**
 * The worker threads of the primary (WORKERS above 1): starting them, routing their messages,
 * asking them for their metrics, draining them, and telling the primary when one fails or when
 * all have stopped.
 */
import { Worker } from 'node:worker_threads';
import type { AddressInfo } from 'node:net';
import { errorName } from '../http/access-log.ts';
import { listenFailure } from '../service/serving.ts';
import type { Config } from '../config.ts';
import type { EventLoopDelay, MetricsCounts } from '../ops/metrics.ts';
import type { WriterHost } from '../storage/sqlite/writer.ts';
import type { PrimaryMessage, WorkerMessage, WorkerWriter } from './protocol.ts';

/** What one worker counted, for a scrape of /metrics. */
export interface WorkerCounts {
  counts: MetricsCounts;
  eventLoopDelay: EventLoopDelay;
}

export interface WorkerPoolDeps {
  config: Config;
  /** The module every worker thread runs (src/main.ts, which is also the process's entry). */
  entry: URL;
  /** The writer thread: each worker gets a port of its own to it. */
  writer: Pick<WriterHost, 'connect' | 'memory'>;
  /** Answers the limiter and connection messages (limiter-host.ts); false for the others. */
  host(message: WorkerMessage, reply: (answer: PrimaryMessage) => void): boolean;
  /** A worker could not listen, crashed or exited unasked: `line` says which and why. */
  failed(line: string): void;
  /** Every worker has drained and stopped after `drain`. */
  stopped(): void;
}

export interface WorkerPool {
  /** Starts worker `index` (from 1) on `port`; resolves with the address it listens on. */
  start(index: number, port: number): Promise<AddressInfo>;
  /** Every worker's counts now (in worker order). */
  gatherCounts(): Promise<WorkerCounts[]>;
  /** Tells every worker to stop accepting and finish what is in flight. */
  drain(): void;
}

interface RunningWorker {
  thread: Worker;
  /** Said `stopped` after a drain. */
  stopped: boolean;
  post(message: PrimaryMessage): void;
}

/**
 * An empty pool; `start` adds the workers. One closure, longer than a screen, because the workers
 * and the scrapes waiting for their counts are state that every method shares.
 */
export function createWorkerPool({ config, entry, writer, host, failed, stopped }: WorkerPoolDeps): WorkerPool {
  const workers: RunningWorker[] = [];
  const scrapes = new Map<number, { left: number; answers: WorkerCounts[]; done(answers: WorkerCounts[]): void }>();
  let nextScrape = 0;
  let draining = false;

  function answerScrape(id: number, index: number, counts: WorkerCounts): void {
    const scrape = scrapes.get(id);
    if (scrape === undefined) return;
    scrape.answers[index - 1] = counts;
    if (--scrape.left === 0) {
      scrapes.delete(id);
      scrape.done(scrape.answers);
    }
  }

  return {
    start(index, port) {
      const toWriter: WorkerWriter = { port: writer.connect(), memory: writer.memory };
      const thread = new Worker(entry, { workerData: { config, start: { index, port }, writer: toWriter }, transferList: [toWriter.port] });
      const worker: RunningWorker = { thread, stopped: false, post: (message) => thread.postMessage(message) };
      workers.push(worker);
      const listening = Promise.withResolvers<AddressInfo>();
      const name = `worker ${index} of ${config.workers}`;
      thread.on('message', (message: WorkerMessage) => {
        if (host(message, worker.post)) return;
        switch (message.type) {
          case 'listening':
            return listening.resolve({ address: message.address, port: message.port, family: '' });
          case 'listen_failed':
            return failed(listenFailure(config.host, port, message.code));
          case 'counts':
            return answerScrape(message.id, index, { counts: message.counts, eventLoopDelay: message.eventLoopDelay });
          case 'stopped':
            worker.stopped = true;
            return;
        }
      });
      // An uncaught error in a worker: its name only, like the single process's crash line.
      thread.on('error', (error) => failed(`${name} crashed (${errorName(error)}); stopping the server`));
      // Messages posted before a worker ends are delivered before its 'exit'.
      thread.on('exit', (code) => {
        if (!(draining && worker.stopped)) failed(`${name} exited with code ${code}; stopping the server`);
        else if (workers.every((each) => each.stopped)) stopped();
      });
      return listening.promise;
    },

    gatherCounts() {
      const id = nextScrape++;
      return new Promise((done) => {
        scrapes.set(id, { left: workers.length, answers: new Array<WorkerCounts>(workers.length), done });
        for (const worker of workers) worker.post({ type: 'counts', id });
      });
    },

    drain() {
      draining = true;
      for (const worker of workers) worker.post({ type: 'drain' });
    },
  };
}
