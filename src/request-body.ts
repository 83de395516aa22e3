/**
 * Reading a JSON request body: the checks of CONTRACT.md step 5, in the contract's order
 * (empty body, media type, size cap, then JSON), without ever holding more than the cap.
 */
import type { IncomingMessage } from 'node:http';
import { ApiError } from './api-error.ts';

/** The contract's cap on request bodies. */
export const BODY_LIMIT_BYTES = 16 * 1024;

const JSON_MEDIA_TYPE = /^application\/json\s*(?:;\s*charset\s*=\s*(?:utf-8|"utf-8")\s*)?$/i;
/** A JSON number written as plain decimal digits: the only form accepted as an integer. */
const INTEGER_LITERAL = /^-?(?:0|[1-9][0-9]*)$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

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
export async function readJsonBody(req: IncomingMessage, limit = BODY_LIMIT_BYTES): Promise<unknown> {
  if (declaresEmptyBody(req)) throw new ApiError('invalid_body', 'A JSON object body is required.');
  const contentType = req.headers['content-type'];
  if (contentType === undefined || !JSON_MEDIA_TYPE.test(contentType)) {
    throw new ApiError('unsupported_media_type', 'The body must be sent as Content-Type: application/json.');
  }
  const bytes = await readBytes(req, limit);
  if (bytes.length === 0) throw new ApiError('invalid_body', 'A JSON object body is required.');
  return parseJson(bytes);
}

/** Parses UTF-8 JSON bytes (strictly: invalid UTF-8 is invalid JSON) with exact integers. */
export function parseJson(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new ApiError('invalid_json', 'The body is not valid UTF-8.');
  }
  try {
    return JSON.parse(text, exactIntegers);
  } catch {
    // Also catches a RangeError from absurdly deep nesting: still a body we will not read.
    throw new ApiError('invalid_json', 'The body is not valid JSON.');
  }
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
      reject(new ApiError('bad_request', 'The request body was not received in full.'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

function tooLarge(limit: number): ApiError {
  return new ApiError('payload_too_large', `The body must be at most ${limit} bytes.`, { Connection: 'close' });
}
