/**
 * The `If-Match` request header (RFC 9110, section 13.1.1), parsed strictly:
 *
 *     If-Match    = "*" / #entity-tag
 *     entity-tag  = [ weak ] opaque-tag          ; section 8.8.3
 *     weak        = %s"W/"                       ; case-sensitive
 *     opaque-tag  = DQUOTE *etagc DQUOTE
 *     etagc       = %x21 / %x23-7E / obs-text    ; obs-text = %x80-FF
 *
 * `#` is a comma-separated list with optional whitespace around the commas, in which empty
 * elements are allowed and ignored (section 5.6.1.2), so an empty field value is a list with no
 * tag: it matches nothing. A comma may stand inside an opaque-tag, so the list is scanned rather
 * than split. If-Match compares strongly (section 8.8.3.2): a weak tag is valid syntax but never
 * matches, so it is checked and dropped here. Node hands the value over as latin1 text, one
 * character per byte, with repeated header lines joined by ", " (which is what `#` means).
 */
import { httpError } from './api-error.ts';

/** A parsed If-Match: any current representation, or the strong tags listed (quotes included). */
export type IfMatch = { readonly any: true } | { readonly any: false; readonly tags: readonly string[] };

const ANY: IfMatch = { any: true };

const TAB = 0x09;
const SPACE = 0x20;
const QUOTE = 0x22;
const COMMA = 0x2c;

const isWhitespace = (unit: number) => unit === SPACE || unit === TAB;
/** etagc: any visible ASCII character but the double quote, and obs-text. */
const isEtagc = (unit: number) => unit === 0x21 || (unit >= 0x23 && unit <= 0x7e) || (unit >= 0x80 && unit <= 0xff);

const malformed = () =>
  httpError('bad_request', 'If-Match must be * or a comma-separated list of entity tags such as "7.2" (RFC 9110, section 13.1.1).');

/** Parses the header's value; `undefined` (no header) is null. A malformed value is `400 bad_request`. */
export function parseIfMatch(value: string | undefined): IfMatch | null {
  if (value === undefined) return null;
  let start = 0;
  let end = value.length;
  while (start < end && isWhitespace(value.charCodeAt(start))) start++;
  while (end > start && isWhitespace(value.charCodeAt(end - 1))) end--;
  if (end - start === 1 && value.charCodeAt(start) === 0x2a) return ANY;

  const tags: string[] = [];
  let i = start;
  while (i < end) {
    const unit = value.charCodeAt(i);
    if (unit === COMMA || isWhitespace(unit)) {
      i++;
      continue;
    }
    const weak = value.startsWith('W/', i);
    const open = weak ? i + 2 : i;
    if (value.charCodeAt(open) !== QUOTE) throw malformed();
    let close = open + 1;
    while (close < end && isEtagc(value.charCodeAt(close))) close++;
    if (close >= end || value.charCodeAt(close) !== QUOTE) throw malformed();
    if (!weak) tags.push(value.slice(open, close + 1));
    // After a tag: optional whitespace, then a comma or the end.
    i = close + 1;
    while (i < end && isWhitespace(value.charCodeAt(i))) i++;
    if (i < end && value.charCodeAt(i) !== COMMA) throw malformed();
  }
  return { any: false, tags };
}

/** True when the condition holds for a resource whose current strong ETag is `current`. */
export function ifMatchHolds(condition: IfMatch, current: string): boolean {
  return condition.any || condition.tags.includes(current);
}
