import { ApiErrorBodySchema, IdempotencyKeySchema, LastEventIdSchema } from '@oc/contracts';
import { z } from 'zod';
import type { Route } from './routes';

const schemaOf = (schema: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' });

const integerHeader = (description: string) => ({ description, schema: { type: 'integer' } });

/** The spec's "every response carries rate-limit headers": the tightest window that applied. */
const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': integerHeader('Requests allowed in the tightest window that applied'),
  'X-RateLimit-Remaining': integerHeader('Requests left in that window'),
  'X-RateLimit-Reset': integerHeader('Unix seconds at which that window resets'),
};

/** Every answer's id, the one our logs and traces give the request (OpenAI's SDKs read it as `_request_id`). */
const REQUEST_ID_HEADERS = {
  'X-Request-Id': { description: 'This request\u2019s id in our logs and traces (req_ and 32 hex digits); quote it when asking about a request', schema: { type: 'string' } },
};

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid request: a malformed body, query or header',
  401: 'Missing or invalid credentials',
  402: 'Insufficient balance for what the request must reserve',
  403: 'Not allowed: a missing scope, the wrong kind of console session, a missing CSRF token or a cross-origin request',
  404: 'No such resource in this organization',
  409: 'Conflicts with an earlier request (a reused Idempotency-Key, an existing member)',
  410: 'Gone: the video outlived temporary storage, or its temporary URL expired',
  413: 'The body exceeds 1 MiB',
  415: 'The body is not JSON (or a form where one is accepted)',
  416: 'The Range cannot be satisfied',
  422: 'The prompt violates the content policy',
  429: 'A rate limit was reached; retry after Retry-After seconds',
  500: 'Internal error',
  503: 'A service is unavailable; retry after Retry-After seconds',
};

/**
 * The error statuses an operation may answer: those every operation of its kind may (its credentials, its
 * body, its parameters, the limits, the services behind it), and its own (`doc.errors`).
 */
function errorStatuses(route: Route<unknown>, security: 'apiKey' | 'adminToken' | 'consoleSession' | null): number[] {
  const doc = route.doc;
  const statuses = new Set([429, 500, 503, ...(doc?.errors ?? [])]);
  const body = route.method === 'POST' || route.method === 'PATCH';
  if (body || doc?.query || doc?.events || doc?.idempotent) statuses.add(400);
  if (body) statuses.add(413).add(415);
  if (security) statuses.add(401);
  if ((security === 'apiKey' && route.scope) || security === 'consoleSession') statuses.add(403);
  // A path parameter, or a cursor (`after`), may name nothing.
  const cursor = doc?.query && 'after' in ((schemaOf(doc.query, 'input').properties ?? {}) as object);
  if (route.path.includes(':') || cursor) statuses.add(404);
  if (doc?.idempotent) statuses.add(409);
  if (doc?.ranges) statuses.add(416);
  return [...statuses].sort((a, b) => a - b);
}

/**
 * The OpenAPI 3.1 document, derived from the route table and the zod contracts the routes name: the
 * same schemas that validate requests describe them, so the document cannot drift from behaviour.
 */
export function openApiDocument(version: string, v1: Route<unknown>[], admin: Route<unknown>[], console: Route<unknown>[] = []) {
  const paths: Record<string, Record<string, unknown>> = {};
  const add = (route: Route<unknown>, security: 'apiKey' | 'adminToken' | 'consoleSession' | null) => {
    const doc = route.doc;
    const path = route.path.replace(/:([a-z_]+)/g, '{$1}');
    const pathParams = [...route.path.matchAll(/:([a-z_]+)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    const query = doc?.query ? schemaOf(doc.query, 'input') : undefined;
    const queryParams = Object.entries((query?.properties ?? {}) as Record<string, unknown>).map(([name, schema]) => ({
      name,
      in: 'query',
      required: ((query?.required as string[] | undefined) ?? []).includes(name),
      schema,
    }));
    const headerParams = [
      ...(doc?.idempotent
        ? [{ name: 'Idempotency-Key', in: 'header', required: false, schema: schemaOf(IdempotencyKeySchema, 'input') }]
        : []),
      ...(doc?.ranges ? [{ name: 'Range', in: 'header', required: false, schema: { type: 'string', pattern: '^bytes=' } }] : []),
      ...(security === 'consoleSession' && route.method !== 'GET'
        ? [{ name: 'X-CSRF-Token', in: 'header', required: true, schema: { type: 'string' }, description: 'The csrf_token of GET /console/v1/session' }]
        : []),
      ...(doc?.events
        ? [{ name: 'Last-Event-ID', in: 'header', required: false, description: 'Resume after this event', schema: schemaOf(LastEventIdSchema, 'input') }]
        : []),
    ];
    const headers = security === 'apiKey' ? { ...REQUEST_ID_HEADERS, ...RATE_LIMIT_HEADERS } : REQUEST_ID_HEADERS;
    const requestSchema = doc?.request ? schemaOf(doc.request, 'input') : undefined;
    const content: Record<string, unknown> = {
      ...(doc?.response ? { 'application/json': { schema: schemaOf(doc.response, 'output') } } : {}),
      ...Object.fromEntries((doc?.media ?? []).map((type) => [type, {}])),
      // OpenAPI 3.1 cannot describe the events of a stream; their `data` is given as an extension.
      ...(doc?.events ? { 'text/event-stream': { schema: { type: 'string' }, 'x-event-data': schemaOf(doc.events, 'output') } } : {}),
    };
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = {
      operationId: `${route.method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[/_-]+(\w)/g, (_, c: string) => c.toUpperCase())}`,
      summary: doc?.summary ?? `${route.method} ${path}`,
      security: security ? [{ [security]: [] }] : [],
      ...(route.scope ? { 'x-required-scope': route.scope } : {}),
      parameters: [...pathParams, ...queryParams, ...headerParams],
      ...(requestSchema
        ? {
            requestBody: {
              required: true,
              content: {
                'application/json': { schema: requestSchema },
                ...(route.body === 'json-or-multipart' ? { 'multipart/form-data': { schema: doc?.form ? schemaOf(doc.form, 'input') : requestSchema } } : {}),
              },
            },
          }
        : {}),
      responses: {
        '200': {
          description: 'Success',
          headers: { ...headers, ...Object.fromEntries(Object.entries(doc?.headers ?? {}).map(([name, description]) => [name, integerHeader(description)])) },
          ...(Object.keys(content).length > 0 ? { content } : {}),
        },
        ...(doc?.ranges ? { '206': { description: 'One byte range', headers, content: Object.fromEntries((doc.media ?? []).map((t) => [t, {}])) } } : {}),
        ...Object.fromEntries(
          errorStatuses(route, security).map((status) => [
            String(status),
            {
              description: `${ERROR_DESCRIPTIONS[status]}, in the one error shape`,
              headers: status === 429 || status === 503 ? { ...headers, 'Retry-After': integerHeader('Seconds to wait') } : headers,
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
            },
          ]),
        ),
      },
    };
  };
  for (const route of v1) add(route, 'apiKey');
  for (const route of admin) add(route, 'adminToken');
  for (const route of console) add(route, (route as { who?: string }).who === 'anyone' ? null : 'consoleSession');
  return {
    openapi: '3.1.0',
    info: {
      title: 'OC API',
      version,
      description: 'Video generation, OpenAI-compatible chat and text completions, and signed webhooks, on a prepaid balance.',
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: oc_live_… or oc_test_…' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The operators\u2019 ADMIN_TOKEN' },
        consoleSession: {
          type: 'apiKey',
          in: 'cookie',
          name: 'oc_console',
          description: 'The web console\u2019s session, set by POST /console/v1/sessions (HttpOnly); changes also need X-CSRF-Token',
        },
      },
      schemas: { Error: schemaOf(ApiErrorBodySchema, 'output') },
    },
    paths,
  };
}
