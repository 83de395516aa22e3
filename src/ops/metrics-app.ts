/**
 * The request handler of the metrics listener (`METRICS_PORT`, docs/operations.md, "Metrics"):
 * `GET /metrics` and nothing else. No key and no rate limit: the listener is for
 * the scraper, bound to `HOST` like the API, and kept off the API's port so that a firewall can
 * tell them apart. Its requests are neither counted nor logged, so scraping does not change
 * what it reads; errors are in the API's Error shape.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { httpError, methodNotAllowed } from '../http/api-error.ts';
import { toErrorReply, type ErrorLog } from '../pipeline/errors.ts';
import { requestId } from '../http/request-id.ts';
import { closeIfBodyUnread } from '../http/request-body.ts';
import { COMMON_HEADERS, type Reply } from '../http/reply.ts';
import type { App } from '../http/server.ts';
import { EXPOSITION_CONTENT_TYPE, type Metrics } from './metrics.ts';

export const METRICS_PATH = '/metrics';

export interface MetricsAppDeps {
  /** A promise when the counts are gathered from other threads first (WORKERS). */
  metrics: { render(): ReturnType<Metrics['render']> | Promise<string> };
  /** Receives one record if rendering fails (answered `500 internal_error`). */
  log: ErrorLog;
  generateRequestId?: () => string;
}

/** The handler for createHttpServer: the same timeouts and caps as the API's listener. */
export function createMetricsApp({ metrics, log, generateRequestId = randomUUID }: MetricsAppDeps): App {
  let draining = false;

  function answer(method: string | undefined, path: string): Reply | Promise<Reply> {
    if (path !== METRICS_PATH) throw httpError('not_found', `No such path; the metrics are at ${METRICS_PATH}.`);
    if (method !== 'GET' && method !== 'HEAD') throw methodNotAllowed(method ?? '', 'GET, HEAD');
    const body = metrics.render();
    const reply = (text: string): Reply => ({ status: 200, body: text, headers: { 'Content-Type': EXPOSITION_CONTENT_TYPE } });
    return body instanceof Promise ? body.then(reply) : reply(body);
  }

  return {
    handle(req, res) {
      const url = req.url ?? '/';
      const question = url.indexOf('?');
      const id = requestId(req.headers['x-request-id'], generateRequestId);
      const failed = (error: unknown) => toErrorReply(error, (fields) => log({ ...fields, requestId: id }));
      let reply: Reply | Promise<Reply>;
      try {
        reply = answer(req.method, question === -1 ? url : url.slice(0, question));
      } catch (error) {
        reply = failed(error);
      }
      // Nothing here reads a body: one still arriving is not waited for (see closeIfBodyUnread).
      const close = () => closeIfBodyUnread(req) || draining;
      if (reply instanceof Promise) reply.then((answered) => send(res, id, answered, close()), (error: unknown) => send(res, id, failed(error), close()));
      else send(res, id, reply, close());
    },
    drain() {
      draining = true;
    },
  };
}

function send(res: ServerResponse, id: string, reply: Reply, close: boolean): void {
  // An answer gathered from the workers may come after the scraper hung up.
  if (res.destroyed) return;
  const headers: Record<string, string | number> = {
    ...COMMON_HEADERS,
    'X-Request-Id': id,
    ...reply.headers,
    'Content-Length': Buffer.byteLength(reply.body),
  };
  if (close) headers.Connection = 'close';
  res.writeHead(reply.status, headers);
  // Node sends no body for HEAD, and keeps the GET's Content-Length.
  res.end(reply.body);
}
