/**
 * The live event stream, `GET /v1/events` with `Accept: text/event-stream`: one open response per
 * consumer, written as server-sent events. A stream holds no database connection and no worker
 * while it waits: it waits on the process's one commit waiter (commit-waiter.ts), and when woken
 * reads the next pages of the log after its position, exactly as the feed's pages are read, so
 * the same rule holds: every event it may see, once, in id order.
 *
 * - Backpressure: a page is written only once the previous one was taken by the socket (`write`
 *   returned true, or 'drain' came), so a slow client costs at most one page of buffer.
 * - Silence: a comment line every `keepAliveMs` without an event keeps proxies from closing it.
 * - Its key: every `keyCheckMs`, each key with a stream open is read once from the keys store;
 *   a key revoked, expired or given other scopes ends its streams (the client reconnects and is
 *   answered as any new request).
 * - The drain ends every stream and refuses new ones; the client reconnects elsewhere with
 *   `Last-Event-ID`.
 */
import type { ServerResponse } from 'node:http';
import type { Clock } from '../../clock.ts';
import { httpError } from '../../http/api-error.ts';
import type { Reply } from '../../http/reply.ts';
import type { Caller } from '../../keys/caller.ts';
import type { StreamSlots } from '../../limits/stream-slots.ts';
import type { EventLog, EventPageOptions, StoredEvent } from '../../storage/events.ts';
import type { ApiKeyRecord } from '../../storage/keys.ts';
import type { MaybePromise } from '../../lib/maybe-promise.ts';
import { apiError } from '../errors.ts';
import type { CommitWaiter } from './commit-waiter.ts';
import { eventJson, type EventReader } from './json.ts';

/** A comment line every 15 s of silence. */
export const KEEP_ALIVE_MS = 15_000;
/** A stream's key is read again at most this often: a revoked key's streams end within a second. */
export const KEY_CHECK_MS = 1_000;
/** Events read and written at once. */
const PAGE_SIZE = 100;

/** What the metrics count of the streams (`event_streams_open`). */
export interface StreamsObserver {
  eventStreamOpened(): void;
  eventStreamClosed(): void;
}

export interface EventStreamsDeps {
  events: EventLog;
  waiter: CommitWaiter;
  /** Where a stream's key is read again. */
  keys: { get(id: string): MaybePromise<ApiKeyRecord | null> };
  slots: StreamSlots;
  clock: Clock;
  observer?: Partial<StreamsObserver>;
  keepAliveMs?: number;
  keyCheckMs?: number;
  /** Monotonic milliseconds, for the silence between keep-alives. */
  now?: () => number;
}

/** Where a new stream starts and what it selects. */
export interface StreamStart {
  caller: Caller;
  reader: EventReader;
  page: Omit<EventPageOptions, 'limit'>;
  /** Starts from a position the client gave (`Last-Event-ID` or `after`), which retention may pass. */
  resumed: boolean;
}

export interface EventStreams {
  /** The answer that opens a stream (the caps and the drain are checked first: 429, 503). */
  open(start: StreamStart): Promise<Reply>;
  /** Ends every stream and refuses new ones (the server drains). */
  close(): void;
}

interface Stream {
  caller: Caller;
  /** The key's scopes when it opened: another set ends it. */
  scopes: string;
  res: ServerResponse;
  abort: AbortController;
}

/** The frame of one event: its id, its type, and the event as the feed renders it. */
function frame(event: StoredEvent, reader: EventReader): string {
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${eventJson(event, reader)}\n\n`;
}

const stillValid = (record: ApiKeyRecord | null, stream: Stream, now: number): boolean =>
  record !== null && record.revokedAt === null && (record.expiresAt === null || record.expiresAt > now) && record.scopes.join(' ') === stream.scopes;

/** The streams of one process (or worker thread). */
export function createEventStreams(deps: EventStreamsDeps): EventStreams {
  const { events, waiter, keys, slots, clock, observer = {} } = deps;
  const keepAliveMs = deps.keepAliveMs ?? KEEP_ALIVE_MS;
  const keyCheckMs = deps.keyCheckMs ?? KEY_CHECK_MS;
  const now = deps.now ?? (() => performance.now());
  const byKey = new Map<string, Set<Stream>>();
  let checks: ReturnType<typeof setInterval> | null = null;
  let checking = false;
  let closed = false;

  function end(stream: Stream): void {
    if (stream.abort.signal.aborted) return;
    stream.abort.abort();
    const mine = byKey.get(stream.caller.id);
    mine?.delete(stream);
    if (mine?.size === 0) byKey.delete(stream.caller.id);
    if (byKey.size === 0 && checks !== null) {
      clearInterval(checks);
      checks = null;
    }
    slots.release(stream.caller.id);
    observer.eventStreamClosed?.();
    if (!stream.res.writableEnded) stream.res.end();
  }

  /** Reads each key with a stream once; ends the streams of a key that no longer serves them. */
  async function checkKeys(): Promise<void> {
    if (checking) return;
    checking = true;
    try {
      for (const [id, streams] of byKey) {
        const record = await keys.get(id);
        for (const stream of [...streams]) if (!stillValid(record, stream, clock())) end(stream);
      }
    } catch {
      // The keys cannot be read now: the next check tries again.
    } finally {
      checking = false;
    }
  }

  /** Resolves once the socket took what was written, or the stream ended. */
  function drained(stream: Stream): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        stream.res.off('drain', done);
        stream.abort.signal.removeEventListener('abort', done);
        resolve();
      };
      stream.res.on('drain', done);
      stream.abort.signal.addEventListener('abort', done);
    });
  }

  async function run(stream: Stream, start: StreamStart): Promise<void> {
    const { signal } = stream.abort;
    const options: EventPageOptions = { ...start.page, limit: PAGE_SIZE };
    let lastWrite = now();
    let first = start.resumed;
    while (!signal.aborted) {
      // The highest id before the pages are read: the wait after them is for a higher one.
      const seen = await events.latestId();
      for (;;) {
        const page = await events.page(options);
        // As for a page: a deletion that came between the handler's check and this read is seen
        // here, and ends the stream before it skips anything (reconnecting is then answered 410).
        if (first) {
          first = false;
          if (options.afterId < await events.deletedThrough()) return;
        }
        if (signal.aborted || page.length === 0) break;
        options.afterId = page.at(-1)!.id;
        lastWrite = now();
        if (!stream.res.write(page.map((event) => frame(event, start.reader)).join(''))) await drained(stream);
        if (page.length < PAGE_SIZE) break;
      }
      if (signal.aborted) return;
      const silence = keepAliveMs - (now() - lastWrite);
      if (silence <= 0) {
        lastWrite = now();
        if (!stream.res.write(': keep-alive\n\n')) await drained(stream);
        continue;
      }
      await waiter.wait(seen, silence, signal);
    }
  }

  return {
    async open(start) {
      if (closed) throw httpError('unavailable', 'The server is shutting down; reconnect with Last-Event-ID.');
      const refusal = await slots.acquire(start.caller.id);
      if (refusal !== null) throw apiError('too_many_streams', refusal.cap, refusal.limit);
      return {
        status: 200,
        body: '',
        headers: { 'Content-Type': 'text/event-stream; charset=utf-8', 'X-Accel-Buffering': 'no' },
        stream(res) {
          const stream: Stream = { caller: start.caller, scopes: start.caller.scopes.join(' '), res, abort: new AbortController() };
          observer.eventStreamOpened?.();
          let mine = byKey.get(stream.caller.id);
          if (mine === undefined) byKey.set(stream.caller.id, (mine = new Set()));
          mine.add(stream);
          if (checks === null) {
            checks = setInterval(() => void checkKeys(), keyCheckMs);
            checks.unref();
          }
          res.once('close', () => end(stream));
          // A failed read (the database cannot be reached) ends the stream: the client reconnects.
          if (closed || res.destroyed) end(stream);
          else run(stream, start).then(() => end(stream), () => end(stream));
        },
      };
    },
    close() {
      closed = true;
      for (const streams of [...byKey.values()]) for (const stream of [...streams]) end(stream);
    },
  };
}
