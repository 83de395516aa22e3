/**
 * How a response of the document lists the headers it carries (each described once, in
 * ../response-headers.ts), and the lists of headers that many responses share.
 */
import { HEADERS, OPERATION_HEADERS, type HeaderName, type HeaderSubject, type HeaderUse } from '../response-headers.ts';
import { ref, type JsonObject } from './json-schema.ts';

/** The header names on the wire of the components whose name differs. */
const WIRE_NAME: Partial<Record<HeaderName, string>> = { NextLink: 'Link', EventsLink: 'Link', SuccessorLink: 'Link', ScopeChallenge: 'WWW-Authenticate' };

/** A subject for the responses that belong to no operation: they use none of the headers of OPERATION_HEADERS. */
const NO_OPERATION: HeaderSubject = { path: '', deprecation: null };


/**
 * A response's headers. A header that may be absent is written out in place rather than as a
 * reference: openapi-typescript 7 types a referenced header as always present, whatever the
 * component's `required` says, while it reads `required` on a header written in place. So is a
 * header described for the operation (`subject`) that sends it: it is not a component.
 */
export function headers(uses: readonly HeaderUse[], subject: HeaderSubject = NO_OPERATION): JsonObject {
  const described: JsonObject = {};
  for (const use of [...uses, ...CORS]) {
    const name = typeof use === 'string' ? use : use.optional;
    const wire = WIRE_NAME[name] ?? name;
    if (name in OPERATION_HEADERS) {
      const header = OPERATION_HEADERS[name as keyof typeof OPERATION_HEADERS](subject);
      described[wire] = typeof use === 'string' ? header : { ...header, required: false };
      continue;
    }
    const header = HEADERS[name as keyof typeof HEADERS];
    described[wire] = typeof use !== 'string' ? { ...header, required: false } : header.required ? ref('headers', name) : header;
  }
  return described;
}

export const optional = (names: readonly HeaderName[]): HeaderUse[] => names.map((name) => ({ optional: name }));

/** On every response, including the ones Node writes before the pipeline runs (408, 431). */
export const EVERY: readonly HeaderName[] = ['X-Request-Id', 'Cache-Control', 'X-Content-Type-Options'];
/** On every response of a `/v1` request once the caller is limited (docs/keys-and-limits.md, "Rate limits"). */
export const RATE: readonly HeaderName[] = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'RateLimit-Policy', 'RateLimit'];
export const DEPRECATION: readonly HeaderName[] = ['Deprecation', 'Sunset', 'SuccessorLink'];
/** On any response, every one of them declared, when CORS_ALLOWED_ORIGINS is set. */
export const CORS: readonly HeaderName[] = ['Access-Control-Allow-Origin', 'Access-Control-Expose-Headers', 'Vary'];
