/**
 * What a handler receives, typed from its own entry of the table: `context.path()`,
 * `context.query()` and `context.body()` validate against the entry's parameters and body schema
 * (bound-operation.ts) and return values typed from those very objects, and `context.caller` is a
 * key whenever the entry needs one. The handler decides only when to call them, so the
 * contract's order of checks stays in the handler.
 */
import type { IncomingMessage } from 'node:http';
import type { Reply } from '../http/reply.ts';
import type { Params } from '../http/router.ts';
import type { Caller } from '../keys/caller.ts';
import type { OperationSpec, OperationTable } from './operation.ts';
import type { ObjectSchema, Parameter } from './schemas.ts';

// --- Validated values, typed from the schema objects -----------------------------------------

/** The value a string, integer or list schema admits once validated. */
type ValueOf<S> = S extends { readonly type: 'array'; readonly items: infer Item }
  ? ValueOf<Item>[]
  : S extends { readonly enum: readonly (infer Member)[] }
    ? Member
    : S extends { readonly type: 'string' }
      ? string
      : S extends { readonly type: 'integer'; readonly format: 'int64' }
        ? bigint
        : S extends { readonly type: 'integer' }
          ? number
          : never;

type HasDefault<S> = S extends { readonly default: unknown } ? true : false;

/** An object type written out flat, as an editor shows it. */
type Flat<T> = { [K in keyof T]: T[K] } & {};

/** A body validated against object schema `S`: its required properties, and those with a default, are present. */
export type Validated<S extends ObjectSchema> = Flat<
  {
    -readonly [K in keyof S['properties'] as K extends S['required'][number] ? K : HasDefault<S['properties'][K]> extends true ? K : never]: ValueOf<S['properties'][K]>;
  } & {
    -readonly [K in keyof S['properties'] as K extends S['required'][number] ? never : HasDefault<S['properties'][K]> extends true ? never : K]?: ValueOf<S['properties'][K]>;
  }
>;

type ParametersOf<S> = S extends { readonly parameters: infer P extends readonly Parameter[] } ? P[number] : never;

/** Whether a parameter always has a value once validated: a path parameter, a required one, or one with a default. */
type Always<P> = P extends { readonly in: 'path' } | { readonly required: true } ? true : HasDefault<P extends { readonly schema: infer S } ? S : never>;

/** The validated values of an operation's parameters of one kind (`path` or `query`), by name. */
export type ParameterValues<S, In extends 'path' | 'query'> = Flat<
  {
    -readonly [P in Extract<ParametersOf<S>, { readonly in: In }> as Always<P> extends true ? P['name'] : never]: ValueOf<P['schema']>;
  } & {
    -readonly [P in Extract<ParametersOf<S>, { readonly in: In }> as Always<P> extends true ? never : P['name']]?: ValueOf<P['schema']>;
  }
>;

/** What `context.body()` gives: the body validated, with its defaults, and the body as it was sent. */
export interface ReceivedBody<T> {
  value: T;
  /** The parsed JSON before validation and defaults: what an Idempotency-Key fingerprints. */
  sent: unknown;
}

// --- The handler contract ------------------------------------------------------------------------

/** What every handler receives once the request was identified, limited, authenticated and routed. */
interface BaseContext<S extends OperationSpec> {
  req: IncomingMessage;
  /** The operation's own entry. */
  operation: S;
  /** The path parameters as sent, before validation (an answer cache may be keyed on them). */
  params: Params;
  /** The query string without `?`, as sent. */
  search: string;
  /** Who is calling: always a key for an operation that needs one; null for an anonymous caller of one that does not. */
  caller: null extends S['scope'] ? Caller | null : Caller;
  /** The path parameters, validated against the entry's (`400 invalid_path`). */
  path(): ParameterValues<S, 'path'>;
  /** The query parameters, validated against the entry's: an unknown or repeated one is refused too (`400 invalid_query`). */
  query(): ParameterValues<S, 'query'>;
}

/** `context.body()` exists for an operation with a request body only. */
type BodyContext<S> = S extends { readonly requestBody: { readonly schema: infer B extends ObjectSchema } }
  ? {
      /**
       * Reads the body and validates it against the entry's schema, in the contract's order: an
       * empty body, the media type (415), the size (413), the JSON, then its fields (400).
       */
      body(): Promise<ReceivedBody<Validated<B>>>;
    }
  : unknown;

export type HandlerContext<S extends OperationSpec = OperationSpec> = BaseContext<S> & BodyContext<S>;

/**
 * What an operation does; it throws an ApiError for any answer but its own success. Declared as
 * a method's type, whose parameter TypeScript compares both ways, so that the router can hold
 * every operation's handler as a handler of any operation.
 */
export type Handler<S extends OperationSpec = OperationSpec> = { handle(context: HandlerContext<S>): Reply | Promise<Reply> }['handle'];

/** A handler for every operation of `T`, keyed by operationId: one missing or misspelt fails the type check. */
export type HandlersOf<T extends OperationTable> = { readonly [Id in keyof T]: Handler<T[Id]> };
