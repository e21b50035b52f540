import 'reflect-metadata';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBilling } from '@oc/billing';
import { type CreatedApiKey, ManualClock, sortableIds, type StreamFrame, Subjects, unwrap, WATCH_TO_HEADER } from '@oc/contracts';
import { openSqliteStores } from '@oc/eventstore';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient, type ReplicaWatch } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KeyAuthenticator } from '../src/application/authenticator';
import { KeyUsageRecorder } from '../src/application/key-usage';
import { RateLimits } from '../src/application/rate-limits';
import { chatRoutes } from '../src/transport/chat-routes';
import { Drain } from '../src/transport/drain';
import { createGatewayApp } from '../src/transport/http';

/**
 * The gateway's side of a streamed completion, against a scripted chat service on the in-process bus:
 * what it writes for frames in any order, for silence, and what it tells the chat service when the
 * client leaves.
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

/** How the fake chat service answers the next streamed request. */
let script: (streamTo: string) => void = () => {};
/** How it answers the next completion answered whole, given its own subject (never, by default). */
let whole: (watchTo: string) => Promise<unknown> = () => new Promise(() => {});
/** The chat processes the gateway watches, and what it is told when one is gone. */
const watched: Array<{ replica: string; incarnation: string; gone: () => void }> = [];
const replicas: ReplicaWatch = {
  watch: (_service, replica, incarnation, gone) => {
    const entry = { replica, incarnation, gone };
    watched.push(entry);
    return () => void watched.splice(watched.indexOf(entry), 1);
  },
  stop: () => undefined,
};
/** What the fake chat service was asked, in order. */
const asked: unknown[] = [];

const chunk = (content: string) => ({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content }, finish_reason: null }] });

beforeAll(async () => {
  const billing = await createBilling({ eventStore: stores.store, readModels: new SqliteReadModelStore({ filename: ':memory:' }), client: services, clock, ids: sortableIds, logger });
  const billingApp = await NestFactory.createMicroservice(billing.module, { strategy: new InProcessServerStrategy(broker), logger: false });
  await billingApp.listen();
  broker.respond(Subjects.chat.createChatCompletion, async (data, headers) => {
    asked.push(data);
    const streamTo = (data as { stream_to?: string }).stream_to;
    if (streamTo === undefined) return whole(headers![WATCH_TO_HEADER]!);
    script(streamTo);
    return { ok: true, data: { id: 'chatcmpl_1', stream_to: streamTo } };
  });
  const app = createGatewayApp({
    services,
    authenticator: new KeyAuthenticator(services, clock),
    limits: RateLimits.inMemory(),
    usage: new KeyUsageRecorder(services, clock),
    clock,
    logger,
    adminToken: 'admin-token-for-tests',
    version: '1.2.3',
    v1: chatRoutes({ streamIdleTimeoutMs: 200, maxInFlightPerOrganization: 2, replicas }),
    admin: [],
    ready: async () => {},
  });
  server = await new Promise<Server>((resolve) => {
    const s = createServer(app).listen(0, '127.0.0.1', () => resolve(s));
  });
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const org = unwrap(await services.request<{ id: string }>(Subjects.billing.createOrganization, { name: 'Acme', tier: 'standard' }));
  key = unwrap(
    await services.request<CreatedApiKey>(Subjects.billing.createApiKey, { org_id: org.id, name: 'k', mode: 'live', scopes: ['chat:write'] }),
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

const streamed = (signal?: AbortSignal, as = key, to = url) =>
  fetch(`${to}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${as}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'chat-2', stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
    ...(signal ? { signal } : {}),
  });
const answeredWhole = (to = url) =>
  fetch(`${to}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }] }),
  });
const unavailable = { error: { type: 'service_unavailable_error', code: 'service_unavailable', message: expect.any(String) } };
/** The cancels the gateway broadcasts to the chat service while `during` runs. */
async function cancelsDuring(during: () => Promise<void>): Promise<unknown[]> {
  const cancelled: unknown[] = [];
  const subscription = await services.onBroadcast(Subjects.chat.cancelStream, (m) => cancelled.push(m));
  try {
    await during();
  } finally {
    await subscription.stop();
  }
  return cancelled;
}

describe('streamed completions through the gateway', () => {
  it('writes frames in sequence order even when they arrive out of order and before the answer', async () => {
    script = (streamTo) => {
      const frames: StreamFrame[] = [
        { kind: 'end', seq: 3, usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 } },
        { kind: 'data', seq: 1, data: chunk(' world') },
        { kind: 'data', seq: 2, data: chunk('!') },
        { kind: 'data', seq: 0, data: chunk('Hello') },
      ];
      for (const frame of frames) broker.publish(streamTo, frame);
    };
    const res = await streamed();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(await res.text()).toBe(
      [chunk('Hello'), chunk(' world'), chunk('!')].map((c) => `data: ${JSON.stringify(c)}\n\n`).join('') + 'data: [DONE]\n\n',
    );
  });

  it('ends a stream that goes silent with an error event instead of hanging', async () => {
    script = (streamTo) => broker.publish(streamTo, { kind: 'data', seq: 0, data: chunk('Hel') });
    const res = await streamed();
    expect(await res.text()).toBe(
      `data: ${JSON.stringify(chunk('Hel'))}\n\n` +
        `data: ${JSON.stringify({ error: { type: 'api_error', message: 'The stream stalled for more than 200 ms.', code: 'stream_timeout' } })}\n\n`,
    );
  });

  it('tells the chat service to stop a stream it gave up for silence, so that it is charged for what it delivered', async () => {
    let subject = '';
    script = (streamTo) => {
      subject = streamTo;
      broker.publish(streamTo, { kind: 'data', seq: 0, data: chunk('Hel') });
    };
    const cancelled = await cancelsDuring(async () => {
      expect(await (await streamed()).text()).toMatch(/"code":"stream_timeout"/);
    });
    expect(cancelled).toEqual([{ stream_to: subject }]);
  });

  it('passes an error frame on in the form the SDKs raise, and closes the stream', async () => {
    script = (streamTo) =>
      broker.publish(streamTo, {
        kind: 'error',
        seq: 0,
        error: { status: 503, type: 'service_unavailable_error', code: 'upstream_error', message: 'down', retryAfter: 1 },
      });
    const res = await streamed();
    expect(await res.text()).toBe(`data: ${JSON.stringify({ error: { type: 'service_unavailable_error', message: 'down', code: 'upstream_error' } })}\n\n`);
  });

  it('tells the chat service to stop when the client goes away', async () => {
    const cancelled: unknown[] = [];
    const subscription = await services.onBroadcast(Subjects.chat.cancelStream, (m) => cancelled.push(m));
    let subject = '';
    script = (streamTo) => {
      subject = streamTo;
      broker.publish(streamTo, { kind: 'data', seq: 0, data: chunk('Hel') });
    };
    const abort = new AbortController();
    const res = await streamed(abort.signal);
    const reader = res.body!.getReader();
    await reader.read();
    abort.abort();
    await vi.waitFor(() => expect(cancelled).toEqual([{ stream_to: subject }]));
    expect(subject).toMatch(/^chat\.streams\.[A-Za-z0-9]+$/);
    await subscription.stop();
  });

  it("refuses an organization's completions beyond its in-flight bound with 429, and takes them again once one ends", async () => {
    // The first two streams are kept alive by a frame every 20 ms (the idle timeout is 200 ms), however slowly
    // a loaded machine gets to the third request; then they are ended.
    const open = new Map<string, number>();
    script = (streamTo) => void open.set(streamTo, 0);
    const frame = (streamTo: string, kind: 'data' | 'end') => {
      const seq = open.get(streamTo)!;
      open.set(streamTo, seq + 1);
      broker.publish(streamTo, kind === 'data' ? { kind, seq, data: chunk('.') } : { kind, seq, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
    };
    const alive = setInterval(() => {
      for (const streamTo of open.keys()) frame(streamTo, 'data');
    }, 20);
    // An organization of its own: the streams earlier tests left to their idle timeout still count for theirs.
    const org = unwrap(await services.request<{ id: string }>(Subjects.billing.createOrganization, { name: 'Solo', tier: 'standard' }));
    const own = unwrap(
      await services.request<CreatedApiKey>(Subjects.billing.createApiKey, { org_id: org.id, name: 'k', mode: 'live', scopes: ['chat:write'] }),
    ).key;
    const first = await streamed(undefined, own);
    const second = await streamed(undefined, own);
    const refused = await streamed(undefined, own);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toEqual({
      error: {
        type: 'rate_limit_error',
        code: 'rate_limit_exceeded',
        message: 'Rate limit exceeded (2 completions in flight per organization). Please retry in 1 seconds.',
      },
    });
    clearInterval(alive);
    for (const streamTo of open.keys()) frame(streamTo, 'end');
    expect(await first.text()).toMatch(/data: \[DONE\]\n\n$/);
    expect(await second.text()).toMatch(/data: \[DONE\]\n\n$/);
    // Both streams ended: there is room again.
    script = () => {};
    const again = await streamed(undefined, own);
    expect(again.status).toBe(200);
    await again.text();
  });
});

describe("OpenAI's agent contract at the gateway", () => {
  const post = (body: object) =>
    fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-2', stream: true, messages: [{ role: 'user', content: 'Hi' }], ...body }),
    });

  it.each([
    [{ frobnicate: true }, 'frobnicate'],
    [{ functions: [{ name: 'f' }] }, 'functions'],
    [{ web_search_options: {} }, 'web_search_options'],
  ])('refuses %j with 400 unsupported_parameter naming it, before the chat service is asked', async (body, param) => {
    const before = asked.length;
    const res = await post(body);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'invalid_request_error', code: 'unsupported_parameter', param });
    expect(asked.length).toBe(before);
  });

  it('refuses a named tool_choice that is not among the tools, naming tool_choice', async () => {
    const res = await post({ tools: [{ type: 'function', function: { name: 'a' } }], tool_choice: { type: 'function', function: { name: 'b' } } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ code: 'invalid_parameter', param: 'tool_choice' });
  });

  it("passes tools, parts, tool turns and our own fields (session_id, x-theory-position) on to the chat service as they came", async () => {
    script = (streamTo) => broker.publish(streamTo, { kind: 'end', seq: 0, usage: { prompt_tokens: 1, completion_tokens: 0, total_tokens: 1 } });
    const messages = [
      { role: 'developer', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'Look' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png', detail: 'low' } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c', content: 'ok' },
    ];
    const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} }, strict: true } }];
    const res = await post({ messages, tools, tool_choice: 'auto', n: 2, logprobs: true, top_logprobs: 2, session_id: 'chat_1', 'x-theory-position': { x: 0, y: 0 } });
    expect(res.status).toBe(200);
    await res.text();
    expect(asked.at(-1)).toMatchObject({ messages, tools, tool_choice: 'auto', n: 2, logprobs: true, top_logprobs: 2, session_id: 'chat_1', 'x-theory-position': { x: 0, y: 0 } });
  });
});

describe('a completion whose chat replica is gone', () => {
  const notice = { kind: 'replica', replica: 'chat-1', incarnation: 'run-1' };

  it('ends its stream with a 503 error event as soon as the replica named in its notice is gone, and tells chat to stop', async () => {
    let subject = '';
    script = (streamTo) => {
      subject = streamTo;
      broker.publish(streamTo, notice);
      broker.publish(streamTo, { kind: 'data', seq: 0, data: chunk('Hel') });
    };
    const cancelled = await cancelsDuring(async () => {
      const res = await streamed();
      const reader = res.body!.getReader();
      await reader.read();
      await vi.waitFor(() => expect(watched.map((w) => [w.replica, w.incarnation])).toEqual([['chat-1', 'run-1']]));
      watched[0]!.gone();
      let text = new TextDecoder().decode((await reader.read()).value);
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
      expect(text).toBe(`data: ${JSON.stringify({ error: { type: 'service_unavailable_error', message: 'The chat service stopped while answering; retry the request.', code: 'service_unavailable' } })}\n\n`);
    });
    expect(cancelled).toEqual([{ stream_to: subject }]);
    expect(watched).toEqual([]);
  });

  it('answers a completion answered whole 503 as soon as its replica is gone, and gives its work up', async () => {
    let subject = '';
    whole = (watchTo) => {
      subject = watchTo;
      broker.publish(watchTo, notice);
      return new Promise(() => {});
    };
    const cancelled = await cancelsDuring(async () => {
      const answer = answeredWhole();
      await vi.waitFor(() => expect(watched).toHaveLength(1));
      watched[0]!.gone();
      const res = await answer;
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual(unavailable);
    });
    expect(subject).toMatch(/^chat\.streams\.[A-Za-z0-9]+$/);
    expect(cancelled).toEqual([{ stream_to: subject }]);
    expect(watched).toEqual([]);
  });
});

describe('a gateway that stops', () => {
  it('refuses new requests 503 at once (probes still answer), lets a stream end within the grace, and gives up what outlasts it', async () => {
    const drain = new Drain();
    const app = createGatewayApp({
      services,
      authenticator: new KeyAuthenticator(services, clock),
      limits: RateLimits.inMemory(),
      usage: new KeyUsageRecorder(services, clock),
      clock,
      logger,
      adminToken: 'admin-token-for-tests',
      version: '1.2.3',
      v1: chatRoutes({ streamIdleTimeoutMs: 60_000, cut: drain.cut.signal }),
      admin: [],
      ready: async () => {
        if (drain.draining) throw new Error('stopping');
      },
    });
    const stopping = await new Promise<Server>((resolve) => {
      const s = createServer(drain.listener(app)).listen(0, '127.0.0.1', () => resolve(s));
    });
    const to = `http://127.0.0.1:${(stopping.address() as AddressInfo).port}`;
    try {
      const subjects: string[] = [];
      script = (streamTo) => {
        subjects.push(streamTo);
        broker.publish(streamTo, { kind: 'data', seq: 0, data: chunk('Hel') });
      };
      whole = () => new Promise(() => {});
      const ending = await streamed(undefined, key, to);
      const outlasting = await streamed(undefined, key, to);
      const before = asked.length;
      const waiting = answeredWhole(to);
      // With the chat service: in flight, not merely sent.
      await vi.waitFor(() => expect(asked).toHaveLength(before + 1));

      const cancelled = await cancelsDuring(async () => {
        const drained = drain.drain(300);
        const refused = await fetch(`${to}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
        expect(refused.status).toBe(503);
        expect(refused.headers.get('connection')).toBe('close');
        expect(await refused.json()).toEqual(unavailable);
        expect((await fetch(`${to}/readyz`)).status).toBe(503);
        expect((await fetch(`${to}/healthz`)).status).toBe(200);

        broker.publish(subjects[0]!, { kind: 'end', seq: 1, usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
        expect(await ending.text()).toBe(`data: ${JSON.stringify(chunk('Hel'))}\n\ndata: [DONE]\n\n`);
        expect(await outlasting.text()).toBe(
          `data: ${JSON.stringify(chunk('Hel'))}\n\ndata: ${JSON.stringify({ error: { type: 'service_unavailable_error', message: 'This server is shutting down; retry the request.', code: 'service_unavailable' } })}\n\n`,
        );
        const answer = await waiting;
        expect(answer.status).toBe(503);
        expect(await answer.json()).toEqual(unavailable);
        await drained;
      });
      expect(cancelled).toEqual(expect.arrayContaining([{ stream_to: subjects[1] }]));
      expect(cancelled).toHaveLength(2);
    } finally {
      stopping.closeAllConnections();
      stopping.close();
    }
  });
});
