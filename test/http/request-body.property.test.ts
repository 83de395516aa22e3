/**
 * Properties of the body parser and the body validator over hostile input: any bytes
 * give a value or `invalid_json`, never another error; a creation body and a merge patch
 * are accepted exactly when the contract's rules (written out independently in
 * support/property.ts) say so.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ApiError } from '../../src/http/api-error.ts';
import { parseJson } from '../../src/http/request-body.ts';
import { validateBody } from '../../src/api/validator.ts';
import { newPetSchema, petPatchSchema, type ObjectSchema } from '../../src/api/schemas.ts';
import { anyCodePoint, isValidCategoryLiteral, isValidName, settings } from '../support/property.ts';

const encoder = new TextEncoder();
const bytes = (text: string) => encoder.encode(text);
const BOM = new Uint8Array([0xef, 0xbb, 0xbf]);

/** Runs `action` and returns the ApiError code it threw, or null if it returned. */
function thrownCode(action: () => unknown): string | null {
  try {
    action();
    return null;
  } catch (error) {
    if (error instanceof ApiError) return error.code;
    throw error; // anything else would be a 500: the property fails with it
  }
}

/** An independent check of UTF-8 well-formedness: decoding and re-encoding gives the bytes back. */
function isWellFormedUtf8(input: Uint8Array): boolean {
  const buffer = Buffer.from(input);
  return Buffer.from(buffer.toString('utf8'), 'utf8').equals(buffer);
}

/** Strings with everything JSON allows and then some: lone surrogates, controls, BOMs, quotes. */
const hostileString = fc.string({
  unit: fc.oneof(
    { weight: 4, arbitrary: anyCodePoint },
    { weight: 1, arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit)) },
    { weight: 1, arbitrary: fc.constantFrom('\u0000', '\u001f', '\u007f', '\u0085', '\u009f', '\ufeff', '\u2028', '"', '\\', ' ', '\t', '\u00a0') },
  ),
  maxLength: 120,
});

/** Numbers as JSON text: signs, leading zeros, fractions, exponents, 2^53 and 2^63 neighbours. */
const numberLiteral = fc.oneof(
  fc.tuple(
    fc.constantFrom('', '-'),
    fc.stringMatching(/^[0-9]{1,25}$/),
    fc.constantFrom('', '.0', '.5', '.000'),
    fc.constantFrom('', 'e0', 'e2', 'E+2', 'e-2', 'e400', 'e-400'),
  ).map(([sign, digits, fraction, exponent]) => sign + digits + fraction + exponent),
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map(String),
  fc.constantFrom('0', '-0', '1', '9007199254740993', '9223372036854775807', '9223372036854775808', '1e2', '1.0', '-1', '00', '01'),
  fc.double().filter(Number.isFinite).map((value) => JSON.stringify(value)),
);

test('any bytes parse to a value or fail as invalid_json, never another error', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 256 }), (input) => {
      const code = thrownCode(() => parseJson(input));
      assert.ok(code === null || code === 'invalid_json', String(code));
      if (!isWellFormedUtf8(input)) assert.equal(code, 'invalid_json');
    }),
    settings(2000),
  );
});

test('a JSON document with invalid UTF-8 inside a string is invalid_json', () => {
  const invalidSequence = fc.constantFrom(
    [0x80], [0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf8], [0xff], [0xc3], [0xe2, 0x82],
  );
  fc.assert(
    fc.property(fc.string({ maxLength: 20 }), invalidSequence, fc.string({ maxLength: 20 }), (before, bad, after) => {
      const text = bytes(`{"name":${JSON.stringify(before)}`);
      const rest = bytes(`${JSON.stringify(after).slice(1)},"categoryId":1}`);
      const input = new Uint8Array([...text.subarray(0, text.length - 1), ...bad, ...rest]);
      assert.equal(thrownCode(() => parseJson(input)), 'invalid_json');
    }),
    settings(1000),
  );
});

test('a byte-order mark before valid JSON is invalid_json (RFC 8259 section 8.1: senders must not add one)', () => {
  fc.assert(
    fc.property(fc.jsonValue(), (value) => {
      const input = new Uint8Array([...BOM, ...bytes(JSON.stringify(value))]);
      assert.equal(thrownCode(() => parseJson(input)), 'invalid_json');
    }),
    settings(500),
  );
});

test('any JSON value round-trips: the integer literals of a top-level object\'s members as exact bigints, other numbers as numbers', () => {
  const exact = (value: unknown): unknown => {
    if (typeof value !== 'number') return value;
    const text = JSON.stringify(value);
    return /^-?(?:0|[1-9][0-9]*)$/.test(text) ? BigInt(text) : Number(text);
  };
  const normalise = (value: unknown): unknown => {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
    const copy: Record<string, unknown> = {};
    for (const [key, member] of Object.entries(value)) Object.defineProperty(copy, key, { value: exact(member), enumerable: true, writable: true, configurable: true });
    return copy;
  };
  fc.assert(
    fc.property(fc.jsonValue(), (value) => {
      assert.deepEqual(parseJson(bytes(JSON.stringify(value))), normalise(value));
    }),
    settings(1000),
  );
});

test('whitespace only, or nothing but nesting, is invalid_json and never a RangeError', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 20_000 }),
      fc.constantFrom('[', '{"a":'),
      fc.boolean(),
      (depth, open, closed) => {
        const close = open === '[' ? ']' : '}';
        const text = open.repeat(depth) + (open === '[' ? '' : '1') + (closed ? close.repeat(depth) : '');
        const code = thrownCode(() => parseJson(bytes(text)));
        if (!closed) assert.equal(code, 'invalid_json');
        else assert.ok(code === null || code === 'invalid_json');
      },
    ),
    settings(200),
  );
  fc.assert(
    fc.property(fc.string({ unit: fc.constantFrom(' ', '\t', '\r', '\n') }), (blank) => {
      assert.equal(thrownCode(() => parseJson(bytes(blank))), 'invalid_json');
    }),
    settings(200),
  );
});

test('a repeated member name is invalid_json, at any depth and however it is escaped', () => {
  const key = fc.string({ unit: anyCodePoint, minLength: 0, maxLength: 8 });
  fc.assert(
    fc.property(key, fc.jsonValue(), fc.jsonValue(), fc.boolean(), fc.integer({ min: 0, max: 3 }), (name, first, second, escape, depth) => {
      const quoted = escape ? `"${[...name].map((point) => `\\u${point.charCodeAt(0).toString(16).padStart(4, '0')}${point.length > 1 ? `\\u${point.charCodeAt(1).toString(16).padStart(4, '0')}` : ''}`).join('')}"` : JSON.stringify(name);
      let text = `{${JSON.stringify(name)}:${JSON.stringify(first)},"other":1,${quoted}:${JSON.stringify(second)}}`;
      for (let level = 0; level < depth; level++) text = `{"level${level}":[${text}]}`;
      assert.equal(thrownCode(() => parseJson(bytes(text))), 'invalid_json');
    }),
    settings(1000),
  );
});

test('__proto__, constructor and prototype are plain unknown properties: invalid_body, and no prototype changes', () => {
  const dangerous = fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf');
  fc.assert(
    fc.property(dangerous, fc.jsonValue(), fc.boolean(), (name, value, nested) => {
      const member = `${JSON.stringify(name)}:${JSON.stringify(value)}`;
      const text = nested ? `{"name":"Rex","categoryId":1,"status":{${member}}}` : `{"name":"Rex","categoryId":1,${member}}`;
      const code = thrownCode(() => validateBody(parseJson(bytes(text)), newPetSchema));
      assert.equal(code, 'invalid_body');
      assert.equal(Object.getPrototypeOf({}), Object.prototype);
      assert.deepEqual(Object.keys(Object.prototype), []);
      assert.equal(({} as Record<string, unknown>).polluted, undefined);
    }),
    settings(500),
  );
});

test('categoryId is accepted exactly when it is plain digits from 1 to 2^63 - 1, and keeps its exact digits', () => {
  fc.assert(
    fc.property(numberLiteral, (literal) => {
      const text = `{"name":"Rex","categoryId":${literal}}`;
      let parsed: unknown;
      const parseCode = thrownCode(() => (parsed = parseJson(bytes(text))));
      if (parseCode !== null) {
        // Only a literal JSON itself rejects (leading zeros, a bare minus) may fail to parse.
        assert.equal(parseCode, 'invalid_json');
        assert.ok(!/^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/.test(literal), literal);
        return;
      }
      let pet: Record<string, unknown> | undefined;
      const code = thrownCode(() => (pet = validateBody(parsed, newPetSchema)));
      if (isValidCategoryLiteral(literal)) {
        assert.equal(code, null, literal);
        assert.equal(String(pet!.categoryId), literal);
      } else {
        assert.equal(code, 'invalid_body', literal);
      }
    }),
    settings(2000),
  );
});

test('name is accepted exactly when the contract says so, and stored exactly as sent', () => {
  fc.assert(
    fc.property(hostileString, (name) => {
      let pet: Record<string, unknown> | undefined;
      const code = thrownCode(() => (pet = validateBody(parseJson(bytes(`{"name":${JSON.stringify(name)},"categoryId":7}`)), newPetSchema)));
      if (isValidName(name)) {
        assert.equal(code, null, JSON.stringify(name));
        assert.equal(pet!.name, name);
      } else {
        assert.equal(code, 'invalid_body', JSON.stringify(name));
      }
    }),
    settings(3000),
  );
});

/** Pet bodies field by field, each field optional: valid values, hostile strings, any JSON, raw number literals, and sometimes one more property. */
const anyValue = fc.oneof(fc.jsonValue(), hostileString, numberLiteral.map((literal) => ({ literal })));
const petFields = fc.record(
  {
    name: fc.oneof(hostileString, anyValue),
    categoryId: fc.oneof(numberLiteral.map((literal) => ({ literal })), anyValue),
    status: fc.oneof(fc.constantFrom('available', 'pending', 'sold', 'Available', 'sold ', '', null), anyValue),
    extra: fc.tuple(fc.constantFrom('id', 'version', '__proto__', 'Name', 'status ', 'x'), anyValue),
  },
  { requiredKeys: [] },
);
type PetFields = Partial<Record<'name' | 'categoryId' | 'status', unknown>> & { extra?: [string, unknown] };

/** A value as JSON text: a `{ literal }` is written as is (numbers JSON.stringify would normalise). */
const toJson = (value: unknown): string => (value !== null && typeof value === 'object' && 'literal' in value ? String(value.literal) : JSON.stringify(value));

/** The body's JSON text, fields in a fixed order. */
function bodyText(fields: PetFields): string {
  const members: string[] = [];
  for (const name of ['name', 'categoryId', 'status'] as const) if (name in fields) members.push(`"${name}":${toJson(fields[name])}`);
  if (fields.extra) members.push(`${JSON.stringify(fields.extra[0])}:${toJson(fields.extra[1])}`);
  return `{${members.join(',')}}`;
}

/** Each field's creation rule, as the contract states it (support/property.ts), for a field that is present. */
const FIELD_RULES = {
  name: (fields: PetFields) => isValidName(fields.name),
  categoryId: ({ categoryId }: PetFields) => categoryId !== null && typeof categoryId === 'object' && 'literal' in categoryId && isValidCategoryLiteral(String(categoryId.literal)),
  status: (fields: PetFields) => ['available', 'pending', 'sold'].includes(fields.status as string),
};

/** Parses and validates the body against `schema`; null when a raw literal is not even JSON. */
function validated(fields: PetFields, schema: ObjectSchema): { code: string | null; value: Record<string, unknown> | undefined } | null {
  let parsed: unknown;
  if (thrownCode(() => (parsed = parseJson(bytes(bodyText(fields))))) !== null) return null;
  let value: Record<string, unknown> | undefined;
  const code = thrownCode(() => (value = validateBody(parsed, schema)));
  return { code, value };
}

test('any JSON body is a valid pet exactly when every field is, and otherwise invalid_body', () => {
  fc.assert(
    fc.property(petFields, (fields: PetFields) => {
      const result = validated(fields, newPetSchema);
      if (result === null) return; // an unparsable literal
      const valid = FIELD_RULES.name(fields) && FIELD_RULES.categoryId(fields) && (!('status' in fields) || FIELD_RULES.status(fields)) && fields.extra === undefined;
      if (!valid) {
        assert.equal(result.code, 'invalid_body', bodyText(fields));
        return;
      }
      assert.equal(result.code, null, bodyText(fields));
      assert.deepEqual(Object.keys(result.value!), ['name', 'categoryId', 'status']);
      assert.equal(result.value!.status, 'status' in fields ? fields.status : 'available');
    }),
    settings(2000),
  );
});

test('any JSON body is a valid merge patch exactly when every field it holds is valid and it holds nothing else', () => {
  fc.assert(
    fc.property(petFields, (fields: PetFields) => {
      const result = validated(fields, petPatchSchema);
      if (result === null) return; // an unparsable literal
      const present = (['name', 'categoryId', 'status'] as const).filter((name) => name in fields);
      const valid = present.every((name) => FIELD_RULES[name](fields)) && fields.extra === undefined;
      if (!valid) {
        assert.equal(result.code, 'invalid_body', bodyText(fields));
        return;
      }
      assert.equal(result.code, null, bodyText(fields));
      // Exactly the fields sent, nothing defaulted: an absent field keeps the stored value.
      assert.deepEqual(Object.keys(result.value!), present);
      if ('status' in fields) assert.equal(result.value!.status, fields.status);
    }),
    settings(2000),
  );
});
