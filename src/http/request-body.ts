/**
 * Reading a JSON request body: the checks of step 5 of a request (docs/api.md), in the contract's order
 * (empty body, media type, size cap, then JSON), without ever holding more than the cap.
 */
import type { IncomingMessage } from 'node:http';
import { quote } from '../lib/quote.ts';
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
 * Reads the body and parses it as JSON. The integer literals of the members of a top-level
 * object become bigints (their exact digits, read from the source text), other numbers stay
 * numbers, so the validator can refuse `1.0` and `1e2` where an int64 is expected and keep
 * 2^53 + 1 exact.
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

/**
 * Parses UTF-8 JSON bytes (strictly: invalid UTF-8 is invalid JSON) with exact integers for the
 * members of a top-level object, the only ones a body's schema has (they are flat). Those digits
 * are read by our own pass over the text, not by a reviver: V8 calls a reviver once for every
 * value at any depth, which made a 16 KiB body of 8,000 numbers cost 10 to 30 ms, a hundred times
 * JSON.parse alone, and more than linearly beyond that.
 */
export function parseJson(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw httpError('invalid_json', 'The body is not valid UTF-8.');
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Also catches a RangeError, should the engine's parser ever run out of stack.
    throw httpError('invalid_json', 'The body is not valid JSON.');
  }
  if (typeof value !== 'object' || value === null) return value;
  const { repeated, numbers } = scanMembers(text);
  if (repeated !== null) {
    throw httpError('invalid_json', `The body repeats the member name ${quote(repeated)}.`);
  }
  if (!Array.isArray(value)) {
    for (const [name, source] of numbers) {
      // Defined, not assigned: a member named __proto__ is an own property, never the prototype.
      if (INTEGER_LITERAL.test(source)) Object.defineProperty(value, name, { value: BigInt(source), writable: true, enumerable: true, configurable: true });
    }
  }
  return value;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

/** What a number literal may hold: digits, a sign, a point, an exponent. */
const isNumberPart = (unit: number) => (unit >= 0x30 && unit <= 0x39) || unit === 0x2d || unit === 0x2b || unit === 0x2e || unit === 0x45 || unit === 0x65;

/**
 * One linear pass over `text`, already known to be valid JSON, with a stack (no recursion, so no
 * depth limit of its own):
 * - `repeated`: the first member name that an object repeats, or null. RFC 8259 says names SHOULD
 *   be unique and I-JSON (RFC 7493) says MUST: JSON.parse keeps the last value, other parsers the
 *   first, so a proxy, a log or a firewall in front of us could see another pet than the one we
 *   store. Names are compared after unescaping.
 * - `numbers`: the source text of each member of the top-level object whose value is a number.
 */
function scanMembers(text: string): { repeated: string | null; numbers: Map<string, string> } {
  const names: (Set<string> | null)[] = []; // one entry per open object (a Set) or array (null)
  const numbers = new Map<string, string>();
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
      if (members.has(name)) return { repeated: name, numbers };
      members.add(name);
      if (names.length === 1) {
        for (next++; text.charCodeAt(next) <= 0x20; next++);
        let end = next;
        while (isNumberPart(text.charCodeAt(end))) end++;
        if (end > next) numbers.set(name, text.slice(next, end));
      }
    } else if (unit === 0x7b) names.push(new Set());
    else if (unit === 0x5b) names.push(null);
    else if (unit === 0x7d || unit === 0x5d) names.pop();
  }
  return { repeated: null, numbers };
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
