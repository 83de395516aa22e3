/**
 * The event feed, `GET /v1/events`: a page of the log after a position, the events the key may
 * see, with a `Link` to follow forever; with `wait`, an empty page waits for the next event the
 * key may see (commit-waiter.ts), holding no connection meanwhile. With `Accept:
 * text/event-stream`, the same events as one open stream (streams.ts), once the same checks
 * (the query, `410`) have passed.
 */
import type { IncomingMessage } from 'node:http';
import type { Clock } from '../../clock.ts';
import { httpError } from '../../http/api-error.ts';
import { allows } from '../../keys/scopes.ts';
import { EVENT_TYPES, type EventLog, type EventPageOptions, type StoredEvent } from '../../storage/events.ts';
import { apiError } from '../errors.ts';
import { nextLink } from '../cursor.ts';
import type { Handlers } from '../operations.ts';
import type { CommitWaiter } from './commit-waiter.ts';
import type { EventStreams } from './streams.ts';
import { eventsJson } from './json.ts';

export interface EventsHandlersDeps {
  events: EventLog;
  waiter: CommitWaiter;
  clock: Clock;
  /** The live streams (streams.ts). */
  streams: EventStreams;
}

/** No id is ever above 2^53; a larger position reads the same empty page. */
const idOf = (position: bigint): number => Number(position > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : position);

/**
 * Whether the request asks for the stream: a GET whose `Accept` lists `text/event-stream` (with a
 * weight above 0), as `EventSource` and a `fetch` that asks for it send.
 */
function wantsStream(req: IncomingMessage): boolean {
  const accept = req.headers.accept;
  if (req.method !== 'GET' || accept === undefined || !accept.toLowerCase().includes('text/event-stream')) return false;
  return accept.toLowerCase().split(',').some((range) => {
    const [type, ...parameters] = range.split(';').map((part) => part.trim());
    if (type !== 'text/event-stream') return false;
    const weight = parameters.find((parameter) => parameter.startsWith('q='));
    return weight === undefined || Number(weight.slice(2)) > 0;
  });
}

/** `Last-Event-ID` as a position: absent or empty (what `EventSource` sends before any id), undefined. */
function lastEventId(req: IncomingMessage): bigint | undefined {
  const value = req.headers['last-event-id'];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string' || !/^\d{1,19}$/.test(value)) throw httpError('bad_request', 'Last-Event-ID must be the id of an event: 1 to 19 decimal digits.');
  return BigInt(value);
}

/** Builds the feed's handler over the log and the process's waiter. */
export function createEventsHandlers({ events, waiter, clock, streams }: EventsHandlersDeps): Pick<Handlers, 'listEvents'> {
  return {
    async listEvents(context) {
      const { limit, types, wait, ...query } = context.query();
      const { caller } = context;
      const manage = allows(caller.scopes, 'orders:manage');
      const stream = wantsStream(context.req);
      // A stream resumes after `Last-Event-ID` (what EventSource sends when it reconnects) over `after`.
      const after = stream ? lastEventId(context.req) ?? query.after : query.after;
      const options: EventPageOptions = {
        afterId: after === undefined ? 0 : idOf(after),
        limit,
        types: types ?? EVENT_TYPES,
        account: manage ? null : caller.account,
      };
      if (stream) {
        if (after !== undefined) {
          const deleted = await events.deletedThrough();
          if (after < BigInt(deleted)) throw apiError('cursor_expired', after, deleted);
        }
        // `limit` and `wait` are the pages' own: a stream has neither, and ignores them.
        const { limit: _limit, ...page } = options;
        return streams.open({ caller, reader: { account: caller.account, manage }, page, resumed: after !== undefined });
      }
      const deadline = clock() + wait * 1000;
      // The highest id before the page is read: an empty page then waits for a higher one.
      let seen = wait > 0 ? await events.latestId() : 0;
      let page: StoredEvent[] = await events.page(options);
      // Read after the page: a deletion that came before the page's read is seen here.
      if (after !== undefined) {
        const deleted = await events.deletedThrough();
        if (after < BigInt(deleted)) throw apiError('cursor_expired', after, deleted);
      }
      // Woken by any commit, the page may stay empty (an event this key may not see): wait again.
      while (page.length === 0 && wait > 0 && await waiter.wait(seen, deadline - clock())) {
        seen = await events.latestId();
        page = await events.page(options);
      }
      const last = page.length > 0 ? page.at(-1)!.id : after ?? 0;
      const given = new URLSearchParams(context.search);
      return {
        status: 200,
        body: eventsJson(page, { account: caller.account, manage }),
        // The next page keeps `types` and `wait` only where the request gave them.
        headers: { Link: nextLink(context.operation, { after: last, limit, types: types?.join(','), wait: given.has('wait') ? wait : undefined }) },
      };
    },
  };
}
