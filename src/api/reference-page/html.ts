/**
 * A tagged template for HTML: every interpolated value is escaped unless it is itself built by
 * `html` (or `raw`), so no text of the OpenAPI document can become markup by accident.
 */

/** A piece of markup that is already safe to insert. */
export class Html {
  readonly text: string;

  constructor(text: string) {
    this.text = text;
  }

  toString(): string {
    return this.text;
  }
}

/** What may be interpolated: text (escaped), markup, lists of either, or nothing. */
export type Part = string | number | Html | null | undefined | false | readonly Part[];

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for an element's content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => ESCAPES[character]!);
}

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return '';
  if (part instanceof Html) return part.text;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(String(part));
}

/** `html\`<p>${text}</p>\``: markup with every interpolation escaped. */
export function html(strings: TemplateStringsArray, ...parts: Part[]): Html {
  let text = strings[0]!;
  for (let i = 0; i < parts.length; i++) text += render(parts[i]!) + strings[i + 1]!;
  return new Html(text);
}

/** Markup written by us (a constant), inserted as is. */
export function raw(text: string): Html {
  return new Html(text);
}

/**
 * The one formatting the document's descriptions use: `code` spans between backticks. Everything
 * else is text.
 */
export function prose(text: string): Html {
  const pieces = text.split('`');
  // An unpaired backtick stays a backtick.
  if (pieces.length % 2 === 0) return html`${text}`;
  return new Html(pieces.map((piece, i) => (i % 2 === 1 ? `<code>${escapeHtml(piece)}</code>` : escapeHtml(piece))).join(''));
}
