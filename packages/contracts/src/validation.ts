import type { z } from 'zod';
import { ApiError, invalidRequest } from './errors';

/** `messages[0].role`, as OpenAI names a nested parameter. */
function paramOf(path: readonly PropertyKey[]): string | undefined {
  let out = '';
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : out ? `.${String(part)}` : String(part);
  return out || undefined;
}

/**
 * Error codes per top-level parameter. A string applies when the value is invalid (a missing value stays
 * `missing_parameter`); an object also overrides the missing case, e.g. chat's `model` is `invalid_model` both ways.
 */
export type ValidationCodes = Record<string, string | { invalid: string; missing: string }>;

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value = input;
  for (const part of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[part];
  }
  return value;
}

/** Turns the first problem zod found into the spec's 400, naming the parameter at fault. */
export function validationError(error: z.ZodError, input: unknown, codes: ValidationCodes = {}): ApiError {
  const issue = error.issues[0];
  if (!issue) return invalidRequest('invalid_request', 'The request is invalid.');
  const param = paramOf(issue.path);
  const top = issue.path[0] === undefined ? undefined : String(issue.path[0]);
  const missing = valueAt(input, issue.path) === undefined;
  if (issue.code === 'unrecognized_keys') {
    // Nested (`limits.request_per_minute`), the parameter is named by its whole path.
    const unknown = issue.keys.map((key) => paramOf([...issue.path, key])!);
    return invalidRequest('unknown_parameter', `Unrecognized request argument supplied: ${unknown.join(', ')}.`, unknown[0]);
  }
  if (!param) return invalidRequest('invalid_request', `The request body is invalid: ${issue.message}.`);
  const override = top === undefined ? undefined : codes[top];
  if (missing) {
    const code = typeof override === 'object' ? override.missing : 'missing_parameter';
    return invalidRequest(code, `Missing required parameter: '${param}'.`, param);
  }
  const code = typeof override === 'object' ? override.invalid : (override ?? 'invalid_parameter');
  return invalidRequest(code, `Invalid '${param}': ${issue.message}.`, param);
}

export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, codes?: ValidationCodes): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  throw validationError(result.error, input, codes);
}
