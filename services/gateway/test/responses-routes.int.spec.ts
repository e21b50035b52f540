import 'reflect-metadata';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBilling } from '@oc/billing';
import { type CreatedApiKey, ManualClock, sortableIds, type StreamFrame, Subjects, unwrap } from '@oc/contracts';
import { openSqliteStores } from '@oc/eventstore';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyAuthenticator } from '../src/application/authenticator';
import { KeyUsageRecorder } from '../src/application/key-usage';
import { RateLimits } from '../src/application/rate-limits';
import { chatRoutes } from '../src/transport/chat-routes';
import { createGatewayApp } from '../src/transport/http';

/**
 * The gateway's side of the Responses API, against a scripted chat service on the in-process bus: the body's
 * refusals, what it asks of the chat service, and a stream written as named Responses events.
 */
const logger = createLogger({ service: 'gateway-test', level: 'silent' });
const clock = new ManualClock(Date.UTC(2026, 10, 22, 12));
const stores = openSqliteStores({ filename: ':memory:', clock });
const broker = new InProcessBroker();
const services = new InProcessServiceClient(broker);
let server: Server;
let url: string;
let key: string;
let closeAll: () => Promise<void>;

/** How the fake chat service answers the next streamed request; what it was asked. */
let script: (streamTo: string) => void = () => {};
const asked: Array<[string, Record<string, unknown>]> = [];

const event = (sequence_number: number, delta: string) => ({ type: 'response.output_text.delta', sequence_number, item_id: 'msg_1_o0', output_index: 0, content_index: 0, delta, logprobs: [] });

beforeAll(async () => {
  const billing = await createBilling({ eventStore: stores.store, readModels: new SqliteReadModelStore({ filename: ':memory:' }), client: services, clock, ids: sortableIds, logger });
  const billingApp = await NestFactory.createMicroservice(billing.module, { strategy: new InProcessServerStrategy(broker), logger: false });
  await billingApp.listen();
  broker.respond(Subjects.chat.createResponse, async (data) => {
    const streamTo = (data as { stream_to: string }).stream_to;
    script(streamTo);
    return { ok: true, data: { id: 'resp_1', stream_to: streamTo } };
  });
  for (const subject of [Subjects.chat.getResponse, Subjects.chat.deleteResponse, Subjects.chat.listResponseInputItems]) {
    broker.respond(subject, async (data) => {
      asked.push([subject, data as Record<string, unknown>]);
      return { ok: true, data: {} };
    });
  }
  const app = createGatewayApp({
    services,
    authenticator: new KeyAuthenticator(services, clock),
    limits: RateLimits.inMemory(),
    usage: new KeyUsageRecorder(services, clock),
    clock,
    logger,
    adminToken: 'admin-token-for-tests',
    version: '1.2.3',
    v1: chatRoutes({ streamIdleTimeoutMs: 200, maxInFlightPerOrganization: 2 }),
    admin: [],
    ready: async () => {},
  });
  server = await new Promise<Server>((resolve) => {
    const s = createServer(app).listen(0, '127.0.0.1', () => resolve(s));
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const org = unwrap(await services.request<{ id: string }>(Subjects.billing.createOrganization, { name: 'Acme', tier: 'standard' }));
  key = unwrap(
    await services.request<CreatedApiKey>(Subjects.billing.createApiKey, { org_id: org.id, name: 'k', mode: 'live', scopes: ['chat:write', 'chat:read'] }),
  ).key;
  closeAll = async () => {
    server.closeAllConnections();
    server.close();
    await billingApp.close();
    await billing.close();
    await stores.close();
  };
});
afterAll(() => closeAll());

const call = (method: string, path: string, body?: unknown) =>
  fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
const streamed = () => call('POST', '/v1/responses', { model: 'chat-2', input: 'Hi', stream: true });

describe('the Responses API through the gateway', () => {
  it('writes each frame as an event named by its type, in sequence order, and nothing after the last', async () => {
    const completed = { type: 'response.completed', sequence_number: 2, response: { id: 'resp_1' } };
    script = (streamTo) => {
      const frames: StreamFrame[] = [
        { kind: 'end', seq: 3, usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } },
        { kind: 'data', seq: 1, data: event(1, ' world') },
        { kind: 'data', seq: 2, data: completed },
        { kind: 'data', seq: 0, data: event(0, 'Hello') },
      ];
      for (const frame of frames) broker.publish(streamTo, frame);
    };
    const res = await streamed();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(await res.text()).toBe(
      [event(0, 'Hello'), event(1, ' world'), completed].map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join(''),
    );
  });

  it('ends a stream that goes silent with an error event numbered after the last event', async () => {
    script = (streamTo) => broker.publish(streamTo, { kind: 'data', seq: 0, data: event(0, 'Hel') });
    const res = await streamed();
    expect(await res.text()).toBe(
      `event: response.output_text.delta\ndata: ${JSON.stringify(event(0, 'Hel'))}\n\n` +
        `event: error\ndata: ${JSON.stringify({ type: 'error', code: 'stream_timeout', message: 'The stream stalled for more than 200 ms.', param: null, sequence_number: 1 })}\n\n`,
    );
  });

  it('passes an error frame on as an error event', async () => {
    script = (streamTo) =>
      broker.publish(streamTo, { kind: 'error', seq: 0, error: { status: 503, type: 'service_unavailable_error', code: 'upstream_error', message: 'down', retryAfter: 1 } });
    const res = await streamed();
    expect(await res.text()).toBe(`event: error\ndata: ${JSON.stringify({ type: 'error', code: 'upstream_error', message: 'down', param: null, sequence_number: 0 })}\n\n`);
  });

  it.each([
    ['an unknown field', { model: 'chat-2', input: 'Hi', frobnicate: true }, 'unsupported_parameter', 'frobnicate'],
    ['an OpenAI field not served', { model: 'chat-2', input: 'Hi', conversation: 'conv_1' }, 'unsupported_parameter', 'conversation'],
    ['an unknown item type', { model: 'chat-2', input: [{ type: 'computer_call_output', call_id: 'c' }] }, 'unsupported_parameter', 'input[0].type'],
    ['a bad role', { model: 'chat-2', input: [{ role: 'robot', content: 'Hi' }] }, 'invalid_parameter', 'input[0].role'],
    ['no input', { model: 'chat-2' }, 'missing_parameter', 'input'],
    ['an unknown model', { model: 'GPT 4', input: 'Hi' }, 'invalid_model', 'model'],
  ])('refuses %s with 400 naming it, asking the chat service nothing', async (_, body, code, param) => {
    script = () => {
      throw new Error('the chat service was asked');
    };
    const res = await call('POST', '/v1/responses', body);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', code, param });
  });

  it("asks the chat service for the organization's response by id, and refuses query parameters it does not serve", async () => {
    asked.length = 0;
    await call('GET', '/v1/responses/resp_9');
    await call('DELETE', '/v1/responses/resp_9');
    await call('GET', '/v1/responses/resp_9/input_items?limit=5&order=asc');
    const org_id = expect.stringMatching(/^org_/);
    expect(asked).toEqual([
      [Subjects.chat.getResponse, { org_id, response_id: 'resp_9' }],
      [Subjects.chat.deleteResponse, { org_id, response_id: 'resp_9' }],
      [Subjects.chat.listResponseInputItems, { org_id, response_id: 'resp_9', limit: 5, order: 'asc' }],
    ]);
    for (const path of ['/v1/responses/resp_9?stream=true', '/v1/responses/resp_9/input_items?include=x']) {
      const res = await call('GET', path);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: 'unsupported_parameter', param: path.endsWith('x') ? 'include' : 'stream' });
    }
  });
});
