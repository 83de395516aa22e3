/**
 * A JSON Schema (OpenAPI 3.1) said in a few words for people, and an example value built from it.
 * Only the keywords the document uses are spelled out; a schema the page cannot say in words is
 * shown as its type, never guessed at.
 */
import { arrayAt, isObject, objectAt, refName, resolve, stringAt, type Json } from './document.ts';
import { html, type Html } from './html.ts';

/** A schema's type followed by its rules, separated in the text itself (read aloud, copied). */
export function typeAndRules(document: Json, schema: unknown): Html {
  return html`<span class="type">${typeOf(document, schema)}</span>${rulesOf(document, schema).map((rule) => html`<span class="sep"> · </span>${rule}`)}`;
}

/** The anchor of a component schema's entry on the page. */
export const schemaAnchor = (name: string) => `schema-${name.replace(/[^A-Za-z0-9_-]/g, '-')}`;

const literal = (value: unknown) => html`<code>${JSON.stringify(value)}</code>`;

/** The type, with its format, or what an array holds; a referenced schema is a link to it. */
export function typeOf(document: Json, schema: unknown): Html {
  const name = refName(schema);
  if (name !== undefined) return html`<a href="#${schemaAnchor(name)}">${name}</a>`;
  const resolved = resolve(document, schema);
  // A narrowed schema (`allOf` of a component and its restrictions) is that component.
  const named = arrayAt(resolved, 'allOf').filter((part) => refName(part) !== undefined);
  if (named.length > 0) return html`${named.map((part, i) => [i > 0 ? ' and ' : '', typeOf(document, part)])}`;
  // A value that may also be null (`"type": ["string", "null"]`) says so.
  const types = arrayAt(resolved, 'type').filter((each): each is string => typeof each === 'string');
  const type = types.length > 0 ? types.join(' or ') : stringAt(resolved, 'type');
  if (type === 'array') return html`array of ${typeOf(document, resolved.items)}`;
  const format = stringAt(resolved, 'format');
  if (type === undefined) return html`any`;
  return format === undefined ? html`${type}` : html`${type} (${format})`;
}

function range(low: unknown, high: unknown, unit: string): string | undefined {
  const with_ = (value: unknown) => `${value}${unit}`;
  if (low !== undefined && high !== undefined) return low === high ? `exactly ${with_(low)}` : `${low} to ${with_(high)}`;
  if (low !== undefined) return `at least ${with_(low)}`;
  if (high !== undefined) return `at most ${with_(high)}`;
  return undefined;
}

/**
 * The rules of a schema as short phrases: its values (enum, const), bounds, length, pattern and
 * default. A referenced schema contributes its rules, so a parameter shows the enum it refers to.
 */
export function rulesOf(document: Json, schema: unknown): Html[] {
  const resolved = resolve(document, schema);
  const own = isObject(schema) ? schema : {};
  const rules: Html[] = [];
  const values = arrayAt(resolved, 'enum');
  if (values.length > 0) rules.push(html`one of ${values.map((value, i) => [i > 0 ? ', ' : '', literal(value)])}`);
  if ('const' in resolved) rules.push(html`always ${literal(resolved.const)}`);
  const bounds = range(resolved.minimum, resolved.maximum, '');
  if (bounds !== undefined) rules.push(html`${bounds}`);
  const length = range(resolved.minLength, resolved.maxLength, ' characters');
  if (length !== undefined) rules.push(html`${length}`);
  const items = range(resolved.minItems, resolved.maxItems, ' items');
  if (items !== undefined) rules.push(html`${items}`);
  const pattern = stringAt(resolved, 'pattern');
  if (pattern !== undefined) rules.push(html`matches <code class="pattern">${pattern}</code>`);
  // A default written beside a reference belongs to this use of the schema.
  const fallback = 'default' in own ? own.default : resolved.default;
  if (fallback !== undefined) rules.push(html`default ${literal(fallback)}`);
  return rules;
}

/** The description of a schema as used here: its own, else the one of the schema it refers to. */
export function descriptionOf(document: Json, schema: unknown): string | undefined {
  return stringAt(schema, 'description') ?? stringAt(resolve(document, schema), 'description');
}

/**
 * An example value: the schema's first `examples` entry, its `const`, default or first enum
 * value, else one built from its type and bounds. Objects get every property, so that an example
 * shows the whole shape.
 */
export function exampleOf(document: Json, schema: unknown, depth = 0): unknown {
  if (depth > 8) return null;
  const own = isObject(schema) ? schema : {};
  const resolved = resolve(document, schema);
  for (const source of [own, resolved]) {
    const examples = arrayAt(source, 'examples');
    if (examples.length > 0) return examples[0];
    if ('const' in source) return source.const;
    if (source.default !== undefined) return source.default;
    const values = arrayAt(source, 'enum');
    if (values.length > 0) return values[0];
  }
  // One of several shapes (the statuses of the `default` response): the first one is an example.
  const alternatives = arrayAt(resolved, 'oneOf');
  if (alternatives.length > 0) return exampleOf(document, alternatives[0], depth + 1);
  const parts = arrayAt(resolved, 'allOf');
  if (parts.length > 0) {
    // Later parts narrow earlier ones (the Error schema, then the codes of one response).
    return Object.assign({}, ...parts.map((part) => exampleOf(document, part, depth + 1)).filter(isObject));
  }
  switch (stringAt(resolved, 'type')) {
    case 'object': {
      const example: Record<string, unknown> = {};
      for (const [name, property] of Object.entries(objectAt(resolved, 'properties'))) example[name] = exampleOf(document, property, depth + 1);
      return example;
    }
    case 'array':
      return [exampleOf(document, resolved.items, depth + 1)];
    case 'integer':
    case 'number':
      return typeof resolved.minimum === 'number' ? resolved.minimum : 1;
    case 'boolean':
      return true;
    case 'string':
      return '…';
    default:
      return null;
  }
}
