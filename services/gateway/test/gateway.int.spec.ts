import 'reflect-metadata';
import type { Server } from 'node:http';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { createBilling } from '@oc/billing';
import { ManualClock, sortableIds, Subjects, unwrap, type CreatedApiKey } from '@oc/contracts';
import { openSqliteStores } from '@oc/eventstore';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KeyAuthenticator } from '../src/application/authenticator';
import { KeyUsageRecorder } from '../src/application/key-usage';
import { RateLimits } from '../src/application/rate-limits';
import { createGatewayApp } from '../src/transport/http';
import { HttpServerConfigSchema, listenHttp } from '../src/transport/http-server';
import { LINGERING } from '../src/transport/lingering-close';
import { LARGE_BODY_BYTES_PER_OWNER, MAX_BODY_BYTES } from '../src/transport/request-body';
import { v1Routes } from '../src/transport/v1-routes';

/** The gateway's log lines, as JSON objects. */
const logLines: Array<Record<string, unknown>> = [];
const logger = createLogger({ service: 'gateway-test', level: 'info' }, { write: (line: string) => void logLines.push(JSON.parse(line)) });
const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
const stores = openSqliteStores({ filename: ':memory:', clock });
const broker = new InProcessBroker();
const services = new InProcessServiceClient(broker);
let server: Server;
let url: string;
let closeAll: () => Promise<void>;
let ready = true;
let gatewayApp: ReturnType<typeof createGatewayApp>;
let gatewayDeps: Parameters<typeof createGatewayApp>[0];

beforeAll(async () => {
  const billing = await createBilling({ eventStore: stores.store, readModels: new SqliteReadModelStore({ filename: ':memory:' }), client: services, clock, ids: sortableIds, logger });
  const billingApp = await NestFactory.createMicroservice(billing.module, { strategy: new InProcessServerStrategy(broker), logger: false });
  await billingApp.listen();
  const authenticator = new KeyAuthenticator(services, clock);
  await services.onBroadcast(Subjects.broadcast.apiKeyRevoked, (m) => authenticator.forgetKey((m as { key_hash: string }).key_hash));
  gatewayDeps = {
    services,
    authenticator,
    limits: RateLimits.inMemory(),
    usage: new KeyUsageRecorder(services, clock),
    clock,
    logger,
    adminToken: 'admin-token-for-tests',
    version: '1.2.3',
    v1: [
      { method: 'GET', path: '/v1/scoped/:id', scope: 'video:read', handle: async ({ params }) => ({ ok: true, data: params }) },
      { method: 'GET', path: '/v1/boom', scope: null, handle: async () => { throw new TypeError('a bug'); } },
      { method: 'POST', path: '/v1/echo', scope: null, handle: async ({ body }) => ({ ok: true, data: body }) },
      {
        method: 'GET',
        path: '/v1/ticks',
        scope: null,
        handle: async ({ res }) => {
          res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
          res.flushHeaders();
          res.end('data: 1\n\ndata: [DONE]\n\n');
        },
      },
      ...v1Routes('1.2.3', () => clock.now()),
    ],
    admin: [],
    trustedProxies: ['loopback'],
    ready: async () => {
      if (!ready) throw new Error('billing down');
    },
  };
  const app = createGatewayApp(gatewayDeps);
  gatewayApp = app;
  server = await listenHttp(app, 0, '127.0.0.1', HttpServerConfigSchema.parse({}));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  closeAll = async () => {
    server.close();
    await billingApp.close();
    await billing.close();
    await stores.close();
  };
});
afterAll(() => closeAll());

async function newKey(options: { scopes: string[]; expires_in_days?: number }) {
  const org = unwrap(await services.request<{ id: string }>(Subjects.billing.createOrganization, { name: 'Acme', tier: 'standard' }));
  const key = unwrap(
    await services.request<CreatedApiKey>(Subjects.billing.createApiKey, { org_id: org.id, name: 'k', mode: 'live', ...options }),
  );
  return { orgId: org.id, ...key };
}

const get = (path: string, key?: string) =>
  fetch(`${url}${path}`, { headers: key ? { authorization: `Bearer ${key}` } : {} }).then(async (r) => ({
    status: r.status,
    headers: r.headers,
    body: (await r.json()) as any,
  }));

describe('gateway', () => {
  it('lets a key with the scope through and answers one without it with 403 naming the scope', async () => {
    const reader = await newKey({ scopes: ['video:read'] });
    expect((await get('/v1/scoped/x%20y', reader.key)).body).toEqual({ id: 'x y' });
    const chatOnly = await newKey({ scopes: ['chat:read', 'chat:write'] });
    const refused = await get('/v1/scoped/1', chatOnly.key);
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({
      error: { type: 'permission_error', code: 'insufficient_scope', message: expect.stringContaining('video:read') },
    });
    expect(refused.headers.get('x-ratelimit-limit')).not.toBeNull();
  });

  it('marks every answer, success or error, as not to be stored by a cache nor sniffed by a browser', async () => {
    const { key } = await newKey({ scopes: ['video:read'] });
    for (const res of [await get('/v1/scoped/1', key), await get('/v1/scoped/1', 'oc_live_madeup'), await get('/v1/nowhere', key)]) {
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
  });

  it('refuses a key once its expiry passes, with the clock the gateway is given', async () => {
    const { key } = await newKey({ scopes: ['video:read'], expires_in_days: 1 });
    expect((await get('/v1/health', key)).status).toBe(200);
    clock.advance(86_400_000);
    const expired = await get('/v1/health', key);
    expect(expired.status).toBe(401);
    expect(expired.body.error).toMatchObject({ code: 'invalid_api_key', message: 'This API key has expired.' });
  });

  it('drops a cached key when billing broadcasts its revocation', async () => {
    const { key, id, orgId } = await newKey({ scopes: ['video:read'] });
    expect((await get('/v1/health', key)).status).toBe(200);
    unwrap(await services.request(Subjects.billing.revokeApiKey, { org_id: orgId, key_id: id }));
    expect((await get('/v1/health', key)).status).toBe(401);
  });

  it('hides an unexpected failure behind a 500 in the spec shape, without a stack trace', async () => {
    const { key } = await newKey({ scopes: ['video:read'] });
    const res = await get('/v1/boom', key);
    expect(res.status).toBe(500);
    expect(res.body).toEqual({
      error: { type: 'api_error', code: 'internal_error', message: expect.not.stringContaining('TypeError') },
    });
  });

  it('reports liveness always and readiness only when its dependencies answer', async () => {
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(200);
    ready = false;
    const notReady = await get('/readyz');
    ready = true;
    expect(notReady.status).toBe(503);
    expect(notReady.body.error.code).toBe('service_unavailable');
  });
});

describe('gateway: every answer names its request with x-request-id, the id of its log line', () => {
  const REQUEST_ID = /^req_[0-9a-f]{32}$/;
  const logOf = (id: string | null) => logLines.filter((line) => line.request_id === id);
  /** The access line is written when the answer is done, which may be just after the client read it. */
  const accessLine = async (id: string | null) => {
    await vi.waitFor(() => expect(logOf(id).find((line) => line.msg === 'request')).toBeDefined());
    return logOf(id).find((line) => line.msg === 'request')!;
  };

  it('on a success, an error, a stream, the health checks, the reference and the console, each its own', async () => {
    const { key, orgId } = await newKey({ scopes: ['video:read'] });
    const success = await get('/v1/scoped/1?limit=2', key);
    const answers = [
      success,
      await get('/v1/scoped/1', 'oc_live_madeup'),
      await get('/v1/nowhere', key),
      await get('/v1/health', key),
      await get('/healthz'),
      await get('/readyz'),
      await get('/openapi.json'),
      await get('/console/v1/session'),
    ];
    const stream = await fetch(`${url}/v1/ticks`, { headers: { authorization: `Bearer ${key}` } });
    expect(await stream.text()).toContain('[DONE]');
    const docs = await fetch(`${url}/docs`);
    await docs.text();
    const ids = [...answers.map((a) => a.headers.get('x-request-id')), stream.headers.get('x-request-id'), docs.headers.get('x-request-id')];
    expect(answers.map((a) => a.status)).toEqual([200, 401, 404, 200, 200, 200, 200, 404]);
    for (const id of ids) expect(id).toMatch(REQUEST_ID);
    expect(new Set(ids).size).toBe(ids.length);

    expect(await accessLine(ids[0]!)).toMatchObject({ method: 'GET', path: '/v1/scoped/1', status: 200, org_id: orgId, service: 'gateway-test' });
    expect(await accessLine(ids[1]!)).toMatchObject({ path: '/v1/scoped/1', status: 401 });
    expect((await accessLine(ids[1]!)).org_id).toBeUndefined();
    expect(await accessLine(ids[8]!)).toMatchObject({ path: '/v1/ticks', status: 200, org_id: orgId });
    expect(await accessLine(ids[9]!)).toMatchObject({ path: '/docs', status: 200 });
  });

  it('names a failure in its error line and its access line alike', async () => {
    const { key } = await newKey({ scopes: ['video:read'] });
    const boom = await get('/v1/boom', key);
    expect(boom.status).toBe(500);
    const id = boom.headers.get('x-request-id');
    expect(id).toMatch(REQUEST_ID);
    expect(logOf(id).find((line) => line.msg === 'unexpected error')).toMatchObject({ level: 50, err: { type: 'TypeError' } });
    expect(await accessLine(id)).toMatchObject({ status: 500 });
  });

  it("keeps the id a trusted load balancer sends, and only a sane one; a client's own is logged, never echoed", async () => {
    const { key } = await newKey({ scopes: ['video:read'] });
    const sending = (id: string, at = url) => fetch(`${at}/v1/scoped/1`, { headers: { authorization: `Bearer ${key}`, 'x-request-id': id } });
    // This gateway trusts loopback, where the test's requests come from.
    expect((await sending('lb-7f3a.2026:01')).headers.get('x-request-id')).toBe('lb-7f3a.2026:01');
    for (const insane of ['x'.repeat(129), 'two words', '-leading-dash']) expect((await sending(insane)).headers.get('x-request-id')).toMatch(REQUEST_ID);

    const direct = await listenHttp(createGatewayApp({ ...gatewayDeps, trustedProxies: [] }), 0, '127.0.0.1', HttpServerConfigSchema.parse({}));
    try {
      const answer = await sending('client-chosen-1', `http://127.0.0.1:${(direct.address() as AddressInfo).port}`);
      const id = answer.headers.get('x-request-id');
      expect(id).toMatch(REQUEST_ID);
      expect(await accessLine(id)).toMatchObject({ client_request_id: 'client-chosen-1', status: 200 });
    } finally {
      direct.close();
    }
  });
});

describe('gateway: malformed input never causes a 5xx', () => {
  it.each([
    ['GET', '/v1/scoped/%E0%A4%A', undefined, undefined],
    ['GET', '/v1/%ZZ', undefined, undefined],
    ['POST', '/v1/health', 'null', 'application/json'],
    ['POST', '/v1/health', '[1,2,3]', 'application/json'],
    ['POST', '/v1/health', '{"a":'.repeat(5000), 'application/json'],
    ['POST', '/v1/health', '\u0000\u0001', 'application/json; charset=latin-7'],
    ['PATCH', '/v1/health', '{}', 'text/plain'],
  ])('%s %s', async (method, path, body, contentType) => {
    const { key } = await newKey({ scopes: ['video:read'] });
    const res = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(contentType ? { 'content-type': contentType } : {}) },
      ...(body !== undefined ? { body } : {}),
    });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    const json = (await res.json()) as { error: { type: string; code: string; message: string } };
    expect(json.error.code).toEqual(expect.any(String));
    expect(json.error.message).not.toMatch(/ at .*\.ts:\d+/);
  });

  describe('a body that is not what its Content-Encoding says', () => {
    const json = Buffer.from('{"model":"chat-2"}');
    const post = async (body: Buffer, encoding: string) => {
      const { key } = await newKey({ scopes: ['video:read'] });
      const res = await fetch(`${url}/v1/echo`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-encoding': encoding },
        body,
      });
      return { status: res.status, body: (await res.json()) as any };
    };

    it.each([
      ['gzip', json],
      ['br', json],
      ['deflate', json],
      ['gzip', gzipSync(json).subarray(0, 12)],
    ])('is a 400 invalid_body (%s)', async (encoding, body) => {
      const res = await post(body, encoding);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_body' });
      expect(res.body.error.message).toContain(`'${encoding}'`);
    });

    it('is read when it is compressed as it says, and refused with 413 when it inflates past the limit', async () => {
      expect(await post(gzipSync(json), 'gzip')).toEqual({ status: 200, body: { model: 'chat-2' } });
      expect(await post(brotliCompressSync(json), 'br')).toEqual({ status: 200, body: { model: 'chat-2' } });
      const bomb = await post(gzipSync(Buffer.alloc(20 * 1024 * 1024, 0x20)), 'gzip');
      expect(bomb.status).toBe(413);
      expect(bomb.body.error.code).toBe('request_too_large');
    });
  });

  describe('what the HTTP parser refuses is answered in the spec shape', () => {
    /** Sends bytes as they are and reads the whole answer until the server closes the connection. */
    const raw = (request: string, port = Number(new URL(url).port), finish = true) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(port, '127.0.0.1');
        let answer = '';
        socket.on('data', (chunk) => (answer += chunk));
        socket.on('end', () => resolve(answer));
        socket.on('error', reject);
        if (finish) socket.end(request);
        else socket.write(request);
      });

    it('answers 408 to a client too slow with its headers or its body, and closes the connection', async () => {
      const slow = await listenHttp(gatewayApp, 0, '127.0.0.1', {
        HTTP_HEADERS_TIMEOUT_MS: 200,
        HTTP_REQUEST_TIMEOUT_MS: 400,
        HTTP_KEEP_ALIVE_TIMEOUT_MS: 5_000,
        HTTP_MAX_CONNECTIONS_PER_ADDRESS: 256,
      });
      const at = (request: string) => raw(request, (slow.address() as AddressInfo).port, false);
      const { key } = await newKey({ scopes: ['video:read'] });
      try {
        const answers = await Promise.all([
          at('GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Sl'),
          at(`POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a"`),
        ]);
        for (const answer of answers) {
          expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
          expect(answer).toMatch(/\r\nx-request-id: req_[0-9a-f]{32}\r\n/);
          expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'request_timeout' } });
        }
      } finally {
        slow.close();
      }
    });

    it('refuses a client address its connections beyond the cap with 429, and takes them again once one closes', async () => {
      const capped = await listenHttp(gatewayApp, 0, '127.0.0.1', { ...HttpServerConfigSchema.parse({}), HTTP_MAX_CONNECTIONS_PER_ADDRESS: 2 });
      const port = (capped.address() as AddressInfo).port;
      const held = await Promise.all([0, 1].map(() => new Promise<Socket>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => resolve(socket));
      })));
      try {
        const refused = await raw('GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n', port, false);
        expect(refused.split('\r\n')[0]).toBe('HTTP/1.1 429 Too Many Requests');
        expect(JSON.parse(refused.slice(refused.indexOf('\r\n\r\n') + 4))).toMatchObject({
          error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' },
        });
        await new Promise((resolve) => {
          held[0]!.once('close', resolve);
          held[0]!.destroy();
        });
        await vi.waitFor(async () => {
          const answer = await raw('GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', port);
          // Served (no key here, so 401), not refused at the door.
          expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
        });
      } finally {
        for (const socket of held) socket.destroy();
        capped.close();
      }
    });

    it('exempts the load balancers named in TRUSTED_PROXIES from the connection cap', async () => {
      const capped = await listenHttp(gatewayApp, 0, '127.0.0.1', { ...HttpServerConfigSchema.parse({}), HTTP_MAX_CONNECTIONS_PER_ADDRESS: 1 }, ['loopback']);
      const port = (capped.address() as AddressInfo).port;
      const held = await new Promise<Socket>((resolve) => {
        const socket = connect(port, '127.0.0.1', () => resolve(socket));
      });
      try {
        const answer = await raw('GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', port);
        expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
      } finally {
        held.destroy();
        capped.close();
      }
    });

    it('refuses a declared body over the limit at once, without waiting for it', async () => {
      const { key } = await newKey({ scopes: ['video:read'] });
      const answer = await raw(
        `POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: 999999999\r\n\r\n{"a"`,
        Number(new URL(url).port),
        false,
      );
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'request_too_large' } });
    });

    it('lets a client finish sending a refused body of a few megabytes, then reads its 413 and takes its next request', async () => {
      const { key } = await newKey({ scopes: ['video:read'] });
      const half = 'x'.repeat(1024 * 1024);
      const answers = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(new URL(url).port), '127.0.0.1');
        let answer = '';
        let refused = false;
        socket.on('error', reject);
        socket.on('end', () => resolve(answer));
        socket.on('data', (chunk) => {
          answer += chunk;
          // The 413 came while half the body is still to be sent: send it, then a second request.
          if (!refused && answer.includes('request_too_large')) {
            refused = true;
            socket.write(half, () => socket.end(`GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nConnection: close\r\n\r\n`));
          }
        });
        socket.write(
          `POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${2 * half.length}\r\n\r\n${half}`,
        );
      });
      expect(answers.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
      expect(answers).toContain('HTTP/1.1 200 OK');
    });

    it('lets a client that writes its whole over-limit body before reading (as Python\u2019s urllib does) read its 413', async () => {
      const { key } = await newKey({ scopes: ['video:read'] });
      const body = Buffer.alloc(12 * 1024 * 1024, 0x20);
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect({ port: Number(new URL(url).port), host: '127.0.0.1', allowHalfOpen: true });
        socket.on('error', reject);
        socket.write(`POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
        // Nothing is read until the whole body is written: a connection closed under it fails this write.
        socket.write(body, (error) => {
          if (error) return reject(error);
          let text = '';
          socket.on('data', (chunk) => (text += chunk));
          socket.on('end', () => resolve(text));
        });
      });
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
      expect(answer.toLowerCase()).toContain('\r\nconnection: close\r\n');
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { type: 'invalid_request_error', code: 'request_too_large' } });
    });

    it('reads and drops a bounded number of bytes of a refused body before it closes the connection', async () => {
      const { key } = await newKey({ scopes: ['video:read'] });
      const declared = 2 ** 30;
      const chunk = Buffer.alloc(1024 * 1024, 0x20);
      const { answer, sent } = await new Promise<{ answer: string; sent: number }>((resolve) => {
        // Writing on after the server's end of the connection has closed, as an uploading client does.
        const socket = connect({ port: Number(new URL(url).port), host: '127.0.0.1', allowHalfOpen: true });
        let answer = '';
        let sent = 0;
        socket.on('data', (data) => (answer += data));
        // Past the bound the connection is reset under the upload: expected here.
        socket.on('error', () => undefined);
        socket.on('close', () => resolve({ answer, sent }));
        socket.write(`POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`);
        const pump = () => {
          while (sent < declared && !socket.destroyed) {
            sent += chunk.length;
            if (!socket.write(chunk)) return void socket.once('drain', pump);
          }
        };
        pump();
      });
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 413 Payload Too Large');
      expect(sent).toBeGreaterThan(LINGERING.maxBytes);
      // What the kernel's buffers held besides.
      expect(sent).toBeLessThan(LINGERING.maxBytes + 32 * 1024 * 1024);
    });

    it.each([
      ['an HTTP/1.1 request without Host', 'GET /v1/health HTTP/1.1\r\n\r\n', 400, 'Bad Request', { code: 'missing_parameter', param: 'Host' }],
      [
        'an Expect other than 100-continue',
        'POST /v1/echo HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
        417,
        'Expectation Failed',
        { code: 'expectation_failed', param: 'Expect' },
      ],
      ['CONNECT', 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', 405, 'Method Not Allowed', { code: 'method_not_allowed' }],
    ])('%s is answered in the spec shape, and the connection closed', async (_, request, status, reason, error) => {
      const answer = await raw(request);
      expect(answer.split('\r\n')[0]).toBe(`HTTP/1.1 ${status} ${reason}`);
      expect(answer).toMatch(/\r\nx-request-id: req_[0-9a-f]{32}\r\n/i);
      expect(answer.toLowerCase()).toContain('\r\nconnection: close\r\n');
      const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: Record<string, string> };
      expect(body).toEqual({ error: { type: 'invalid_request_error', message: expect.any(String), ...error } });
    });

    it('serves an HTTP/1.0 request without Host, which HTTP/1.0 does not require', async () => {
      expect((await raw('GET /v1/health HTTP/1.0\r\n\r\n')).split('\r\n')[0]).toBe('HTTP/1.1 401 Unauthorized');
    });

    it.each([
      ['a URL over 16 KiB', `GET /v1/${'a'.repeat(17_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431, 'request_header_fields_too_large'],
      ['a control character in a header', 'GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Note: a\u0001b\r\n\r\n', 400, 'malformed_request'],
      [
        'both Content-Length and Transfer-Encoding',
        'POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
        400,
        'malformed_request',
      ],
      ['a chunk size that is not one', 'POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n', 400, 'malformed_request'],
    ])('%s', async (_, request, status, code) => {
      const answer = await raw(request);
      expect(answer.split('\r\n')[0]).toBe(`HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}`);
      const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { error: { type: string; code: string } };
      expect(body.error).toMatchObject({ type: 'invalid_request_error', code });
    });
  });

  it('refuses an oversized Authorization header without looking it up', async () => {
    const res = await get('/v1/health', `oc_live_${'A'.repeat(5000)}`);
    expect(res.status).toBe(401);
  });
});

describe('gateway: the failed-authentication window', () => {
  const attempt = (forwardedFor: string, key: string) =>
    fetch(`${url}/v1/health`, { headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': forwardedFor } }).then((r) => r.status);
  const madeUp = (i: number) => `oc_live_${'x'.repeat(31)}${i}`;

  it('counts each client behind a trusted proxy on its own, and asks billing nothing once a client has spent it', async () => {
    const request = vi.spyOn(services, 'request');
    const lookups = () => request.mock.calls.filter(([subject]) => subject === Subjects.billing.authenticate).length;

    const statuses: number[] = [];
    for (let i = 0; i < 61; i++) statuses.push(await attempt('203.0.113.7', madeUp(i)));
    expect(statuses.slice(0, 60)).toEqual(Array(60).fill(401));
    expect(statuses[60]).toBe(429);

    const before = lookups();
    for (let i = 0; i < 5; i++) expect(await attempt('203.0.113.7', madeUp(100 + i))).toBe(429);
    expect(lookups()).toBe(before);
    expect(await attempt('203.0.113.8', madeUp(200))).toBe(401);
    request.mockRestore();
  });

  it('limits wrong admin tokens per client address (429 with Retry-After), and the right one from another address still works', async () => {
    const admin = (forwardedFor: string, token: string) =>
      fetch(`${url}/admin/v1/organizations`, { headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': forwardedFor } }).then(async (r) => ({
        status: r.status,
        retryAfter: r.headers.get('retry-after'),
        body: (await r.json()) as any,
      }));
    const guesses = [];
    for (let i = 0; i < 61; i++) guesses.push(await admin('203.0.113.30', `guess-${i}`));
    expect(guesses.slice(0, 60).map((g) => g.status)).toEqual(Array(60).fill(401));
    expect(guesses[60]).toMatchObject({ status: 429, retryAfter: '60', body: { error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' } } });
    // Refused before the token is looked at: from the guesser's address even the right one is not told apart.
    expect((await admin('203.0.113.30', 'admin-token-for-tests')).status).toBe(429);
    // The operator, elsewhere, is not locked out: past authentication (this gateway has no admin routes, hence 404).
    expect((await admin('198.51.100.30', 'admin-token-for-tests')).body.error.code).toBe('unknown_url');
  });
});

describe('gateway: OpenAPI document', () => {
  it('is public and derived from the routes and their zod contracts', async () => {
    const res = await fetch(`${url}/openapi.json`);
    expect(res.status).toBe(200);
    const doc = (await res.json()) as any;
    expect(doc).toMatchObject({ openapi: '3.1.0', info: { version: '1.2.3' } });
    expect(doc.paths['/v1/scoped/{id}'].get).toMatchObject({
      'x-required-scope': 'video:read',
      parameters: [{ name: 'id', in: 'path', required: true }],
    });
    const health = doc.paths['/v1/health'].get.responses['200'].content['application/json'].schema;
    expect(health.required).toEqual(['status', 'version', 'timestamp']);
    expect(doc.components.schemas.Error.properties.error.required).toEqual(['type', 'message', 'code']);
    const models = doc.paths['/v1/models'].get.responses['200'].content['application/json'].schema;
    expect(models.properties.data.items.required).toEqual(['id', 'object', 'created', 'owned_by']);
    expect(doc.paths['/v1/models/{model}'].get.parameters).toEqual([{ name: 'model', in: 'path', required: true, schema: { type: 'string' } }]);
  });

  it('is browsable at /docs, with Swagger UI served by the gateway itself and nothing else of its package', async () => {
    const page = await fetch(`${url}/docs`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const html = await page.text();
    const assets = [...html.matchAll(/(?:src|href)="(\/docs\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets).toEqual(['/docs/favicon-32x32.png', '/docs/swagger-ui.css', '/docs/swagger-ui-bundle.js', '/docs/init.js']);
    for (const asset of assets) {
      const res = await fetch(`${url}${asset}`);
      expect(res.status, asset).toBe(200);
      expect((await res.arrayBuffer()).byteLength, asset).toBeGreaterThan(50);
    }
    expect(await (await fetch(`${url}/docs/init.js`)).text()).toContain("url: '/openapi.json'");
    // The package's own demo page (it points at the Petstore) is not served.
    const demo = await fetch(`${url}/docs/index.html`);
    expect(demo.status).toBe(404);
    expect(((await demo.json()) as any).error.type).toBe('invalid_request_error');
  });
});

describe("gateway: one organization's large bodies are parsed in turns, never waiting on another's network", () => {
  const large = JSON.stringify({ text: 'x'.repeat(100_000) });
  const chat70k = JSON.stringify({ model: 'chat-2', messages: [{ role: 'user', content: 'x'.repeat(70_000) }] });
  const post = (key: string, body = large, at = url) =>
    fetch(`${at}/v1/echo`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });
  /** Another organization's request, answered only after the gateway has read what was sent before it. */
  const roundTrip = async (key: string) => expect((await get('/v1/health', key)).status).toBe(200);
  /**
   * A connection that sends the headers of a JSON body of `declared` bytes and only its first `sent`, then stalls.
   * Its connection has already been answered once, so that the gateway reads this request at once (before any
   * request sent after it is answered). `open()` is true until the gateway answers or closes it; `answer` is what
   * it was told by then.
   */
  const stall = async (key: string, declared: number, sent: number, at = url) => {
    const socket = connect(Number(new URL(at).port), '127.0.0.1');
    socket.on('error', () => undefined);
    let text = '';
    await new Promise<void>((resolve) => {
      socket.on('data', (chunk) => ((text += chunk), text.includes('"ok"') && resolve()));
      socket.write(`GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    });
    text = '';
    let open = true;
    const answer = new Promise<string>((resolve) => socket.on('close', () => ((open = false), resolve(text))));
    socket.write(`POST /v1/echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`);
    socket.write(`{"text":"${'x'.repeat(Math.max(0, sent - 9))}`);
    return { socket, answer, open: () => open && text === '' };
  };
  const requestTimedOut = (answer: string) => {
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'request_timeout' } });
  };
  /** A gateway whose requests time out after two seconds (HTTP_REQUEST_TIMEOUT_MS), so that a stall ends soon. */
  const quickTimeout = async () => {
    const server = await listenHttp(gatewayApp, 0, '127.0.0.1', { ...HttpServerConfigSchema.parse({}), HTTP_HEADERS_TIMEOUT_MS: 1_000, HTTP_REQUEST_TIMEOUT_MS: 2_000 });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
  };

  it("answers an organization's complete large bodies while an upload of its own is stalled, which later gets its 408 (issue 28, finding 2)", async () => {
    const gateway = await quickTimeout();
    try {
      const a = await newKey({ scopes: ['video:read'] });
      const b = await newKey({ scopes: ['video:read'] });
      const stalled = await stall(a.key, large.length, 50_000, gateway.url);
      await roundTrip(b.key);

      const chat = await post(a.key, chat70k, gateway.url);
      expect(stalled.open()).toBe(true);
      expect(chat.status).toBe(200);
      expect(((await chat.json()) as { messages: Array<{ content: string }> }).messages[0]!.content).toHaveLength(70_000);
      expect((await post(b.key, large, gateway.url)).status).toBe(200);
      expect(stalled.open()).toBe(true);

      requestTimedOut(await stalled.answer);
    } finally {
      gateway.close();
    }
  });

  it('answers them between back-to-back stalls of its own too', async () => {
    const gateway = await quickTimeout();
    try {
      const a = await newKey({ scopes: ['video:read'] });
      const b = await newKey({ scopes: ['video:read'] });
      const first = await stall(a.key, large.length, 50_000, gateway.url);
      await roundTrip(b.key);
      const second = await stall(a.key, large.length, 50_000, gateway.url);
      await roundTrip(b.key);

      expect((await post(a.key, chat70k, gateway.url)).status).toBe(200);
      expect((await post(a.key, large, gateway.url)).status).toBe(200);
      expect([first.open(), second.open()]).toEqual([true, true]);

      for (const stalled of [first, second]) requestTimedOut(await stalled.answer);
    } finally {
      gateway.close();
    }
  });

  it(`holds an organization's large bodies past its ${LARGE_BODY_BYTES_PER_OWNER / MAX_BODY_BYTES} MiB being received unread until one ends, never another organization's`, async () => {
    const a = await newKey({ scopes: ['video:read'] });
    const b = await newKey({ scopes: ['video:read'] });
    const stalls = await Promise.all(Array.from({ length: LARGE_BODY_BYTES_PER_OWNER / MAX_BODY_BYTES }, () => stall(a.key, MAX_BODY_BYTES, 1_000)));
    await roundTrip(b.key);

    let nextAnswered = false;
    const next = post(a.key).then((res) => ((nextAnswered = true), res));
    expect((await post(b.key)).status).toBe(200);
    await roundTrip(b.key);
    expect(nextAnswered).toBe(false);

    // A client that leaves gives its room back.
    stalls[0]!.socket.destroy();
    const answered = await next;
    expect(answered.status).toBe(200);
    expect(((await answered.json()) as { text: string }).text).toHaveLength(100_000);
    for (const { socket } of stalls) socket.destroy();
  });
});
