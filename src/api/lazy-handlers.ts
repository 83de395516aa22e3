/**
 * The handlers of the operations of one tag (`store`, `events`, `webhooks`), loaded with their
 * modules on the first request of any of them rather than at start: each module a start loads
 * costs it about 0.3 ms before its first answer, and most of a start's first requests are of
 * other operations. They are given under their operationIds like every other handler, so the type
 * check still fails while an operation has no handler; which ids a tag has is read from the table.
 */
import { loadedOnFirstUse } from '../lib/loaded-on-first-use.ts';
import type { Handler } from './handler.ts';
import { OPERATIONS, type Handlers, type OperationId, type Tag } from './operations.ts';

/** The operationIds of the table's operations of `tag`. */
export type OperationsTagged<T extends Tag> = { [Id in OperationId]: (typeof OPERATIONS)[Id]['tag'] extends T ? Id : never }[OperationId];

/**
 * The handlers of every operation of `tag`, made by `load` on the first request of one of them:
 * that request waits for the load, the later ones call the loaded handlers directly. A load that
 * fails fails its requests (500) and is tried again by the next.
 */
export function handlersLoadedOnFirstRequest<T extends Tag>(tag: T, load: () => Promise<Pick<Handlers, OperationsTagged<T>>>): Pick<Handlers, OperationsTagged<T>> {
  // Each id's handler takes its own operation's context: held here as a handler of any operation, as the router holds them.
  const group = loadedOnFirstUse(async () => new Map<string, Handler>(Object.entries(await load())));
  const ids = Object.entries(OPERATIONS).filter(([, operation]) => operation.tag === tag).map(([id]) => id);
  const handlerOf = (id: string): Handler => (context) => group.use((handlers) => handlers.get(id)!(context));
  return Object.fromEntries(ids.map((id) => [id, handlerOf(id)])) as Pick<Handlers, OperationsTagged<T>>;
}
