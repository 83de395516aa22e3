/**
 * The Host header checked against the names the service answers to (`ALLOWED_HOSTS`), against
 * DNS rebinding: a page on an attacker's name that resolves, a moment later, to 127.0.0.1 or to
 * an internal address can have a browser send requests to that address with the attacker's name
 * in Host, and read the answers. A request whose Host is an IP address literal, `localhost`, or
 * a listed name is served; any other is answered 400 before the app sees it. Nothing is ever
 * built from Host (see security.md); this only decides whether to answer.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseIp } from '../lib/ip-address.ts';
import { COMMON_HEADERS, errorJson } from './reply.ts';

const { randomUUID } = process.getBuiltinModule('node:crypto');

/** Whether a request's Host may be answered. */
export type HostCheck = (host: string | undefined) => boolean;

/** The check of `names` (lower case, no port): IP literals and localhost are always allowed. */
export function allowedHosts(names: readonly string[]): HostCheck {
  const allowed = new Set(names.map((name) => name.toLowerCase()));
  allowed.add('localhost');
  return (host) => {
    // Browsers always send Host; a client that sends none (HTTP/1.0) is not a browser.
    if (host === undefined || host === '') return true;
    if (host.startsWith('[')) return host.indexOf(']') > 0;
    const colon = host.lastIndexOf(':');
    let name = colon !== -1 && /^[0-9]{0,5}$/.test(host.slice(colon + 1)) ? host.slice(0, colon) : host;
    if (name.endsWith('.')) name = name.slice(0, -1);
    return parseIp(name) !== null || allowed.has(name.toLowerCase());
  };
}

/** Answers a request whose Host is not allowed: 400 in the Error shape, and the connection closed. */
export function refuseHost(res: ServerResponse): void {
  const body = errorJson('bad_request', 'The Host header names no host this server answers to (ALLOWED_HOSTS).', 400);
  res.writeHead(400, { ...COMMON_HEADERS, 'X-Request-Id': randomUUID(), 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
  res.end(body);
}

/** `handle`, behind the check: a request with another Host never reaches it. */
export function checkingHost(check: HostCheck, handle: (req: IncomingMessage, res: ServerResponse) => void, refused: () => void): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    if (check(req.headers.host)) return handle(req, res);
    refused();
    refuseHost(res);
  };
}
