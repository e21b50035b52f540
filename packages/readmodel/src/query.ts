import type { Filter, FindOptions } from './port';

/**
 * The query surface of the read-model port: the part of MongoDB's filter language the services use, and
 * nothing more, so that no adapter can drift from another. Every adapter parses filters with `parseFilter`
 * and refuses anything else with `UnsupportedQueryError`.
 *
 * A filter is an object of field paths (`org_id`, `owner.team`) with, for each, either a scalar (string,
 * finite number, boolean or null) meaning equality, or one operator object:
 *   `$eq`, `$ne`          a scalar
 *   `$in`, `$nin`         an array of scalars
 *   `$lt` `$lte` `$gt` `$gte`   a string or a finite number (compare values of one type only)
 *   `$elemMatch: {$eq}`   the field is an array with an element equal to the scalar
 * Several operators on one field, and several fields, all apply. Null (and `$eq: null`) matches a missing
 * field too; `$ne` and `$nin` match documents without the field, as in MongoDB. Arrays match only through
 * `$elemMatch`, and booleans compare as 1/0 in the embedded adapter, so do not mix them with numbers.
 */

export type Scalar = string | number | boolean | null;

export type Condition =
  | { path: string; op: '$eq' | '$ne'; value: Scalar }
  | { path: string; op: '$in' | '$nin'; value: Scalar[] }
  | { path: string; op: '$lt' | '$lte' | '$gt' | '$gte'; value: string | number }
  | { path: string; op: '$elemMatch'; value: Scalar };

export class UnsupportedQueryError extends Error {
  constructor(message: string) {
    super(`Unsupported read-model query: ${message}`);
    this.name = 'UnsupportedQueryError';
  }
}

const PATH = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/;
const RANGE = new Set(['$lt', '$lte', '$gt', '$gte']);

const isScalar = (value: unknown): value is Scalar =>
  value === null ||
  typeof value === 'string' ||
  typeof value === 'boolean' ||
  (typeof value === 'number' && Number.isFinite(value));

export function checkPath(path: string): string {
  if (!PATH.test(path)) throw new UnsupportedQueryError(`field path '${path}'`);
  return path;
}

export function parseFilter(filter: Filter): Condition[] {
  const conditions: Condition[] = [];
  for (const [path, spec] of Object.entries(filter)) {
    checkPath(path);
    if (isScalar(spec)) {
      conditions.push({ path, op: '$eq', value: spec });
      continue;
    }
    if (typeof spec !== 'object' || Array.isArray(spec) || Object.keys(spec).length === 0) {
      throw new UnsupportedQueryError(`the value of '${path}' (arrays and documents cannot be compared whole)`);
    }
    for (const [op, value] of Object.entries(spec as Record<string, unknown>)) {
      conditions.push(parseOperator(path, op, value));
    }
  }
  return conditions;
}

function parseOperator(path: string, op: string, value: unknown): Condition {
  if ((op === '$eq' || op === '$ne') && isScalar(value)) return { path, op, value };
  if ((op === '$in' || op === '$nin') && Array.isArray(value) && value.every(isScalar)) return { path, op, value };
  if (RANGE.has(op) && (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value)))) {
    return { path, op: op as '$lt' | '$lte' | '$gt' | '$gte', value };
  }
  if (op === '$elemMatch' && value !== null && typeof value === 'object') {
    const inner = Object.entries(value);
    if (inner.length === 1 && inner[0]![0] === '$eq' && isScalar(inner[0]![1])) return { path, op, value: inner[0]![1] };
  }
  throw new UnsupportedQueryError(`operator ${op} on '${path}' with ${JSON.stringify(value)}`);
}

export interface SortKey {
  path: string;
  direction: 1 | -1;
}

/** The sort keys, and the keyset cursor checked against them. */
export function parseOptions(options: FindOptions): { sort: SortKey[]; after: readonly unknown[] | undefined; limit: number } {
  const sort = Object.entries(options.sort ?? {}).map(([path, direction]) => {
    if (direction !== 1 && direction !== -1) throw new UnsupportedQueryError(`sort direction ${String(direction)} on '${path}'`);
    return { path: checkPath(path), direction };
  });
  const after = options.after;
  if (after !== undefined) {
    if (after.length !== sort.length || sort.length === 0) {
      throw new UnsupportedQueryError('`after` needs one value per sort key');
    }
    if (!after.every((v) => typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v)))) {
      throw new UnsupportedQueryError('`after` values must be strings or finite numbers');
    }
  }
  const limit = options.limit ?? 0;
  if (!Number.isInteger(limit) || limit < 0) throw new UnsupportedQueryError(`limit ${limit}`);
  return { sort, after, limit };
}
