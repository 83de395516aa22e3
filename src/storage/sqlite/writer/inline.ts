/**
 * The inline writer: the writes of a SQLite file made on the request thread's own connection, for
 * a process that has one core (config.ts's `WRITER`). There a writer thread only costs: each
 * batch is structured-cloned twice, and the woken thread takes the core from the requests. Here
 * a batch costs a promise.
 *
 * The batches submitted by one run of code form a group, committed in one transaction with
 * `synchronous=NORMAL` as soon as that code has run (a microtask): the create path, for one,
 * submits as one batch all the creates that one turn of the event loop read. COMMIT appends the
 * group to the WAL and returns without waiting for the disk. The group is then made durable by an
 * `fdatasync` of the `-wal` file, and no batch of it is answered before that returns. The sync
 * runs on the event loop while the disk syncs quickly, which answers the group in the turn that
 * committed it, and in libuv's thread pool while it does not, so that a slow disk does not hold
 * every read (wal-sync.ts says when, and what was measured). In the pool, the groups committed
 * while one `fdatasync` runs share the next one.
 * Why no answered write can be lost on power failure: docs/decisions/0023-inline-writer-on-one-core.md.
 *
 * An `fdatasync` that fails means the kernel may have dropped the group's pages: nothing committed
 * since can be promised, so every waiting batch fails (503) and `failed` tells the owner to stop
 * the server, as a crashed writer thread does.
 */
import type { DatabaseSync } from 'node:sqlite';
import type { ItemOutcome } from '../../../lib/item-outcome.ts';
import { DatabaseUnavailableError } from '../../errors.ts';
import { JOURNAL_BYTES, journalIn, type WriteJournal } from './journal.ts';
import { createWriteExecutor, nextGroup, type SubmitWrites, type WriteRequest, type WriteResult } from './executor.ts';
import { createWalSync, type DataSync } from './wal-sync.ts';

// Not `import ... from 'node:fs'`: its ES-module view loads what a start does not use (http/access-log.ts).
const { close: closeFd, openSync } = process.getBuiltinModule('node:fs');

export interface InlineWriter {
  submit: SubmitWrites;
  /** The journal the writes are recorded in, for the stores' caches (journal.ts). */
  journal: WriteJournal;
  /** Resolves, with one line saying why, if the WAL could not be made durable. */
  failed: Promise<string>;
  /**
   * The highest event id whose group is durable. Another request on this connection may read a
   * group between its COMMIT and its `fdatasync`; the event feed reads no further than this, so
   * that no consumer is shown an event that a power failure could still take back (and whose id
   * would then be given again).
   */
  durableEventId(): number;
  /** Answers what was submitted, then stops; later batches fail. The connection stays open. */
  close(): Promise<void>;
}

interface Waiting {
  request: WriteRequest;
  resolve(outcomes: ItemOutcome<unknown>[]): void;
  reject(error: unknown): void;
}

export type { DataSync };

/**
 * Writes on `db`, a connection to a file in WAL mode that nothing else of this server writes.
 * Sets it to `synchronous=NORMAL`: the `fdatasync` here is what makes each group durable. `sync`
 * runs it (wal-sync.ts: on the event loop or in libuv's pool); tests pass one they hold or fail.
 */
export function startInlineWriter(db: DatabaseSync, { sync = createWalSync() }: { sync?: DataSync } = {}): InlineWriter {
  const path = db.location();
  if (path === null || path === '') throw new Error('the inline writer needs a database file');
  db.exec('PRAGMA synchronous = NORMAL');
  // The connection has read the file in WAL mode (migrations), so the WAL exists; it stays while
  // the connection is open.
  const wal = openSync(`${path}-wal`, 'r');
  const journal = journalIn(new ArrayBuffer(JOURNAL_BYTES));
  const executor = createWriteExecutor(db, journal);
  const failure = Promise.withResolvers<string>();
  const idle = Promise.withResolvers<void>();
  let queue: Waiting[] = [];
  /** Committed, waiting for an `fdatasync` that starts after their commit. */
  let unsynced: { answer(): void; reject(error: unknown): void }[] = [];
  const lastEventId = db.prepare('SELECT coalesce(max(id), 0) AS id FROM events');
  const latestEventId = () => (lastEventId.get() as { id: number }).id;
  /** The highest event id committed (once per group, an index's last entry), and the highest made durable. */
  let committedEventId = latestEventId();
  let durableEventId = committedEventId;
  let scheduled = false;
  let syncing = false;
  let stopped: DatabaseUnavailableError | null = null;
  let closing = false;

  const schedule = () => {
    if (!scheduled && queue.length > 0) {
      scheduled = true;
      // When the code that submitted has run: the batches it submitted are one group. Not in the
      // next turn (setImmediate): the callers already gather a turn's writes into one batch, and
      // their flush runs in this turn's setImmediate phase, so waiting for the next one would
      // make every write wait for the whole of the next turn's reads before its COMMIT.
      queueMicrotask(commit);
    }
  };

  function commit(): void {
    scheduled = false;
    const { group, rest } = nextGroup(queue, (each) => each.request.items.length);
    queue = rest;
    try {
      const outcomes = executor.run(group.map((each) => each.request));
      committedEventId = latestEventId();
      group.forEach((each, index) => unsynced.push({ answer: () => each.resolve(outcomes[index]!), reject: each.reject }));
      startSync();
    } catch (error) {
      // Nothing of the group was written: nothing to make durable.
      for (const each of group) each.reject(error);
    }
    schedule();
    settled();
  }

  function startSync(): void {
    if (syncing || unsynced.length === 0) return;
    syncing = true;
    const synced = unsynced;
    unsynced = [];
    // Every group committed so far is in the WAL this sync flushes.
    const covered = committedEventId;
    sync(wal, (error) => {
      syncing = false;
      if (error !== null) {
        stop(new DatabaseUnavailableError(error instanceof Error && 'code' in error ? String(error.code) : 'fdatasync'));
        for (const each of synced) each.reject(stopped);
        failure.resolve('the database file could not be made durable (fdatasync failed); stopping the server');
      } else {
        durableEventId = covered;
        for (const each of synced) each.answer();
        startSync();
      }
      settled();
    });
  }

  /** From now on every batch fails with `error`, those waiting too. */
  function stop(error: DatabaseUnavailableError): void {
    stopped = error;
    for (const each of queue) each.reject(error);
    queue = [];
    for (const each of unsynced) each.reject(error);
    unsynced = [];
  }

  function settled(): void {
    if (closing && queue.length === 0 && !syncing && unsynced.length === 0) idle.resolve();
  }

  return {
    submit(op, items) {
      if (stopped !== null) return Promise.reject(stopped);
      if (closing) return Promise.reject(new DatabaseUnavailableError('writer_stopped'));
      return new Promise<ItemOutcome<WriteResult<typeof op>>[]>((resolve, reject) => {
        queue.push({ request: { op, items }, resolve: resolve as Waiting['resolve'], reject });
        schedule();
      });
    },
    journal,
    failed: failure.promise,
    durableEventId: () => durableEventId,
    async close() {
      closing = true;
      settled();
      await idle.promise;
      await new Promise<void>((resolve) => closeFd(wal, () => resolve()));
    },
  };
}
