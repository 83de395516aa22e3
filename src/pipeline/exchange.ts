/**
 * One request's way through the pipeline: what the answer needs whatever happened before it (the
 * caller's rate-limit headers, the route's headers, CORS), and the writer that sends every answer,
 * error or not, with the common headers, then counts it and logs its access line.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from '../clock.ts';
import type { Logger } from '../http/access-log.ts';
import { COMMON_HEADERS, type Reply } from '../http/reply.ts';
import { requestId } from '../http/request-id.ts';
import { closeIfBodyUnread } from '../http/request-body.ts';
import type { PipelineObserver } from './observer.ts';

/** Per-request state that `send` needs whatever happened before it. */
export interface Exchange {
  started: number;
  requestId: string;
  path: string;
  /** The query string without `?`. */
  search: string;
  keyId: string | null;
  /** The matched route's template, for the metrics; null until (or unless) one matches. */
  route: string | null;
  rateHeaders: Record<string, string> | null;
  routeHeaders: Readonly<Record<string, string>> | undefined;
  corsHeaders: Readonly<Record<string, string>> | undefined;
}

/** The exchange of a request that just arrived. */
export function openExchange(req: IncomingMessage, generateRequestId: () => string, corsHeaders: Readonly<Record<string, string>> | undefined): Exchange {
  const url = req.url ?? '/';
  const question = url.indexOf('?');
  return {
    started: performance.now(),
    requestId: requestId(req.headers['x-request-id'], generateRequestId),
    path: question === -1 ? url : url.slice(0, question),
    search: question === -1 ? '' : url.slice(question + 1),
    keyId: null,
    route: null,
    rateHeaders: null,
    routeHeaders: undefined,
    corsHeaders,
  };
}

export interface SenderDeps {
  clock: Clock;
  logger: Logger;
  observer: PipelineObserver;
  /** Shutting down: every answer asks the client to close its connection. */
  draining(): boolean;
}

/** The writer of every answer. */
export function createSender({ clock, logger, observer, draining }: SenderDeps) {
  return function send(req: IncomingMessage, res: ServerResponse, exchange: Exchange, reply: Reply): void {
    if (res.headersSent || res.destroyed) {
      // A stream is handed its response even so, so that it gives back the slot it holds.
      reply.stream?.(res);
      return;
    }
    const headers: Record<string, string | number> = {
      ...COMMON_HEADERS,
      'X-Request-Id': exchange.requestId,
      ...exchange.rateHeaders,
      ...exchange.routeHeaders,
      ...exchange.corsHeaders,
      ...reply.headers,
      'Content-Length': Buffer.byteLength(reply.body),
    };
    // RFC 9110, 8.6 and 15.3.5: a 204 has no content, so neither a length nor a type.
    if (reply.status === 204) {
      delete headers['Content-Length'];
      delete headers['Content-Type'];
    }
    // An answer that left the body unread closes the connection rather than wait for that body.
    if (closeIfBodyUnread(req) || draining()) headers.Connection = 'close';
    if (reply.stream !== undefined) {
      // An open response has no length; it is counted and logged once, as it opens.
      delete headers['Content-Length'];
      res.writeHead(reply.status, headers);
      res.flushHeaders();
      reply.stream(res);
    } else {
      res.writeHead(reply.status, headers);
      res.end(reply.body);
    }
    const elapsedMs = performance.now() - exchange.started;
    const method = req.method ?? '';
    observer.responded(method, exchange.route, reply.status, elapsedMs / 1000);
    logger.access({
      time: clock(),
      requestId: exchange.requestId,
      method,
      path: exchange.path,
      status: reply.status,
      durationMs: Math.round(elapsedMs * 1000) / 1000,
      keyId: exchange.keyId,
    });
  };
}
