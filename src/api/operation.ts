/**
 * What an operation is, as data: the types of an entry of the table of operations
 * (operations.ts), the base address every path is under, and the values built from an entry
 * (its deprecation headers, the Location of what it created). What its handler receives is in
 * handler.ts.
 */
import type { BodyMediaTypes } from '../http/request-body.ts';
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
