/**
 * Client text quoted in an error message. A message names what was wrong (an unknown property,
 * a repeated parameter), but the name is the client's and may be kilobytes long: quoted whole,
 * one request could make the service write back far more than it sent.
 */

/** The most bytes (UTF-8, escapes included) of a name that a message quotes. */
export const QUOTED_BYTES = 32;

/**
 * `text` as a JSON string, cut after QUOTED_BYTES bytes of its escaped form and then marked
 * `...`. The cut falls between code points, never inside an escape or a surrogate pair, and only
 * the part kept is read, so the cost does not grow with the text.
 */
export function quote(text: string): string {
  let kept = '';
  let bytes = 0;
  for (const point of text) {
    const piece = JSON.stringify(point).slice(1, -1);
    bytes += Buffer.byteLength(piece);
    if (bytes > QUOTED_BYTES) return `"${kept}..."`;
    kept += piece;
  }
  return `"${kept}"`;
}
