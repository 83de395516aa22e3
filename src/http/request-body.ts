/**
 * Reading a JSON request body: the checks of step 5 of a request (docs/api.md), in the contract's order
 * (empty body, media type, size cap, then JSON), without ever holding more than the cap.
 */
import type { IncomingMessage } from 'node:http';
import { httpError, type ApiError } from './api-error.ts';

/** The contract's cap on request bodies. */
export const BODY_LIMIT_BYTES = 16 * 1024;

/** The media types a body may be sent as, and how a 415 names them. */
export interface BodyMediaTypes {
  pattern: RegExp;
  /** As the OpenAPI document lists them. */
  types: readonly string[];
  names: string;
}

/** `application/json`, optionally with `charset=utf-8`: what a creation accepts. */
export const JSON_BODY: BodyMediaTypes = {
  pattern: /^application\/json\s*(?:;\s*charset\s*=\s*(?:utf-8|"utf-8")\s*)?$/i,
  types: ['application/json'],
  names: 'application/json',
};

/** A JSON merge patch (RFC 7396) as its own media type or as plain JSON, `charset=utf-8` allowed. */
export const MERGE_PATCH_BODY: BodyMediaTypes = {
  pattern: /^application\/(?:merge-patch\+)?json\s*(?:;\s*charset\s*=\s*(?:utf-8|"utf-8")\s*)?$/i,
  types: ['application/merge-patch+json', 'application/json'],
  names: 'application/merge-patch+json or application/json',
};
/** A JSON number written as plain decimal digits: the only form accepted as an integer. */
const INTEGER_LITERAL = /^-?(?:0|[1-9][0-9]*)$/;
/**
 * Strict UTF-8. `ignoreBOM: true` keeps a leading byte-order mark in the text (the default would
 * silently strip it), so that JSON.parse refuses it: RFC 8259 section 8.1 forbids senders to add
 * one, and every parser then agrees on what the bytes mean.
 */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** How long, and how much more, a connection closed on an unread body reads (and drops): see below. */
export const UNREAD_BODY_LINGER_MS = 1_000;
const UNREAD_BODY_LINGER_BYTES = 64 * 1024;

/**
 * Whether an answer written now leaves the request's body unread, and if so, arranges for the
 * connection to close after that answer. True for an answer that never needed the body (a 401,
 * 404 or 429, a 413, a 415) while the body is still arriving: to keep the connection alive, Node
 * would otherwise read and discard the rest, and a body sent a byte every few seconds held the
 * connection for up to the 30 s request timeout (200 keyless slow bodies kept every backend
 * connection of a proxy busy). The caller sends `Connection: close`.
 *
 * Node then closes the socket as soon as the answer is written, and a client still sending its
 * body would get a reset that can make its TCP stack discard the answer unread. So the close
 * lingers instead: our side is shut, what still arrives is read and dropped, and the socket is
 * destroyed once the client closes too, or after UNREAD_BODY_LINGER_MS or 64 KiB more, whatever
 * it does.
 */
export function closeIfBodyUnread(req: IncomingMessage, lingerMs = UNREAD_BODY_LINGER_MS): boolean {
  if (req.complete) return false;
  // `destroySoon` is what node:http calls on a connection whose answer said `Connection: close`.
  const socket = req.socket as IncomingMessage['socket'] & { destroySoon?: () => void };
  socket.destroySoon = () => {
    socket.end();
    // At most a body's worth more is read: a client pushing megabytes is cut at once.
    const readLimit = socket.bytesRead + UNREAD_BODY_LINGER_BYTES;
    socket.on('data', () => {
      if (socket.bytesRead > readLimit) socket.destroy();
    });
    const timer = setTimeout(() => socket.destroy(), lingerMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  };
  return true;
}

/** True when the request declares, or clearly has, a body of zero bytes. */
function declaresEmptyBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  if (length !== undefined) return length === '0';
  return req.headers['transfer-encoding'] === undefined;
}

/**
 * Reads the body and parses it as JSON. Integer literals become bigints (their exact digits,
 * read from the source text), other numbers stay numbers, so the validator can refuse `1.0`
 * and `1e2` where an int64 is expected and keep 2^53 + 1 exact.
 */
export async function readJsonBody(req: IncomingMessage, mediaTypes = JSON_BODY, limit = BODY_LIMIT_BYTES): Promise<unknown> {
  if (declaresEmptyBody(req)) throw httpError('invalid_body', 'A JSON object body is required.');
  const contentType = req.headers['content-type'];
  if (contentType === undefined || !mediaTypes.pattern.test(contentType)) {
    throw httpError('unsupported_media_type', `The body must be sent as Content-Type: ${mediaTypes.names}.`);
  }
  const bytes = await readBytes(req, limit);
  if (bytes.length === 0) throw httpError('invalid_body', 'A JSON object body is required.');
  return parseJson(bytes);
}

/** Parses UTF-8 JSON bytes (strictly: invalid UTF-8 is invalid JSON) with exact integers. */
export function parseJson(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw httpError('invalid_json', 'The body is not valid UTF-8.');
  }
  let value: unknown;
  try {
    value = JSON.parse(text, exactIntegers);
  } catch {
    // Also catches a RangeError from absurdly deep nesting: still a body we will not read.
    throw httpError('invalid_json', 'The body is not valid JSON.');
  }
  const repeated = typeof value === 'object' && value !== null ? repeatedMemberName(text) : null;
  if (repeated !== null) {
    throw httpError('invalid_json', `The body repeats the member name ${JSON.stringify(repeated.slice(0, 100))}.`);
  }
  return value;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

/**
 * The first member name that an object of `text` repeats, or null. RFC 8259 says names SHOULD
 * be unique and I-JSON (RFC 7493) says MUST: JSON.parse keeps the last value, other parsers the
 * first, so a proxy, a log or a firewall in front of us could see another pet than the one we
 * store. `text` is already known to be valid JSON, so one linear pass with a stack suffices
 * (no recursion, so no depth limit of its own); names are compared after unescaping.
 */
function repeatedMemberName(text: string): string | null {
  const names: (Set<string> | null)[] = []; // one entry per open object (a Set) or array (null)
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit === QUOTE) {
      const start = i;
      let escaped = false;
      for (i++; text.charCodeAt(i) !== QUOTE; i++) {
        if (text.charCodeAt(i) === BACKSLASH) {
          escaped = true;
          i++;
        }
      }
      const members = names[names.length - 1];
      if (!members) continue;
      let next = i + 1;
      while (text.charCodeAt(next) <= 0x20) next++; // JSON whitespace is all below U+0021
      if (text.charCodeAt(next) !== COLON) continue; // a string value, not a name
      const name = escaped ? (JSON.parse(text.slice(start, i + 1)) as string) : text.slice(start + 1, i);
      if (members.has(name)) return name;
      members.add(name);
    } else if (unit === 0x7b) names.push(new Set());
    else if (unit === 0x5b) names.push(null);
    else if (unit === 0x7d || unit === 0x5d) names.pop();
  }
  return null;
}

function exactIntegers(this: unknown, _key: string, value: unknown, context?: { source?: string }): unknown {
  if (typeof value === 'number' && context?.source !== undefined && INTEGER_LITERAL.test(context.source)) {
    return BigInt(context.source);
  }
  return value;
}

/**
 * Collects the body up to `limit` bytes. A declared length over the cap is refused before
 * reading anything; an undeclared one is refused as soon as it passes the cap, and the rest is
 * left unread (the response closes the connection).
 */
function readBytes(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(tooLarge(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (error: Error) => {
      cleanup();
      reject(error);
    };
    const onAborted = () => {
      cleanup();
      reject(httpError('bad_request', 'The request body was not received in full.'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

function tooLarge(limit: number): ApiError {
  return httpError('payload_too_large', `The body must be at most ${limit} bytes.`, { Connection: 'close' });
}
