/**
 * The writer thread: the only connection that writes the SQLite file. Every request thread (the
 * single process, or each worker of WORKERS, and the primary for the limiter) sends it its
 * writes, batch by batch, each on its own port; the batches that arrive while it commits form the
 * next group, which it commits in one transaction (one fsync), and it answers each batch once its
 * group is on disk. The request threads' event loops never wait for an fsync: they read on their
 * own connections meanwhile (WAL lets readers read while the writer commits).
 *
 * Before any answer leaves, the pets the group touched are in the shared journal and the group's
 * commit is published (data-version.ts), so the next request on any thread sees the change and
 * drops no cached answer it did not touch. A group that fails (the database cannot be written)
 * answers every batch in it with the error and leaves nothing behind; an item that fails alone
 * is answered alone (item-savepoints.ts).
 *
 * The thread's entry (src/writer.ts) opens the connection and hands it here with its ports.
 */
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import type { DatabaseSync } from 'node:sqlite';
import { createCommitPublisher, publicationIn } from '../data-version.ts';
import { journalIn } from './journal.ts';
import { createWriteExecutor, nextGroup, type WriteRequest } from './executor.ts';
import { requestOf, sendError, sendOutcomes, type WriteAnswer, type WriteMessage, type WriterControl, type WriterMemory } from './protocol.ts';

export interface WriterDeps {
  /** The writable connection (openWriterDatabase): WAL, synchronous=FULL, no auto-checkpoint. */
  db: DatabaseSync;
  memory: WriterMemory;
  /** From the thread's owner: new ports, and the order to close (`parentPort`). */
  control: MessagePort;
}

/** WAL frames after which the writer checkpoints, once its group is answered (SQLite's default). */
const CHECKPOINT_FRAMES = 1000;

interface Received {
  port: MessagePort;
  message: WriteMessage;
}

/** Serves writes until told to close; resolves once closed (the connection too). */
export function runWriter({ db, memory, control }: WriterDeps): Promise<void> {
  const executor = createWriteExecutor(db, journalIn(memory.journal));
  const publisher = createCommitPublisher(db, publicationIn(memory.publication));
  const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
  const ports = new Set<MessagePort>();
  const closed = Promise.withResolvers<void>();
  let queue: Received[] = [];
  let scheduled = false;
  let closing = false;

  const request = () => {
    if (!scheduled && queue.length > 0) {
      scheduled = true;
      // After the messages already received: they join this group.
      setImmediate(flush);
    }
  };

  function flush(): void {
    scheduled = false;
    const { group, rest } = nextGroup(queue, (each) => each.message.items.length);
    queue = rest;
    commit(group);
    request();
    if (closing && queue.length === 0) close();
  }

  function commit(group: readonly Received[]): void {
    const requests: WriteRequest[] = group.map(({ message }) => requestOf(message));
    let answers: WriteAnswer[];
    let frames = 0;
    try {
      const outcomes = executor.run(requests);
      answers = group.map(({ message }, index) => sendOutcomes(message.id, message.op, outcomes[index]!));
    } catch (error) {
      const sent = sendError(error);
      answers = group.map(({ message }) => ({ id: message.id, error: sent }));
    } finally {
      frames = publisher.publish();
    }
    group.forEach(({ port }, index) => port.postMessage(answers[index]));
    // SQLite's automatic checkpoint would run inside COMMIT, before the group is published and
    // answered; this one runs after, so that no reader waits for it.
    if (frames >= CHECKPOINT_FRAMES) {
      try {
        checkpoint.get();
      } catch {
        // Busy or failing: the next group tries again, and a failing disk fails that group anyway.
      }
    }
  }

  function close(): void {
    for (const port of ports) port.close();
    control.close();
    closed.resolve();
  }

  control.on('message', (message: WriterControl) => {
    if (message.type === 'connect') {
      const { port } = message;
      ports.add(port);
      port.on('message', (write: WriteMessage) => {
        queue.push({ port, message: write });
        request();
      });
      port.on('close', () => ports.delete(port));
    } else if (message.type === 'close' && !closing) {
      closing = true;
      // What was sent before the order to close is answered first, wherever it waits.
      for (const port of ports) {
        for (let next = receiveMessageOnPort(port); next !== undefined; next = receiveMessageOnPort(port)) {
          queue.push({ port, message: next.message as WriteMessage });
        }
      }
      if (queue.length === 0) close();
      else request();
    }
  });
  return closed.promise;
}
