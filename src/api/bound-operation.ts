/**
 * An operation of the table bound to its own validators, once at start: the context a handler
 * receives per request validates the path, the query and the body against the entry's schema
 * objects, so that no handler names a schema again.
 */
import type { IncomingMessage } from 'node:http';
import type { Params } from '../http/router.ts';
import { readJsonBody } from '../http/request-body.ts';
import type { Caller } from '../keys/caller.ts';
import type { HandlerContext, ReceivedBody } from './handler.ts';
import type { OperationSpec } from './operation.ts';
import type { Parameter } from './schemas.ts';
import { validateBody, validatePath, validateQuery } from './validator.ts';

/** An operation with its parameters sorted by kind, ready to make each request's context. */
export interface BoundOperation {
  readonly operation: OperationSpec;
  /** The context of one request routed to this operation. */
  context(req: IncomingMessage, params: Params, search: string, caller: Caller | null): HandlerContext;
}

/** Binds an entry of the table to its validators. */
export function bindOperation(operation: OperationSpec): BoundOperation {
  const inPath = parametersIn(operation, 'path');
  const inQuery = parametersIn(operation, 'query');
  return {
    operation,
    context: (req, params, search, caller) => new RequestContext(operation, inPath, inQuery, req, params, search, caller),
  };
}

function parametersIn(operation: OperationSpec, kind: Parameter['in']): readonly Parameter[] {
  return (operation.parameters ?? []).filter((parameter) => parameter.in === kind);
}

/**
 * One request's context. A class, so that the validators are shared methods and a request costs
 * one object, as the plain context it replaced did.
 */
class RequestContext {
  readonly operation: OperationSpec;
  readonly req: IncomingMessage;
  readonly params: Params;
  readonly search: string;
  readonly caller: Caller | null;
  readonly #inPath: readonly Parameter[];
  readonly #inQuery: readonly Parameter[];

  constructor(
    operation: OperationSpec,
    inPath: readonly Parameter[],
    inQuery: readonly Parameter[],
    req: IncomingMessage,
    params: Params,
    search: string,
    caller: Caller | null,
  ) {
    this.operation = operation;
    this.#inPath = inPath;
    this.#inQuery = inQuery;
    this.req = req;
    this.params = params;
    this.search = search;
    this.caller = caller;
  }

  path(): Record<string, unknown> {
    return validatePath(this.params, this.#inPath);
  }

  query(): Record<string, unknown> {
    return validateQuery(new URLSearchParams(this.search), this.#inQuery);
  }

  async body(): Promise<ReceivedBody<Record<string, unknown>>> {
    const body = this.operation.requestBody;
    // The type of the context offers body() only to an operation with a request body.
    if (body === undefined) throw new Error(`operation ${this.operation.method} ${this.operation.path} has no request body`);
    const sent = await readJsonBody(this.req, body.mediaTypes);
    return { value: validateBody(sent, body.schema), sent };
  }
}
