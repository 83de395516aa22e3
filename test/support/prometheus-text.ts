/**
 * A strict reader of the Prometheus text exposition format 0.0.4, for tests: it throws on any
 * line it cannot read, on a sample whose family has no TYPE line before it, and on a family
 * declared twice, so a test that reads values also checks the shape.
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** Family name -> TYPE. */
  types: Map<string, string>;
  /** Family name -> HELP text (unescaped). */
  helps: Map<string, string>;
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)$`);
const META = new RegExp(`^# (HELP|TYPE) (${NAME}) (.*)$`);
const SUFFIXES: Readonly<Record<string, readonly string[]>> = { histogram: ['_bucket', '_sum', '_count'], summary: ['_sum', '_count'] };

/** Parses `text`; throws an Error naming the line on anything malformed. */
export function parseExposition(text: string): Exposition {
  if (!text.endsWith('\n')) throw new Error('the exposition does not end with a line feed');
  const exposition: Exposition = { samples: [], types: new Map(), helps: new Map() };
  for (const [index, line] of text.slice(0, -1).split('\n').entries()) {
    const where = `line ${index + 1}: ${JSON.stringify(line)}`;
    const meta = META.exec(line);
    if (meta) {
      const [, kind, name, rest] = meta as unknown as [string, 'HELP' | 'TYPE', string, string];
      const map = kind === 'HELP' ? exposition.helps : exposition.types;
      if (map.has(name)) throw new Error(`${where}: a second ${kind} for ${name}`);
      if (kind === 'TYPE' && !['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest)) throw new Error(`${where}: unknown type`);
      map.set(name, kind === 'HELP' ? rest.replaceAll('\\n', '\n').replaceAll('\\\\', '\\') : rest);
      continue;
    }
    const sample = SAMPLE.exec(line);
    if (!sample) throw new Error(`${where}: not a sample`);
    const [, name, labelText, valueText] = sample as unknown as [string, string, string | undefined, string];
    if (familyOf(name, exposition.types) === null) throw new Error(`${where}: no TYPE line for ${name} before it`);
    exposition.samples.push({ name, labels: labelText === undefined ? {} : parseLabels(labelText, where), value: parseValue(valueText, where) });
  }
  return exposition;
}

function familyOf(name: string, types: Map<string, string>): string | null {
  if (types.has(name)) return name;
  for (const [family, type] of types) {
    if ((SUFFIXES[type] ?? []).some((suffix) => name === family + suffix)) return family;
  }
  return null;
}

function parseLabels(text: string, where: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let rest = text;
  while (rest !== '') {
    const match = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,?)/.exec(rest);
    if (!match) throw new Error(`${where}: bad labels at ${JSON.stringify(rest)}`);
    const [whole, name, escaped, comma] = match as unknown as [string, string, string, string];
    if (Object.hasOwn(labels, name)) throw new Error(`${where}: label ${name} twice`);
    labels[name] = escaped.replace(/\\([\\"n])/g, (_, character: string) => (character === 'n' ? '\n' : character));
    rest = rest.slice(whole.length);
    if (comma === '' && rest !== '') throw new Error(`${where}: labels not separated by a comma`);
  }
  return labels;
}

function parseValue(text: string, where: string): number {
  if (text === '+Inf') return Infinity;
  if (text === '-Inf') return -Infinity;
  if (text === 'NaN') return Number.NaN;
  const value = Number(text);
  if (text.trim() === '' || Number.isNaN(value)) throw new Error(`${where}: bad value`);
  return value;
}

/** The samples named `name` whose labels include `labels`. */
export function samplesOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return exposition.samples.filter((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value));
}

/** The value of the one sample named `name` with exactly `labels`; throws when there is none. */
export function valueOf(exposition: Exposition, name: string, labels: Record<string, string> = {}): number {
  const found = exposition.samples.filter(
    (sample) => sample.name === name && Object.keys(sample.labels).length === Object.keys(labels).length && Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
  if (found.length !== 1) throw new Error(`${found.length} samples ${name}${JSON.stringify(labels)}`);
  return found[0]!.value;
}
