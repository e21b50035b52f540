/**
 * Hostile input, generated with fast-check over every public route of the gateway's route table: bodies
 * whose fields have the wrong type, huge numbers, deep nesting, NUL bytes or lone surrogates; raw bodies
 * that are not JSON, carry duplicate keys, or come with the wrong content type or encoding; hostile query
 * strings, path ids and headers. Whatever is sent, the answer is never a 5xx, is always the spec's error
 * body (with the parameter at fault named when the contract refuses a field), and never takes longer than
 * RESPONSE_BOUND_MS. The protocol-level cases (what Node's parser refuses) are in the gateway's own suite.
 */
import fc from 'fast-check';
import type { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Route } from '../../gateway/src/transport/routes';
import { MAX_BODY_BYTES } from '../../gateway/src/transport/request-body';
import { v1Routes } from '../../gateway/src/transport/v1-routes';
import { clientFor } from './client';
import { embedded, type RunningService } from './harness';

const RESPONSE_BOUND_MS = 2_000;
const ERROR_TYPES = ['invalid_request_error', 'authentication_error', 'permission_error', 'rate_limit_error', 'insufficient_quota'];

const routes = v1Routes('test', Date.now) as Route<unknown>[];
const label = (route: Route<unknown>) => `${route.method} ${route.path}`;
const takesBody = (route: Route<unknown>) => route.method === 'POST' || route.method === 'PATCH';

/** One body each route accepts; a property then spoils one field of it at a time. */
const VALID_BODIES: Record<string, Record<string, unknown>> = {
  'POST /v1/videos': { model: 'video-2', prompt: 'A paper boat', seconds: '4', size: '1280x720' },
  'POST /v1/videos/:id/remix': { prompt: 'The same boat, at night' },
  'POST /v1/chat/completions': { model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 },
  'POST /v1/responses': { model: 'chat-2', input: 'Hi', max_output_tokens: 8 },
  'POST /v1/completions': { model: 'chat-2', prompt: 'Once upon a time', max_tokens: 8 },
  'POST /v1/webhooks': { url: 'https://hooks.example.com/oc', events: ['video.completed'] },
  'PATCH /v1/webhooks/:webhook_id': { description: 'renamed' },
  'POST /v1/webhooks/:webhook_id/test': { event_type: 'video.completed' },
  'POST /v1/webhooks/:webhook_id/recover': { since: 0 },
};

/** Strings a careless parser chokes on: NUL and other controls, lone surrogates, huge and odd unicode. */
const hostileString = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.constantFrom('\u0000', 'a\u0000b', '\ud800', '\udfff', 'x\ud83d', '\u202e\u0000', '%00', '../../etc/passwd', '__proto__', '${7*7}', "'; DROP TABLE x; --"),
  fc.nat({ max: 200_000 }).map((n) => 'x'.repeat(n)),
);
/** Numbers JSON can carry that no field expects: huge, negative, fractional, beyond 2^53. */
const hostileNumber = fc.oneof(
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -1, -0, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, 2 ** 64, 0.1, 1e-320),
  fc.integer(),
);
/**
 * A value as JSON text, so that nesting deep enough to exhaust a recursive parser's or validator's stack
 * (deeper than JSON.stringify itself can write) can be sent too.
 */
const hostileJson: fc.Arbitrary<string> = fc.oneof(
  fc
    .oneof(
      hostileString,
      hostileNumber,
      fc.boolean(),
      fc.constant(null),
      fc.array(hostileString, { maxLength: 30 }),
      fc.dictionary(hostileString, hostileString, { maxKeys: 10 }),
      fc.jsonValue({ maxDepth: 4 }),
    )
    .map((value) => JSON.stringify(value)),
  fc.constantFrom(10, 1_000, 100_000).chain((depth) => fc.constantFrom('['.repeat(depth) + ']'.repeat(depth), '{"a":'.repeat(depth) + '1' + '}'.repeat(depth))),
  fc.constantFrom('1e400', '-1e400', '123456789012345678901234567890', '1.0000000000000000000000001'),
);
const PLACEHOLDER = '"@@hostile@@"';
/** Every byte percent-encoded, lone surrogates included (as UTF-8 replacement characters). */
const percentEncode = (s: string) => [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');

/** What every answer must be, whatever was asked. */
function expectSpecAnswer(res: { status: number; body: any }, elapsedMs: number, what: string) {
  expect(res.status, what).toBeLessThan(500);
  expect(elapsedMs, what).toBeLessThan(RESPONSE_BOUND_MS);
  if (res.status < 400) return;
  expect(res.body, what).toMatchObject({ error: { type: expect.any(String), code: expect.any(String), message: expect.any(String) } });
  expect(ERROR_TYPES, what).toContain(res.body.error.type);
  if ('param' in res.body.error) expect(res.body.error.param, what).toEqual(expect.any(String));
  expect(JSON.stringify(res.body), what).not.toMatch(/\bat .+\.(?:ts|js|mjs):\d+/);
}

describe('hostile input, generated from the route table', () => {
  let service: RunningService;
  let url: string;
  let key: string;
  let tried = 0;
  let slowestMs = 0;
  let serverErrors = 0;

  /** A request sent as given (raw body, any headers), timed, its body parsed if JSON. */
  async function send(method: string, path: string, init: { body?: string | Uint8Array; headers?: Record<string, string> } = {}) {
    const started = performance.now();
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...init.headers },
      ...(init.body !== undefined ? { body: init.body } : {}),
    });
    // An event stream that opens is a subscription: the answer is its status and headers, and it is left at once.
    const subscription = method === 'GET' && res.status === 200 && /^text\/event-stream/.test(res.headers.get('content-type') ?? '');
    if (subscription) await res.body?.cancel();
    const text = subscription ? '' : await res.text();
    const elapsed = performance.now() - started;
    tried++;
    if (res.status >= 500) serverErrors++;
    slowestMs = Math.max(slowestMs, elapsed);
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Only content (video bytes) is not JSON; expectSpecAnswer fails on an error that is not JSON.
    }
    return { res: { status: res.status, body: body as any }, elapsed };
  }
  const pathOf = (route: Route<unknown>) => route.path.replace(/:([a-z_]+)/g, 'res_doesnotexist');

  beforeAll(async () => {
    service = await embedded();
    url = service.url;
    // No credit: a hostile body that happens to be valid is refused with 402, not carried out. Limits far above
    // what the suite sends in a minute (thousands of requests, on a fast machine), so no answer is a 429.
    ({ key } = await clientFor(service).newCustomer({
      tier: 'enterprise',
      limits: { requests_per_minute: 1_000_000, requests_per_day: 10_000_000, chat_requests_per_minute: 1_000_000 },
      scopes: ['video:read', 'video:write', 'video:delete', 'chat:read', 'chat:write', 'text:write', 'webhook:read', 'webhook:write', 'webhook:delete'],
      key: { rate_limit_per_minute: 100_000 },
    }));
  });
  afterAll(async () => {
    console.info(`hostile input: ${tried} requests, ${serverErrors} answered 5xx, slowest ${slowestMs.toFixed(0)} ms (bound ${RESPONSE_BOUND_MS} ms)`);
    await service?.stop();
  });

  const bodyRoutes = routes.filter(takesBody);

  it('has a valid body for every route that takes one', () => {
    for (const route of bodyRoutes) {
      const schema = route.doc?.request;
      const body = VALID_BODIES[label(route)];
      if (!schema) continue;
      expect(body, `${label(route)}: add a valid body to VALID_BODIES`).toBeDefined();
      expect(schema.safeParse(body).success, label(route)).toBe(true);
    }
  });

  describe.each(bodyRoutes.filter((r) => r.doc?.request).map((r) => [label(r), r] as const))('%s', (_name, route) => {
    const schema = route.doc!.request as z.ZodType;
    const valid = VALID_BODIES[label(route)]!;
    const fields = [...Object.keys(valid), ...Object.keys((schema as unknown as { shape?: object }).shape ?? {})];

    it('refuses a spoiled field with 400 naming it, and anything else it is sent without a 5xx', async () => {
      await fc.assert(
        fc.asyncProperty(fc.oneof(fc.constantFrom(...fields), hostileString.filter((k) => k.length > 0 && k.length < 100)), hostileJson, async (field, value) => {
          // A function, so that `$&` and the like in the value are not replacement patterns.
          const text = JSON.stringify({ ...valid, [field]: JSON.parse(PLACEHOLDER) }).replace(PLACEHOLDER, () => value);
          const spoiled = JSON.parse(text) as Record<string, unknown>;
          const { res, elapsed } = await send(route.method, pathOf(route), { body: text, headers: { 'content-type': 'application/json' } });
          expectSpecAnswer(res, elapsed, `${field} = ${value.slice(0, 80)}`);
          // An array or object of long strings can pass the body cap: it is refused before any field is read.
          if (Buffer.byteLength(text) > MAX_BODY_BYTES) {
            expect(res.status).toBe(413);
            expect(res.body.error.code).toBe('request_too_large');
          } else if (!schema.safeParse(spoiled).success) {
            expect(res.status).toBe(400);
            expect(res.body.error.type).toBe('invalid_request_error');
            expect(String(res.body.error.param)).toMatch(new RegExp(`^${field.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?:\\b|\\[|\\.|$)`));
          }
        }),
        // One body past the cap every run, so that branch is always taken, not only when the generator finds it.
        { numRuns: 40, examples: [[fields[0]!, JSON.stringify(Array.from({ length: 6 }, () => 'x'.repeat(200_000)))]] },
      );
    });
  });

  describe.each(bodyRoutes.map((r) => [label(r), r] as const))('%s', (_name, route) => {
    it('answers raw bodies of any shape, type and encoding in the spec shape', async () => {
      const valid = JSON.stringify(VALID_BODIES[label(route)] ?? {});
      const raw = fc.oneof(
        fc.string({ unit: 'binary', maxLength: 500 }),
        fc.uint8Array({ maxLength: 500 }),
        fc.constantFrom(
          '',
          'null',
          '[]',
          '"a string"',
          '{"model":"video-2","model":"chat-2"}',
          valid.slice(0, -1),
          `\ufeff${valid}`,
          valid.replace('{', '{"__proto__":{"admin":true},"constructor":{"prototype":{}},'),
          '{"a":"\\ud800"}',
          '{"a":"\\u0000"}',
          '{"a":1e999999}',
          `{"a":${'9'.repeat(5_000)}}`,
          '--x\r\nContent-Disposition: form-data; name="model"\r\n\r\nvideo-2\r\n--x--',
          '--x\r\nContent-Disposition: form-data; name="file"; filename="a.mp4"\r\n\r\nbytes\r\n--x--',
          'model=video-2&prompt=x',
        ),
      );
      const contentType = fc.constantFrom(
        'application/json',
        'application/json; charset=utf-16',
        'application/json; charset=latin-7',
        'text/plain',
        'multipart/form-data; boundary=x',
        'multipart/form-data',
        'application/x-www-form-urlencoded',
        'application/octet-stream',
        'garbage/;;;',
      );
      const encoding = fc.constantFrom(undefined, 'identity', 'gzip', 'br', 'deflate', 'x-unknown', 'gzip, gzip');
      await fc.assert(
        fc.asyncProperty(raw, contentType, encoding, async (body, type, contentEncoding) => {
          const { res, elapsed } = await send(route.method, pathOf(route), {
            body,
            headers: { 'content-type': type, ...(contentEncoding ? { 'content-encoding': contentEncoding } : {}) },
          });
          expectSpecAnswer(res, elapsed, `${type} ${contentEncoding ?? ''} ${String(body).slice(0, 80)}`);
        }),
        { numRuns: 30 },
      );
    });

    it('refuses a body over 1 MiB with 413', async () => {
      const { res, elapsed } = await send(route.method, pathOf(route), {
        body: JSON.stringify({ ...VALID_BODIES[label(route)], pad: 'x'.repeat(1024 * 1024) }),
        headers: { 'content-type': 'application/json' },
      });
      expectSpecAnswer(res, elapsed, 'oversized');
      expect(res.status).toBe(413);
      expect(res.body.error.code).toBe('request_too_large');
    });
  });

  describe.each(routes.filter((r) => r.path.includes(':')).map((r) => [label(r), r] as const))('%s', (_name, route) => {
    it('answers any path id, however encoded, with 4xx in the spec shape', async () => {
      const id = fc.oneof(
        // `.` and `..` (even percent-encoded) are dot segments that the client's URL parser removes.
        hostileString.filter((s) => s.length > 0 && s.length < 4_000 && s !== '.' && s !== '..'),
        fc.constantFrom('%', '%E0%A4%A', '%2F..%2F', '...', 'video_' + 'a'.repeat(3_000)),
      );
      await fc.assert(
        fc.asyncProperty(id, fc.boolean(), async (value, encode) => {
          // Unencoded, only what a URL keeps as it is: no separators, dot segments or controls a client would rewrite.
          const path = route.path.replace(/:([a-z_]+)/g, () => (encode ? percentEncode(value) : `x${value.replace(/[\u0000-\u0020/?#\\]/g, '_')}`));
          const { res, elapsed } = await send(route.method, path, {
            ...(takesBody(route) ? { body: JSON.stringify(VALID_BODIES[label(route)] ?? {}), headers: { 'content-type': 'application/json' } } : {}),
          });
          expectSpecAnswer(res, elapsed, path.slice(0, 120));
          expect(res.status).toBeGreaterThanOrEqual(400);
        }),
        { numRuns: 20 },
      );
    });
  });

  describe.each(routes.filter((r) => r.doc?.query).map((r) => [label(r), r] as const))('%s', (_name, route) => {
    it('refuses a hostile query parameter with 400 naming it', async () => {
      const shape = (route.doc!.query as unknown as { shape: Record<string, unknown> }).shape;
      const value = fc.oneof(
        hostileString.filter((s) => s.length < 2_000),
        fc.constantFrom('-1', '0', '1e309', '101', 'NaN', '1.5', '0x10', '', '[]', 'asc;desc'),
      );
      await fc.assert(
        // A name the route does not take, too (some take none): refused the same way, by name.
        fc.asyncProperty(fc.constantFrom(...Object.keys(shape), 'x_unknown'), value, fc.boolean(), async (name, v, twice) => {
          const query = new URLSearchParams([[name, v], ...(twice ? [[name, 'again'] as [string, string]] : [])]);
          const { res, elapsed } = await send(route.method, `${pathOf(route)}?${query}`);
          expectSpecAnswer(res, elapsed, `${name}=${v.slice(0, 80)}`);
          if (res.status === 400 && res.body.error.param !== undefined) expect(res.body.error.param).toBe(name);
        }),
        { numRuns: 25 },
      );
    });
  });

  it('answers hostile headers on every route in the spec shape', async () => {
    const printable = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 300 });
    const header = fc.oneof(
      fc.record({ name: fc.constant('idempotency-key'), value: fc.oneof(printable, fc.constant('k'.repeat(256))) }),
      fc.record({ name: fc.constant('range'), value: fc.oneof(printable, fc.constantFrom('bytes=-0', 'bytes=99999999999999999999-', 'bytes=5-1', 'bytes=0-0,1-1')) }),
      fc.record({ name: fc.constant('authorization'), value: fc.oneof(printable, fc.constantFrom('Bearer', 'Bearer  ', 'Basic YTpi', `Bearer ${'k'.repeat(8_000)}`)) }),
      fc.record({ name: fc.constant('accept'), value: printable }),
      fc.record({ name: fc.constant('x-forwarded-for'), value: printable }),
      fc.record({ name: fc.constant('last-event-id'), value: fc.oneof(printable, fc.constantFrom('evt_', 'evt_x', `evt_${'a'.repeat(65)}`, 'evt_a\u00e9')) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...routes), header, async (route, { name, value }) => {
        const headers: Record<string, string> = { [name]: value };
        if (name !== 'authorization') headers.authorization = `Bearer ${key}`;
        const init = takesBody(route)
          ? { body: JSON.stringify(VALID_BODIES[label(route)] ?? {}), headers: { ...headers, 'content-type': 'application/json' } }
          : { headers };
        const { res, elapsed } = await send(route.method, pathOf(route), init);
        expectSpecAnswer(res, elapsed, `${label(route)} ${name}: ${value.slice(0, 80)}`);
      }),
      { numRuns: 150 },
    );
  });
});
