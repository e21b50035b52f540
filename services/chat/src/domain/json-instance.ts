/**
 * A small value that validates against a JSON Schema, for the simulator's tool arguments and structured answers.
 * It covers what tool and response schemas use (OpenAI's structured-outputs subset and zod's output): `type`
 * (one or several), `const`, `enum`, `anyOf` / `oneOf` (the first branch), `allOf` (objects merged), local `$ref`s
 * (`#/$defs/…`, `#/definitions/…`), required properties, `minItems`, `minLength`, `minimum` / `maximum`,
 * `multipleOf` and common string formats. `pattern` is not solved. Strings are taken from the property's name,
 * so that the same schema always gets the same value.
 */
type Schema = Record<string, unknown>;
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Deeper than this (a recursive `$ref`), the value stops at null or an empty container. */
const MAX_DEPTH = 12;

const FORMATS: Record<string, string> = {
  'date-time': '2026-01-01T00:00:00Z',
  date: '2026-01-01',
  time: '00:00:00Z',
  email: 'user@example.com',
  uri: 'https://example.com/',
  url: 'https://example.com/',
  uuid: '00000000-0000-4000-8000-000000000000',
  ipv4: '192.0.2.1',
  ipv6: '2001:db8::1',
  hostname: 'example.com',
  duration: 'P1D',
};

export function instanceOf(schema: unknown): Json {
  const root = isSchema(schema) ? schema : {};
  return valueFor(root, root, 'value', 0);
}

const isSchema = (v: unknown): v is Schema => v !== null && typeof v === 'object' && !Array.isArray(v);

function resolve(ref: string, root: Schema): Schema {
  if (!ref.startsWith('#')) return {};
  let node: unknown = root;
  for (const raw of ref.slice(1).split('/').filter(Boolean)) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    node = isSchema(node) ? node[key] : undefined;
  }
  return isSchema(node) ? node : {};
}

function typeOf(schema: Schema): string | undefined {
  const type = schema.type;
  if (typeof type === 'string') return type;
  // Several types: a non-null one, so that a nullable field still shows a value.
  if (Array.isArray(type)) return (type.find((t) => t !== 'null') ?? type[0]) as string | undefined;
  if (isSchema(schema.properties) || Array.isArray(schema.required)) return 'object';
  if (schema.items !== undefined || schema.prefixItems !== undefined) return 'array';
  return undefined;
}

function valueFor(schema: Schema, root: Schema, name: string, depth: number): Json {
  if (depth > MAX_DEPTH) return null;
  if (typeof schema.$ref === 'string') return valueFor({ ...resolve(schema.$ref, root), ...withoutRef(schema) }, root, name, depth + 1);
  if ('const' in schema) return schema.const as Json;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0] as Json;
  const branch = Array.isArray(schema.anyOf) ? schema.anyOf[0] : Array.isArray(schema.oneOf) ? schema.oneOf[0] : undefined;
  if (isSchema(branch)) return valueFor(branch, root, name, depth + 1);
  if (Array.isArray(schema.allOf)) {
    const merged = schema.allOf.filter(isSchema).map((s) => (typeof s.$ref === 'string' ? resolve(s.$ref, root) : s));
    return valueFor(mergeAll(withoutAllOf(schema), merged), root, name, depth + 1);
  }
  switch (typeOf(schema)) {
    case 'object':
      return objectFor(schema, root, depth);
    case 'array': {
      const count = typeof schema.minItems === 'number' ? Math.min(schema.minItems, 16) : 0;
      const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems.filter(isSchema) : [];
      const items = isSchema(schema.items) ? schema.items : {};
      return Array.from({ length: Math.max(count, prefix.length) }, (_, i) => valueFor(prefix[i] ?? items, root, name, depth + 1));
    }
    case 'string':
      return stringFor(schema, name);
    case 'integer':
      return numberFor(schema, true);
    case 'number':
      return numberFor(schema, false);
    case 'boolean':
      return true;
    case 'null':
      return null;
    default:
      return null;
  }
}

function objectFor(schema: Schema, root: Schema, depth: number): Json {
  const properties = isSchema(schema.properties) ? schema.properties : {};
  const required = Array.isArray(schema.required) ? schema.required.filter((k): k is string => typeof k === 'string') : [];
  const out: { [key: string]: Json } = {};
  for (const key of required) {
    const property = properties[key];
    out[key] = valueFor(isSchema(property) ? property : {}, root, key, depth + 1);
  }
  const fewest = typeof schema.minProperties === 'number' ? schema.minProperties : 0;
  for (const [key, property] of Object.entries(properties)) {
    if (Object.keys(out).length >= fewest) break;
    if (!(key in out)) out[key] = valueFor(isSchema(property) ? property : {}, root, key, depth + 1);
  }
  return out;
}

function stringFor(schema: Schema, name: string): string {
  const format = typeof schema.format === 'string' ? FORMATS[schema.format] : undefined;
  let text = format ?? name;
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : Infinity;
  while (text.length < min) text += ` ${name}`;
  return text.slice(0, Math.max(min, Math.min(max, text.length)));
}

function numberFor(schema: Schema, integer: boolean): number {
  const num = (key: string) => (typeof schema[key] === 'number' ? (schema[key] as number) : undefined);
  const step = num('multipleOf') ?? (integer ? 1 : undefined);
  let low = num('minimum') ?? -Infinity;
  const exclusiveLow = num('exclusiveMinimum');
  if (exclusiveLow !== undefined) low = Math.max(low, exclusiveLow + (step ?? Number.EPSILON * Math.max(1, Math.abs(exclusiveLow))));
  let high = num('maximum') ?? Infinity;
  const exclusiveHigh = num('exclusiveMaximum');
  if (exclusiveHigh !== undefined) high = Math.min(high, exclusiveHigh - (step ?? Number.EPSILON * Math.max(1, Math.abs(exclusiveHigh))));
  let value = Math.min(Math.max(0, low), high);
  if (step !== undefined) value = Math.ceil(value / step) * step;
  if (value > high && step !== undefined) value -= step;
  return integer ? Math.round(value) : value;
}

function withoutRef(schema: Schema): Schema {
  const { $ref: _, ...rest } = schema;
  return rest;
}

function withoutAllOf(schema: Schema): Schema {
  const { allOf: _, ...rest } = schema;
  return rest;
}

/** `allOf` as one schema: properties and required lists together, other keywords from the last that names them. */
function mergeAll(base: Schema, parts: Schema[]): Schema {
  const merged: Schema = { ...base };
  for (const part of parts) {
    const properties = { ...(isSchema(merged.properties) ? merged.properties : {}), ...(isSchema(part.properties) ? part.properties : {}) };
    const required = [...(Array.isArray(merged.required) ? merged.required : []), ...(Array.isArray(part.required) ? part.required : [])];
    Object.assign(merged, part, { properties, required });
  }
  return merged;
}
