/**
 * The event feed, `GET /v1/events`: a page of the log after a position, the events the key may
 * see, with a `Link` to follow forever; with `wait`, an empty page waits for the next event the
 * key may see (commit-waiter.ts), holding no connection meanwhile.
 */
import type { Clock } from '../../clock.ts';
import { allows } from '../../keys/scopes.ts';
import { EVENT_TYPES, type EventLog, type EventPageOptions, type StoredEvent } from '../../storage/events.ts';
import { apiError } from '../errors.ts';
import { nextLink } from '../cursor.ts';
import type { Handlers } from '../operations.ts';
import type { CommitWaiter } from './commit-waiter.ts';
import { eventsJson } from './json.ts';

export interface EventsHandlersDeps {
  events: EventLog;
  waiter: CommitWaiter;
  clock: Clock;
}

/** Builds the feed's handler over the log and the process's waiter. */
export function createEventsHandlers({ events, waiter, clock }: EventsHandlersDeps): Pick<Handlers, 'listEvents'> {
  return {
    async listEvents(context) {
      const { after, limit, types, wait } = context.query();
      const { caller } = context;
      const manage = allows(caller.scopes, 'orders:manage');
      const options: EventPageOptions = {
        // No id is ever above 2^53; a larger `after` reads the same empty page.
        afterId: after === undefined ? 0 : Number(after > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : after),
        limit,
        types: types ?? EVENT_TYPES,
        account: manage ? null : caller.account,
      };
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
