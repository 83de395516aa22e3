/**
 * The schema objects of schemas.ts as JSON Schema 2020-12, which OpenAPI 3.1 uses as is; the one
 * convention of ours (int64 values arrive as bigints) is invisible on the wire. Also the Error
 * schema, and references to the document's components.
 */
import { ERROR_STATUS, type ErrorCode } from '../errors.ts';
import { SCHEMAS, type ListSchema, type ObjectSchema, type Parameter, type PropertySchema, type Schema, type StringArraySchema } from '../schemas.ts';

/** A JSON object of the document; the parts are plain data, built for JSON.stringify. */
export type JsonObject = { [key: string]: unknown };

/** A reference to a component of the document. */
export const ref = (kind: 'schemas' | 'headers' | 'responses', name: string) => ({ $ref: `#/components/${kind}/${name}` });

/** The enums that are components of their own (PetStatus, OrderStatus), by the very array the schemas share. */
const ENUM_COMPONENTS = new Map<readonly string[] | undefined, string>(
  Object.entries(SCHEMAS).flatMap(([name, schema]) => (schema.type === 'string' && 'enum' in schema ? [[schema.enum, name] as const] : [])),
);

/**
 * A schema object of schemas.ts as a JSON Schema. A string schema that shares a status enum
 * becomes a reference to its component (`PetStatus`, `OrderStatus`), keeping its own annotations
 * (a default, a description).
 */
export function jsonSchema(schema: Schema | StringArraySchema): JsonObject {
  if (schema.type === 'array') return { ...schema, items: jsonSchema(schema.items) };
  const component = schema.type === 'string' ? ENUM_COMPONENTS.get(schema.enum) : undefined;
  if (schema.type === 'string' && component !== undefined) {
    const { type: _type, enum: _enum, ...annotations } = schema;
    return { ...ref('schemas', component), ...annotations };
  }
  if (schema.type === 'object') {
    const properties: JsonObject = {};
    for (const [name, property] of Object.entries(schema.properties)) properties[name] = jsonSchema(property);
    return { ...schema, properties, required: [...schema.required] };
  }
  if (schema.type === 'string' && schema.nullable) {
    const { nullable: _nullable, ...rest } = schema;
    return { ...rest, type: ['string', 'null'] };
  }
  return schema.type === 'string' && schema.enum ? { ...schema, enum: [...schema.enum] } : { ...schema };
}

/**
 * A schema that is only ever a request body. Its defaults are said in words, not with the
 * `default` keyword: openapi-typescript 7 types a property with a default as always present
 * (right for responses, where the service filled it in) unless the schema is written inside the
 * request body, and a component schema is not.
 */
export function requestSchema(schema: ObjectSchema): JsonObject {
  const properties: Record<string, PropertySchema> = {};
  for (const [name, property] of Object.entries(schema.properties)) {
    if (property.default === undefined) {
      properties[name] = property;
      continue;
    }
    const { default: fallback, ...rest } = property;
    properties[name] = { ...rest, description: `${rest.description ?? ''} Omitted means \`${fallback}\`.`.trimStart() } as PropertySchema;
  }
  return jsonSchema({ ...schema, properties });
}

export function parameter(source: Parameter): JsonObject {
  const { schema } = source;
  return {
    name: source.name,
    in: source.in,
    // Path parameters are always required (OpenAPI 3.1, Parameter Object).
    ...(source.required || source.in === 'path' ? { required: true } : {}),
    description: source.description,
    // A list is one comma-separated value (`?types=a,b`), not the parameter repeated.
    ...(schema.type === 'array' ? { style: 'form', explode: false } : {}),
    schema: schema.type === 'array' ? listSchema(schema) : jsonSchema(schema),
  };
}

function listSchema(schema: ListSchema): JsonObject {
  return { ...schema, items: jsonSchema(schema.items) };
}

export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[];

/**
 * An upper bound of an error message, in characters. The longest messages name the problems of a
 * request: at most five of them (the others are counted), each a field's rule or a name the client
 * sent cut to 32 bytes (api/validator.ts, lib/quote.ts), so about 420 characters at most, however
 * large the request. test/api/openapi/bounds.test.ts sends the requests that provoke the longest.
 */
export const MAX_ERROR_MESSAGE_LENGTH = 600;

export const errorSchema = {
  type: 'object',
  description: 'Every error body: exactly these three properties.',
  properties: {
    code: { type: 'string', description: 'Machine-readable and permanent.', enum: ERROR_CODES },
    message: { type: 'string', description: 'For people; may change. It names the bad fields of the request, the first five of them.', maxLength: MAX_ERROR_MESSAGE_LENGTH },
    status: { type: 'integer', format: 'int32', description: 'The HTTP status of the response.', minimum: 400, maximum: 599 },
  },
  required: ['code', 'message', 'status'],
  additionalProperties: false,
};
