/**
 * A request thread's side of the writer thread: `submit` sends one batch on this thread's port
 * and resolves with its outcomes once the writer's group is on disk (thread.ts). Batches
 * leave at once, in order; the writer puts every batch that arrives while it commits into its
 * next group, so a thread never holds a batch back while another is out.
 */
import type { MessagePort } from 'node:worker_threads';
import type { ItemOutcome } from '../../../lib/item-outcome.ts';
import { DatabaseUnavailableError } from '../../errors.ts';
import { messageOf, receivedError, receivedOutcomes, type WriteAnswer, type WriteOutcomes } from './protocol.ts';
import type { SubmitWrites, WriteResult } from './executor.ts';

export interface WriterClient {
  submit: SubmitWrites;
  /** Stops listening on the port (after the last answer); batches sent later fail. */
  close(): void;
}

interface Waiting {
  resolve(answer: WriteOutcomes): void;
  reject(error: unknown): void;
}

/** A client over `port`, this thread's end of a channel whose other end the writer holds. */
export function createWriterClient(port: MessagePort): WriterClient {
  const waiting = new Map<number, Waiting>();
  let next = 0;
  let closed = false;

  /** The writer stopped (it crashed, or was closed): nothing waiting will be answered. */
  const stopped = () => {
    closed = true;
    const error = new DatabaseUnavailableError('writer_stopped');
    for (const each of waiting.values()) each.reject(error);
    waiting.clear();
  };

  port.on('message', (answer: WriteAnswer) => {
    const each = waiting.get(answer.id);
    if (each === undefined) return;
    waiting.delete(answer.id);
    if ('error' in answer) each.reject(receivedError(answer.error));
    else each.resolve(answer);
    // Nothing waiting: the port must not keep the thread alive.
    if (waiting.size === 0) port.unref();
  });
  port.on('close', stopped);
  port.unref();

  return {
    submit(op, items) {
      if (closed) return Promise.reject(new DatabaseUnavailableError('writer_stopped'));
      const id = next++;
      const message = messageOf(id, op, items);
      return new Promise<ItemOutcome<WriteResult<typeof op>>[]>((resolve, reject) => {
        // The answer to this message is of its operation (the writer answers each message with its op).
        const answered = (answer: WriteOutcomes) => (answer.op === op ? resolve(receivedOutcomes(answer as WriteOutcomes<typeof op>)) : reject(new Error(`the writer answered ${answer.op} to ${op}`)));
        waiting.set(id, { resolve: answered, reject });
        if (waiting.size === 1) port.ref();
        port.postMessage(message);
      });
    },
    close() {
      port.close();
    },
  };
}
