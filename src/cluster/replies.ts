/**
 * Questions a thread sends to another by message, each with a number, and the promise of each
 * answer: the answer message carries the number back and settles that promise once.
 */
export interface Replies<T> {
  /** Numbers a new question, hands the number to `send`, and resolves with its answer. */
  ask(send: (id: number) => void): Promise<T>;
  /** Settles question `id` with `value`; an unknown or already answered number is ignored. */
  answer(id: number, value: T): void;
}

export function createReplies<T>(): Replies<T> {
  const waiting = new Map<number, (value: T) => void>();
  let next = 0;
  return {
    ask(send) {
      const id = next++;
      return new Promise((resolve) => {
        waiting.set(id, resolve);
        send(id);
      });
    },
    answer(id, value) {
      const resolve = waiting.get(id);
      waiting.delete(id);
      resolve?.(value);
    },
  };
}
