/**
 * What an operation is, as data, and what its handler receives: the types of the table of
 * operations (operations.ts) and the contract between a handler and the pipeline.
 *
 * A handler is typed from its own entry: `context.path()`, `context.query()` and `context.body()`
 * validate against the entry's parameters and body schema and return values typed from those
 * very objects, and `context.caller` is a key whenever the entry needs one. The handler decides
 * only when to call them, so the contract's order of checks stays in the handler.
 */
import type { IncomingMessage } from 'node:http';
import type { Reply } from '../http/reply.ts';
import type { BodyMediaTypes } from '../http/request-body.ts';
import type { Params } from '../http/router.ts';
import type { Caller } from '../keys/caller.ts';
import type { Scope } from '../keys/scopes.ts';
import type { ErrorCode } from './errors.ts';
import type { HeaderUse } from './response-headers.ts';
import type { ObjectSchema, Parameter } from './schemas.ts';

/** Every operation's path is under this base address. */
export const BASE_PATH = '/v1';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** A body schema of a response: a schema object of schemas.ts, or one written in place. */
export type ResponseBody = object;

/** One answer of an operation. */
export interface ResponseSpec {
  description: string;
  /**
   * A success body, by media type (`application/json`; a stream may add `text/event-stream`).
   * A schema that SCHEMAS (schemas.ts) names is a reference to its component in the document.
   */
  content?: Readonly<Record<string, ResponseBody>>;
  /** An error response: the codes it can carry (each must have this status). */
  codes?: readonly ErrorCode[];
  /** Headers beyond those on every answer (the request id, the common ones, the rate limit). */
  headers?: readonly HeaderUse[];
}

export interface RequestBodySpec {
  description: string;
  /** What `context.body()` validates the body against. */
  schema: ObjectSchema;
  /** The media types accepted: the body reader's (a 415 names them) and the document's. */
  mediaTypes: BodyMediaTypes;
}

/** A deprecated operation (RFC 9745) and its end (RFC 8594). */
export interface Deprecation {
  /** When the deprecation was announced: the `Deprecation` header. */
  announcedMs: number;
  /** When it stops working and answers `410 gone`: the `Sunset` header. */
  sunsetMs: number;
  /** The operation that replaces it: the `Link: <...>; rel="successor-version"` header. */
  successor: Pick<OperationSpec, 'method' | 'path'>;
}

/** The values of the headers on every answer of a deprecated operation once it is routed, errors included. */
export function deprecationHeaders({ announcedMs, sunsetMs, successor }: Deprecation): Readonly<Record<'Deprecation' | 'Sunset' | 'Link', string>> {
  return {
    Deprecation: `@${announcedMs / 1000}`,
    Sunset: new Date(sunsetMs).toUTCString(),
    Link: `<${BASE_PATH}${successor.path}>; rel="successor-version"`,
  };
}

/**
 * The `Location` of what an operation created: its own path and the new id (`/v1/pets/7`), as
 * the document's `Location` header describes it (response-headers.ts).
 */
export function locationOf(operation: Pick<OperationSpec, 'path'>, id: number | bigint): string {
  return `${BASE_PATH}${operation.path}/${id}`;
}

/** The day a deprecated operation stops working, as `2030-12-05`. */
export function sunsetDay({ sunsetMs }: Pick<Deprecation, 'sunsetMs'>): string {
  return new Date(sunsetMs).toISOString().slice(0, 10);
}

export interface OperationSpec<Tag extends string = string> {
  method: Method;
  /** Under BASE_PATH, with `{name}` for each path parameter. */
  path: string;
  tag: Tag;
  summary: string;
  description: string;
  /**
   * The least scope a key needs (401 without a valid key, then 403 insufficient_scope without
   * this scope); null: anyone, and a valid key only decides whose rate limit counts the request.
   */
  scope: Scope | null;
  /** Every answer carries the deprecation headers once routed. */
  deprecated?: Deprecation;
  parameters?: readonly Parameter[];
  requestBody?: RequestBodySpec;
  /** Its own answers, by status; the shared ones are added by the document's builder. */
  responses: Readonly<Record<number, ResponseSpec>>;
  /** Answers may be replays of a first answer stored under an Idempotency-Key. */
  replayable?: boolean;
  /** The shared answer for operations announced but not built in this version. */
  notImplemented?: boolean;
}

/** A table of operations, by operationId. */
export type OperationTable = Readonly<Record<string, OperationSpec>>;

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
