/**
 * Starting and stopping the writer thread (thread.ts), from the thread that owns the
 * database: the single process, or the primary of WORKERS. It hands each request thread a port
 * of its own, and the shared memory in which the writer journals and publishes its commits.
 */
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import type { WriterControl, WriterMemory } from './protocol.ts';
import { JOURNAL_BYTES } from './journal.ts';
import { publicationIn } from '../data-version.ts';

/** What the writer thread is started with (`workerData`). */
export interface WriterStart {
  path: string;
  memory: WriterMemory;
}

export interface WriterHost {
  memory: WriterMemory;
  /** A new port to the writer, for one request thread (transferable to a worker). */
  connect(): MessagePort;
  /** Resolves, with one line saying why, if the writer thread fails (crashes or exits unasked). */
  failed: Promise<string>;
  /** Lets the writer finish what it was sent, close its connection and stop. */
  close(): Promise<void>;
}

/** Fresh shared memory for one writer and its readers. */
export function createWriterMemory(): WriterMemory {
  return { journal: new SharedArrayBuffer(JOURNAL_BYTES), publication: publicationIn().buffer };
}

/**
 * Starts the writer thread on the file at `path`, running `entry` (src/writer.ts, which opens the
 * connection and runs the writer).
 */
export function startWriterThread({ entry, path, execArgv }: { entry: URL; path: string; execArgv?: string[] }): WriterHost {
  const memory = createWriterMemory();
  const workerData: WriterStart = { path, memory };
  const thread = new Worker(entry, { workerData, ...(execArgv ? { execArgv } : {}) });
  // The thread keeps nothing alive by itself: a client waiting for an answer does (client.ts).
  thread.unref();
  const failure = Promise.withResolvers<string>();
  const exited = Promise.withResolvers<void>();
  let closing = false;
  // Its name only, like a worker's crash line: an error's message may hold SQL or input.
  thread.on('error', (error) => failure.resolve(`the writer thread crashed (${error.name}); stopping the server`));
  thread.on('exit', (code) => {
    if (!closing) failure.resolve(`the writer thread exited with code ${code}; stopping the server`);
    exited.resolve();
  });
  const post = (message: WriterControl, transfer: MessagePort[] = []) => thread.postMessage(message, transfer);
  return {
    memory,
    connect() {
      const { port1, port2 } = new MessageChannel();
      post({ type: 'connect', port: port1 }, [port1]);
      return port2;
    },
    failed: failure.promise,
    close() {
      closing = true;
      // Until it has stopped, the thread keeps the process alive.
      thread.ref();
      post({ type: 'close' });
      return exited.promise;
    },
  };
}
