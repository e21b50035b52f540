import { compileErrors, validate } from '@readme/openapi-parser';
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../src/transport/openapi';
import { adminRoutes } from '../src/transport/admin-routes';
import { consoleRoutes } from '../src/transport/console-routes';
import type { Route } from '../src/transport/routes';
import { v1Routes } from '../src/transport/v1-routes';

const document = () => {
  const v1 = v1Routes('1.0.0', Date.now);
  const admin = adminRoutes();
  // The console's session handlers are not called here, so they need no sessions object.
  const console = consoleRoutes(v1, admin, undefined as never);
  return openApiDocument('1.0.0', v1 as Route<unknown>[], admin as Route<unknown>[], console as Route<unknown>[]);
};

describe('the OpenAPI document', () => {
  it('is valid OpenAPI 3.1 by an independent validator (no duplicate operation ids or parameters)', async () => {
    const result = await validate(structuredClone(document()) as never);
    expect(result.valid ? '' : compileErrors(result)).toBe('');
    expect(result.specification).toBe('OpenAPI');
  });

  it('documents the console API with its cookie and, on every change, the CSRF header', () => {
    const doc = document() as any;
    expect(doc.components.securitySchemes.consoleSession).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'oc_console' });
    expect(doc.paths['/console/v1/sessions'].post.security).toEqual([]);
    expect(doc.paths['/console/v1/keys'].get.security).toEqual([{ consoleSession: [] }]);
    const csrf = (op: any) => op.parameters.some((p: any) => p.in === 'header' && p.name === 'X-CSRF-Token' && p.required);
    expect(csrf(doc.paths['/console/v1/keys'].post)).toBe(true);
    expect(csrf(doc.paths['/console/v1/keys'].get)).toBe(false);
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/console/v1/admin/'))).toHaveLength(
      Object.keys(doc.paths).filter((p) => p.startsWith('/admin/v1/')).length,
    );
  });

  it('describes every answer: a JSON schema or the media types served, the request id everywhere and the rate-limit headers on /v1', () => {
    const doc = document() as any;
    const operations = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods as Record<string, any>).map(([method, op]) => ({ path, method, op })),
    );
    expect(operations.length).toBeGreaterThanOrEqual(30);
    for (const { path, method, op } of operations) {
      const success = op.responses['200'];
      expect(Object.keys(success.content ?? {}), `${method} ${path}`).not.toEqual([]);
      if (path.startsWith('/v1/')) {
        expect(Object.keys(success.headers).slice(0, 4), `${method} ${path}`).toEqual(['X-Request-Id', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']);
      }
      for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
        expect(Object.keys(response.headers), `${method} ${path} ${status}`).toContain('X-Request-Id');
      }
    }
  });

  it("names openai-poll-after-ms on the video operations that send it, and on no other", () => {
    const doc = document() as any;
    const sending = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods as Record<string, any>)
        .filter(([, op]) => 'openai-poll-after-ms' in op.responses['200'].headers)
        .map(([method]) => `${method.toUpperCase()} ${path}`),
    );
    // The playground's create is the API's own.
    expect(sending.sort()).toEqual(['GET /console/v1/videos/{id}', 'GET /v1/videos/{id}', 'POST /console/v1/videos', 'POST /v1/videos', 'POST /v1/videos/{id}/remix']);
  });

  it('describes input_reference as an image file part of the form, or a data: URL in JSON', () => {
    const doc = document() as any;
    const { content } = doc.paths['/v1/videos'].post.requestBody;
    expect(content['multipart/form-data'].schema.properties.input_reference.anyOf[0]).toMatchObject({ type: 'string', format: 'binary' });
    expect(content['application/json'].schema.properties.input_reference.properties).toHaveProperty('image_url');
  });

  it('lists the error statuses each operation may answer, and no catch-all', () => {
    const doc = document() as any;
    const errors = (path: string, method: string) => Object.keys(doc.paths[path][method].responses).filter((s) => s >= '400');
    expect(errors('/v1/videos', 'post')).toEqual(['400', '401', '402', '403', '409', '413', '415', '422', '429', '500', '503']);
    expect(errors('/v1/videos/{id}/content', 'get')).toEqual(['400', '401', '403', '404', '410', '416', '429', '500', '503']);
    expect(errors('/v1/account/balance', 'get')).toEqual(['401', '429', '500', '503']);
    expect(errors('/admin/v1/organizations/{org_id}/members', 'post')).toEqual(['400', '401', '404', '409', '413', '415', '429', '500', '503']);
    expect(errors('/console/v1/sessions', 'post')).toEqual(['400', '401', '403', '413', '415', '429', '500', '503']);
    // A cursor may name nothing.
    expect(errors('/v1/videos', 'get')).toEqual(['400', '401', '403', '404', '429', '500', '503']);
    for (const methods of Object.values(doc.paths) as Record<string, any>[]) {
      for (const op of Object.values(methods)) expect(op.responses.default).toBeUndefined();
    }
  });

  it('documents the request headers the routes honour', () => {
    const doc = document() as any;
    const names = (path: string, method: string) => doc.paths[path][method].parameters.map((p: { name: string }) => p.name);
    expect(names('/v1/videos', 'post')).toContain('Idempotency-Key');
    expect(names('/v1/videos/{id}/content', 'get')).toEqual(['id', 'variant', 'Range']);
    expect(Object.keys(doc.paths['/v1/videos'].post.requestBody.content)).toEqual(['application/json', 'multipart/form-data']);
    expect(names('/v1/webhooks/events/stream', 'get')).toEqual(['events', 'Last-Event-ID']);
  });

  it("gives the event stream's events the schema of a delivery body", () => {
    const stream = (document() as any).paths['/v1/webhooks/events/stream'].get;
    expect(stream['x-required-scope']).toBe('webhook:read');
    const media = stream.responses['200'].content['text/event-stream'];
    // One envelope per kind of event (the video's, and each of billing's): the same four fields, in the spec's order.
    const envelopes = media['x-event-data'].oneOf as Array<{ required: string[]; properties: { type: { enum?: string[]; const?: string } } }>;
    for (const envelope of envelopes) expect(envelope.required).toEqual(['id', 'type', 'created', 'data']);
    expect(envelopes.flatMap((e) => e.properties.type.enum ?? [e.properties.type.const]).sort()).toEqual(
      ['balance.low', 'billing.budget_threshold', 'billing.payment_failed', 'billing.payment_succeeded', 'video.completed', 'video.failed', 'video.processing'],
    );
  });
});
