import { ApiErrorBodySchema } from '@oc/contracts';
import { z } from 'zod';
import type { Route } from './routes';

const schemaOf = (schema: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(schema, { io, unrepresentable: 'any', target: 'draft-2020-12' });

/**
 * The OpenAPI 3.1 document, derived from the route table and the zod contracts the routes name: the
 * same schemas that validate requests describe them, so the document cannot drift from behaviour.
 */
export function openApiDocument(version: string, v1: Route<unknown>[], admin: Route<unknown>[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  const add = (route: Route<unknown>, security: string) => {
    const path = route.path.replace(/:([a-z_]+)/g, '{$1}');
    const pathParams = [...route.path.matchAll(/:([a-z_]+)/g)].map((m) => ({
      name: m[1],
      in: 'path',
      required: true,
      schema: { type: 'string' },
    }));
    const query = route.doc?.query ? schemaOf(route.doc.query, 'input') : undefined;
    const queryParams = Object.entries((query?.properties ?? {}) as Record<string, unknown>).map(([name, schema]) => ({
      name,
      in: 'query',
      required: ((query?.required as string[] | undefined) ?? []).includes(name),
      schema,
    }));
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = {
      summary: route.doc?.summary,
      security: [{ [security]: [] }],
      ...(route.scope ? { 'x-required-scope': route.scope } : {}),
      parameters: [...pathParams, ...queryParams],
      ...(route.doc?.request
        ? { requestBody: { required: true, content: { 'application/json': { schema: schemaOf(route.doc.request, 'input') } } } }
        : {}),
      responses: {
        '200': {
          description: 'Success',
          ...(route.doc?.response ? { content: { 'application/json': { schema: schemaOf(route.doc.response, 'output') } } } : {}),
        },
        default: { description: 'Error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
      },
    };
  };
  for (const route of v1) add(route, 'apiKey');
  for (const route of admin) add(route, 'adminToken');
  return {
    openapi: '3.1.0',
    info: { title: 'OC API', version },
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: oc_live_… or oc_test_…' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'The operators\u2019 ADMIN_TOKEN' },
      },
      schemas: { Error: schemaOf(ApiErrorBodySchema, 'output') },
    },
    paths,
  };
}
