import { join } from 'node:path';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { SqliteEventStore } from '@oc/eventstore';
import { ABANDONED_SWEEP_MS } from '../../chat/src/app';
import { type FakeUpstream, startFakeUpstream } from '../../chat/test/fake-upstream';
import { clientFor } from './client';
import { conformingSdkFetch } from './conformance';
import { distributed, embedded, type RunningService, type Starter } from './harness';
import { natsReachable } from './nats';
import { readSse } from './sse';

const modes: [string, Starter][] = [
  ['embedded', embedded],
  ...((await natsReachable()) ? [['distributed over NATS', distributed] as [string, Starter]] : []),
];

/** 0.08 USD per 1,000 tokens: 80 micro-USD a token. */
const MICROS_PER_TOKEN = 80;

describe.each(modes)('chat and text completions (%s)', (_mode, start) => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;

  beforeAll(async () => {
    // The simulator paces its words so a client can leave mid-stream; small enough to keep tests quick.
    service = await start({ CHAT_SIMULATOR_WORD_DELAY_MS: '3' });
    api = clientFor(service);
  });
  afterAll(async () => {
    await service?.stop();
  });

  const chatScopes = ['chat:read', 'chat:write', 'text:write'];
  const customer = (options: Parameters<typeof api.newCustomer>[0] = {}) =>
    api.newCustomer({ credit: 10, scopes: chatScopes, ...options });
  const availableMicros = async (key: string) => {
    const res = await api.call('GET', '/v1/account/balance', { token: key });
    expect(res.status).toBe(200);
    return { available: Math.round(res.body.available * 1e6), reserved: Math.round(res.body.reserved * 1e6) };
  };
  const chat = (key: string, body: Record<string, unknown>) =>
    api.call('POST', '/v1/chat/completions', { token: key, body: { model: 'chat-2', ...body } });
  const stream = (key: string, path: string, body: Record<string, unknown>, signal?: AbortSignal) =>
    fetch(`${service.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-2', stream: true, ...body }),
      ...(signal ? { signal } : {}),
    });
  const hello = [{ role: 'user', content: 'How do community gardens change a neighbourhood?' }];

  describe('POST /v1/chat/completions', () => {
    it('answers with the chat completion object and charges exactly the tokens used', async () => {
      const { key } = await customer();
      const before = await availableMicros(key);
      const res = await chat(key, { messages: hello });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^chatcmpl_[A-Za-z0-9]+$/),
        object: 'chat.completion',
        created: expect.any(Number),
        model: 'chat-2',
        choices: [{ index: 0, message: { role: 'assistant', content: expect.stringContaining('community'), refusal: null }, logprobs: null, finish_reason: 'stop' }],
        usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number), total_tokens: expect.any(Number) },
        session_id: expect.stringMatching(/^chat_[A-Za-z0-9]+$/),
      });
      const { usage } = res.body;
      expect(usage.total_tokens).toBe(usage.prompt_tokens + usage.completion_tokens);
      expect(usage.completion_tokens).toBeGreaterThan(10);
      expect(await availableMicros(key)).toEqual({ available: before.available - usage.total_tokens * MICROS_PER_TOKEN, reserved: 0 });
    });

    it('gives the same prompt the same reply (the simulator is deterministic)', async () => {
      const { key } = await customer();
      const [a, b] = await Promise.all([chat(key, { messages: hello }), chat(key, { messages: hello, temperature: 0 })]);
      expect(a.body.choices[0].message.content).toBe(b.body.choices[0].message.content);
    });

    it.each([
      ['a missing model', { messages: hello }, 'invalid_model', 'model'],
      ['an unknown model', { model: 'gpt-4o', messages: hello }, 'invalid_model', 'model'],
      ['no messages', { model: 'chat-2', messages: [] }, 'invalid_parameter', 'messages'],
      ['missing messages', { model: 'chat-2' }, 'missing_parameter', 'messages'],
      ['an unknown role', { model: 'chat-2', messages: [{ role: 'robot', content: 'x' }] }, 'invalid_parameter', 'messages[0].role'],
      ['a non-string content', { model: 'chat-2', messages: [{ role: 'user', content: 5 }] }, 'invalid_parameter', 'messages[0].content'],
      ['a temperature above 2', { model: 'chat-2', messages: hello, temperature: 2.5 }, 'invalid_parameter', 'temperature'],
      ['a zero max_tokens', { model: 'chat-2', messages: hello, max_tokens: 0 }, 'invalid_parameter', 'max_tokens'],
      ['a fractional max_tokens', { model: 'chat-2', messages: hello, max_tokens: 1.5 }, 'invalid_parameter', 'max_tokens'],
      ['a non-boolean stream', { model: 'chat-2', messages: hello, stream: 'yes' }, 'invalid_parameter', 'stream'],
      ['a theory position off the plane', { model: 'chat-2', messages: hello, 'x-theory-position': { x: 1.5, y: 0 } }, 'invalid_parameter', 'x-theory-position.x'],
      ['a theory position without y', { model: 'chat-2', messages: hello, 'x-theory-position': { x: 0 } }, 'missing_parameter', 'x-theory-position.y'],
    ])('refuses %s with 400 naming the parameter', async (_, body, code, param) => {
      const { key } = await customer();
      const before = await availableMicros(key);
      const res = await api.call('POST', '/v1/chat/completions', { token: key, body });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code, param });
      expect(await availableMicros(key)).toEqual(before);
    });

    it('ignores OpenAI fields it does not support, so existing clients keep working', async () => {
      const { key } = await customer();
      const res = await chat(key, { messages: hello, top_p: 0.9, n: 1, user: 'u-1', presence_penalty: 0, seed: 7 });
      expect(res.status).toBe(200);
    });

    it('stops at max_tokens with finish_reason length', async () => {
      const { key } = await customer();
      const res = await chat(key, { messages: hello, max_tokens: 5 });
      expect(res.status).toBe(200);
      expect(res.body.choices[0].finish_reason).toBe('length');
      expect(res.body.usage.completion_tokens).toBeLessThanOrEqual(5);
      expect(res.body.usage.completion_tokens).toBeGreaterThan(0);
    });

    it('cuts the reply at a stop sequence', async () => {
      const { key } = await customer();
      const full = (await chat(key, { messages: hello })).body.choices[0].message.content as string;
      const stop = full.split(' ').slice(3, 5).join(' ');
      const res = await chat(key, { messages: hello, stop: [stop] });
      expect(res.body.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: full.slice(0, full.indexOf(stop)) } });
    });

    it('steers the reply by the theory position', async () => {
      const { key } = await customer();
      const structural = await chat(key, { messages: hello, 'x-theory-position': { x: 1, y: -1 } });
      expect(structural.body.choices[0].message.content).toContain('Leaning towards structuralism (policy and systems change)');
      const faith = await chat(key, { messages: hello, 'x-theory-position': { x: 0.9, y: 0.8 } });
      expect(faith.body.choices[0].message.content).toContain('Leaning towards theurgism (faith-based activism)');
    });

    it('refuses with 402 insufficient_quota when the balance cannot cover the prompt plus max_tokens, naming the bound', async () => {
      const { key } = await customer({ credit: 0.01 });
      const res = await chat(key, { messages: hello, max_tokens: 500 });
      expect(res.status).toBe(402);
      expect(res.body.error).toMatchObject({ type: 'insufficient_quota', code: 'insufficient_quota' });
      const [, reserved, promptTokens, fitting] = /^Insufficient balance: this request reserves up to \$(0\.\d+) \((\d+) prompt tokens \+ max_tokens 500, at \$0\.08 per 1,000 tokens\) but \$0\.01 is available\. Lower max_tokens to reserve less: max_tokens (\d+) or less fits this balance\. Only the tokens used are charged\.$/.exec(
        res.body.error.message,
      )!.map(Number);
      expect(Math.round(reserved! * 1e6)).toBe((promptTokens! + 500) * MICROS_PER_TOKEN);
      expect(await availableMicros(key)).toEqual({ available: 10_000, reserved: 0 });
      // The advice is exact: one token more is refused, the max_tokens it names is served.
      expect((await chat(key, { messages: hello, max_tokens: fitting! + 1 })).status).toBe(402);
      expect((await chat(key, { messages: hello, max_tokens: fitting! })).status).toBe(200);
      // Without max_tokens the documented default cap (4,096 tokens) is reserved, and the message says so.
      const defaulted = await chat(key, { messages: hello });
      expect(defaulted.status).toBe(402);
      expect(defaulted.body.error.message).toContain('prompt tokens + max_tokens 4096 (the default when max_tokens is not set)');
    });

    it('says when even max_tokens 1 cannot fit beside the prompt', async () => {
      const { key } = await customer({ credit: 0.000080 });
      const res = await chat(key, { messages: hello, max_tokens: 1 });
      expect(res.status).toBe(402);
      expect(res.body.error.message).toMatch(/but \$0\.00008 is available\. Even max_tokens 1 does not fit with this prompt: add credit or send a shorter prompt\.$/);
    });

    it('counts max_tokens once per prompt of a text completion in the 402', async () => {
      const { key } = await customer({ credit: 0.001 });
      const res = await api.call('POST', '/v1/completions', { token: key, body: { model: 'chat-2', prompt: ['Once upon', 'a time'], max_tokens: 50 } });
      expect(res.status).toBe(402);
      expect(res.body.error.message).toMatch(/\(\d+ prompt tokens \+ max_tokens 50 for each of 2 prompts, at \$0\.08 per 1,000 tokens\) but \$0\.001 is available/);
    });

    it('serves test keys from the simulator without charging anything', async () => {
      const { key } = await api.newCustomer({ scopes: chatScopes, key: { mode: 'test' } });
      const res = await chat(key, { messages: hello });
      expect(res.status).toBe(200);
      expect(res.body.usage.total_tokens).toBeGreaterThan(0);
      expect(await availableMicros(key)).toEqual({ available: 0, reserved: 0 });
    });

    it('needs chat:write', async () => {
      const { key } = await customer({ scopes: ['chat:read'] });
      const res = await chat(key, { messages: hello });
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('insufficient_scope');
    });
  });

  describe('sessions', () => {
    it('keeps the conversation under session_id and shows it, newest first, only to its organization', async () => {
      const { key } = await customer();
      const first = await chat(key, { messages: [{ role: 'system', content: 'Be brief.' }, ...hello] });
      const sessionId = first.body.session_id;
      const fresh = await chat(key, { messages: [{ role: 'user', content: 'And in winter?' }] });
      const followUp = await chat(key, { session_id: sessionId, messages: [{ role: 'user', content: 'And in winter?' }] });
      expect(followUp.status).toBe(200);
      expect(followUp.body.session_id).toBe(sessionId);
      // The stored history went upstream with the new message.
      expect(followUp.body.usage.prompt_tokens).toBe(
        fresh.body.usage.prompt_tokens + first.body.usage.prompt_tokens - 3 + first.body.usage.completion_tokens + 4,
      );

      const got = await api.call('GET', `/v1/chat/completions/${sessionId}`, { token: key });
      expect(got.status).toBe(200);
      expect(got.body).toEqual({
        id: sessionId,
        object: 'chat.completion',
        created_at: expect.any(Number),
        messages: [
          { role: 'system', content: 'Be brief.', created_at: expect.any(Number) },
          { role: 'user', content: hello[0]!.content, created_at: expect.any(Number) },
          { role: 'assistant', content: first.body.choices[0].message.content, created_at: expect.any(Number) },
          { role: 'user', content: 'And in winter?', created_at: expect.any(Number) },
          { role: 'assistant', content: followUp.body.choices[0].message.content, created_at: expect.any(Number) },
        ],
      });

      const list = await api.call('GET', '/v1/chat/completions', { token: key });
      expect(list.status).toBe(200);
      expect(list.body).toEqual({
        object: 'list',
        data: expect.arrayContaining([{ id: sessionId, object: 'chat.completion', created_at: expect.any(Number) }]),
        has_more: false,
      });
      expect(list.body.data.map((s: { id: string }) => s.id).sort()).toEqual([fresh.body.session_id, sessionId].sort());
      const created = list.body.data.map((s: { created_at: number }) => s.created_at);
      expect(created).toEqual([...created].sort((a, b) => b - a));

      const other = await customer();
      for (const res of [
        await api.call('GET', `/v1/chat/completions/${sessionId}`, { token: other.key }),
        await chat(other.key, { session_id: sessionId, messages: hello }),
      ]) {
        expect(res.status).toBe(404);
        expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'resource_not_found' });
      }
      expect((await api.call('GET', '/v1/chat/completions', { token: other.key })).body.data).toEqual([]);
    });

    it('answers an unknown session with 404 and charges nothing', async () => {
      const { key } = await customer();
      const before = await availableMicros(key);
      const res = await chat(key, { session_id: 'chat_doesnotexist', messages: hello });
      expect(res.status).toBe(404);
      expect(res.body.error).toMatchObject({ type: 'invalid_request_error', code: 'resource_not_found' });
      expect((await api.call('GET', '/v1/chat/completions/chat_doesnotexist', { token: key })).status).toBe(404);
      expect(await availableMicros(key)).toEqual(before);
    });

    it('pages the list with limit and after, and refuses a limit over 100', async () => {
      const { key } = await customer();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await chat(key, { messages: [{ role: 'user', content: `Question ${i}` }] })).body.session_id);
      const page1 = await api.call('GET', '/v1/chat/completions?limit=2', { token: key });
      expect(page1.body.data).toHaveLength(2);
      expect(page1.body.has_more).toBe(true);
      const page2 = await api.call('GET', `/v1/chat/completions?limit=2&after=${page1.body.data[1].id}`, { token: key });
      expect(page2.body.has_more).toBe(false);
      const seen = [...page1.body.data, ...page2.body.data];
      expect(seen.map((s: { id: string }) => s.id).sort()).toEqual([...ids].sort());
      const created = seen.map((s: { created_at: number }) => s.created_at);
      expect(created).toEqual([...created].sort((a, b) => b - a));

      const tooMany = await api.call('GET', '/v1/chat/completions?limit=101', { token: key });
      expect(tooMany.status).toBe(400);
      expect(tooMany.body.error).toMatchObject({ type: 'invalid_request_error', param: 'limit' });
    });

    it('lists 20 sessions by default', async () => {
      const { key } = await api.newCustomer({ scopes: chatScopes, key: { mode: 'test' } });
      await Promise.all(Array.from({ length: 21 }, (_, i) => chat(key, { messages: [{ role: 'user', content: `Question ${i}` }], max_tokens: 3 })));
      const list = await api.call('GET', '/v1/chat/completions', { token: key });
      expect(list.body.data).toHaveLength(20);
      expect(list.body.has_more).toBe(true);
    });

    it('lists and retrieves free of charge, with chat:read', async () => {
      const { key } = await customer();
      const sessionId = (await chat(key, { messages: hello })).body.session_id;
      const before = await availableMicros(key);
      await api.call('GET', '/v1/chat/completions', { token: key });
      await api.call('GET', `/v1/chat/completions/${sessionId}`, { token: key });
      expect(await availableMicros(key)).toEqual(before);
      const { key: writer } = await customer({ scopes: ['chat:write'] });
      expect((await api.call('GET', '/v1/chat/completions', { token: writer })).status).toBe(403);
    });
  });

  describe('streaming', () => {
    it('streams Server-Sent Events exactly as the spec says, and the text matches the non-streamed reply', async () => {
      const { key } = await customer();
      const whole = await chat(key, { messages: hello });
      const before = await availableMicros(key);
      const res = await stream(key, '/v1/chat/completions', { messages: hello });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const events = await readSse(res);
      expect(events.at(-1)).toEqual({ raw: '[DONE]' });
      const chunks = events.slice(0, -1).map((e) => e.json);
      for (const c of chunks) {
        expect(c).toMatchObject({ id: expect.stringMatching(/^chatcmpl_/), object: 'chat.completion.chunk', created: expect.any(Number), model: 'chat-2' });
        expect(c.id).toBe(chunks[0].id);
        expect(c).not.toHaveProperty('usage');
      }
      expect(chunks[0].choices).toEqual([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]);
      const content = chunks.slice(1, -1);
      expect(content.length).toBeGreaterThan(5);
      for (const c of content) expect(c.choices).toEqual([{ index: 0, delta: { content: expect.any(String) }, finish_reason: null }]);
      expect(chunks.at(-1).choices).toEqual([{ index: 0, delta: {}, finish_reason: 'stop' }]);
      expect(content.map((c) => c.choices[0].delta.content).join('')).toBe(whole.body.choices[0].message.content);
      // Charged the same tokens as the same request unstreamed.
      expect(await availableMicros(key)).toEqual({ available: before.available - whole.body.usage.total_tokens * MICROS_PER_TOKEN, reserved: 0 });
      // The streamed exchange is kept in the session named by every chunk.
      const session = await api.call('GET', `/v1/chat/completions/${chunks[0].session_id}`, { token: key });
      expect(session.body.messages.at(-1)).toMatchObject({ role: 'assistant', content: whole.body.choices[0].message.content });
    });

    it('honours stream_options.include_usage and max_tokens', async () => {
      const { key } = await customer();
      const before = await availableMicros(key);
      const res = await stream(key, '/v1/chat/completions', { messages: hello, max_tokens: 7, stream_options: { include_usage: true } });
      const events = await readSse(res);
      expect(events.at(-1)).toEqual({ raw: '[DONE]' });
      const chunks = events.slice(0, -1).map((e) => e.json);
      const usageChunk = chunks.at(-1);
      expect(usageChunk.choices).toEqual([]);
      expect(usageChunk.usage).toEqual({ prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number), total_tokens: expect.any(Number) });
      expect(usageChunk.usage.completion_tokens).toBeLessThanOrEqual(7);
      for (const c of chunks.slice(0, -1)) expect(c.usage).toBeNull();
      expect(chunks.at(-2).choices).toEqual([{ index: 0, delta: {}, finish_reason: 'length' }]);
      expect(await availableMicros(key)).toEqual({ available: before.available - usageChunk.usage.total_tokens * MICROS_PER_TOKEN, reserved: 0 });
    });

    it('answers a refused stream with the plain error, not an event stream', async () => {
      const { key } = await customer({ credit: 0.001 });
      const res = await stream(key, '/v1/chat/completions', { messages: hello, max_tokens: 100 });
      expect(res.status).toBe(402);
      expect(((await res.json()) as any).error.code).toBe('insufficient_quota');
    });

    it('stops generating when the client disconnects and charges only what was generated', async () => {
      const { key } = await customer();
      const whole = await chat(key, { messages: hello });
      const before = await availableMicros(key);
      const abort = new AbortController();
      const res = await stream(key, '/v1/chat/completions', { messages: hello }, abort.signal);
      const reader = res.body!.getReader();
      let received = '';
      while (!received.includes('"content":" ')) received += new TextDecoder().decode((await reader.read()).value);
      const sessionId = JSON.parse(received.split('\n\n')[0]!.slice(6)).session_id;
      abort.abort();

      let session: any;
      await vi.waitFor(
        async () => {
          session = await api.call('GET', `/v1/chat/completions/${sessionId}`, { token: key });
          expect(session.status).toBe(200);
        },
        { timeout: 10_000, interval: 50 },
      );
      const partial = session.body.messages.at(-1).content as string;
      const full = whole.body.choices[0].message.content as string;
      expect(full.startsWith(partial)).toBe(true);
      expect(partial.length).toBeLessThan(full.length);
      const after = await availableMicros(key);
      expect(after.reserved).toBe(0);
      const charged = before.available - after.available;
      expect(charged).toBeGreaterThan(whole.body.usage.prompt_tokens * MICROS_PER_TOKEN - 1);
      expect(charged).toBeLessThan(whole.body.usage.total_tokens * MICROS_PER_TOKEN);
    });
  });

  describe('chat limits', () => {
    it("applies the tier's chat requests per minute to chat endpoints (standard: 60)", async () => {
      const { key } = await customer();
      const statuses: number[] = [];
      for (let i = 0; i < 61; i++) statuses.push((await api.call('GET', '/v1/chat/completions?limit=1', { token: key })).status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(60);
      const refused = await api.call('GET', '/v1/chat/completions', { token: key });
      expect(refused.status).toBe(429);
      expect(refused.body.error.message).toContain('chat per minute');
      expect(Number(refused.headers.get('x-ratelimit-limit'))).toBe(60);
      // Other endpoints still answer: the general per-minute limit is 100.
      expect((await api.call('GET', '/v1/account/balance', { token: key })).status).toBe(200);
    });

    it("refuses with 429 once the day's chat tokens are spent, counting streamed usage", async () => {
      // Free tier: 10,000 chat tokens a day.
      const { key } = await customer({ tier: 'free' });
      const long = Array.from({ length: 9_990 }, (_, i) => `w${i % 10}`).join(' ');
      const streamed = await stream(key, '/v1/chat/completions', { messages: [{ role: 'user', content: long }], max_tokens: 20 });
      const events = await readSse(streamed);
      expect(events.at(-1)).toEqual({ raw: '[DONE]' });
      const refused = await chat(key, { messages: hello });
      expect(refused.status).toBe(429);
      expect(refused.body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_exceeded' });
      expect(refused.body.error.message).toContain('chat tokens per day');
    });
  });

  describe('POST /v1/completions', () => {
    it('answers a text_completion, 16 tokens by default, billed like chat', async () => {
      const { key } = await customer();
      const before = await availableMicros(key);
      const res = await api.call('POST', '/v1/completions', { token: key, body: { model: 'chat-2', prompt: 'Write about rivers and bridges' } });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^cmpl_/),
        object: 'text_completion',
        created: expect.any(Number),
        model: 'chat-2',
        choices: [{ text: expect.stringContaining('rivers'), index: 0, logprobs: null, finish_reason: 'length' }],
        usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number), total_tokens: expect.any(Number) },
      });
      expect(res.body.usage.completion_tokens).toBeLessThanOrEqual(16);
      expect(await availableMicros(key)).toEqual({ available: before.available - res.body.usage.total_tokens * MICROS_PER_TOKEN, reserved: 0 });
    });

    it('answers one choice per prompt of an array', async () => {
      const { key } = await customer();
      const res = await api.call('POST', '/v1/completions', {
        token: key,
        body: { model: 'chat-2', prompt: ['Rivers', 'Mountains'], max_tokens: 200 },
      });
      expect(res.status).toBe(200);
      expect(res.body.choices.map((c: any) => [c.index, c.finish_reason])).toEqual([
        [0, 'stop'],
        [1, 'stop'],
      ]);
      expect(res.body.choices[1].text).toContain('mountains');
    });

    it('streams text_completion chunks ending in [DONE]', async () => {
      const { key } = await customer();
      const whole = await api.call('POST', '/v1/completions', { token: key, body: { model: 'chat-2', prompt: 'Rivers', max_tokens: 300 } });
      const events = await readSse(await stream(key, '/v1/completions', { prompt: 'Rivers', max_tokens: 300, stream_options: { include_usage: true } }));
      expect(events.at(-1)).toEqual({ raw: '[DONE]' });
      const chunks = events.slice(0, -1).map((e) => e.json);
      for (const c of chunks) expect(c).toMatchObject({ id: expect.stringMatching(/^cmpl_/), object: 'text_completion', model: 'chat-2' });
      const text = chunks.slice(0, -2).map((c) => c.choices[0].text).join('');
      expect(text).toBe(whole.body.choices[0].text);
      expect(chunks.at(-2).choices).toEqual([{ text: '', index: 0, logprobs: null, finish_reason: 'stop' }]);
      expect(chunks.at(-1)).toMatchObject({ choices: [], usage: whole.body.usage });
    });

    it.each([
      ['a missing prompt', { model: 'chat-2' }, 'missing_parameter', 'prompt'],
      ['a wrong model', { model: 'davinci', prompt: 'x' }, 'invalid_model', 'model'],
      ['a zero max_tokens', { model: 'chat-2', prompt: 'x', max_tokens: 0 }, 'invalid_parameter', 'max_tokens'],
    ])('refuses %s with 400', async (_, body, code, param) => {
      const { key } = await customer();
      const res = await api.call('POST', '/v1/completions', { token: key, body });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code, param });
    });

    it('needs text:write', async () => {
      const { key } = await customer({ scopes: ['chat:write'] });
      expect((await api.call('POST', '/v1/completions', { token: key, body: { model: 'chat-2', prompt: 'x' } })).status).toBe(403);
    });
  });

  describe('the official openai SDK, unchanged', () => {
    const sdk = (key: string) => new OpenAI({ apiKey: key, baseURL: `${service.url}/v1`, maxRetries: 0 , fetch: conformingSdkFetch(service.url) });

    it('creates a chat completion', async () => {
      const { key } = await customer();
      const completion = await sdk(key).chat.completions.create({ model: 'chat-2', messages: [{ role: 'user', content: 'Hello there' }] });
      expect(completion.choices[0]!.message).toMatchObject({ role: 'assistant', content: expect.stringContaining('You') });
      expect(completion.usage!.total_tokens).toBeGreaterThan(0);
    });

    it('streams a chat completion', async () => {
      const { key } = await customer();
      const chunks = await sdk(key).chat.completions.create({
        model: 'chat-2',
        messages: [{ role: 'user', content: 'Hello there' }],
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let usage: OpenAI.CompletionUsage | null | undefined;
      for await (const chunk of chunks) {
        text += chunk.choices[0]?.delta.content ?? '';
        usage = chunk.usage ?? usage;
      }
      expect(text.length).toBeGreaterThan(20);
      expect(usage!.completion_tokens).toBeGreaterThan(0);
    });

    it('creates a text completion', async () => {
      const { key } = await customer();
      const completion = await sdk(key).completions.create({ model: 'chat-2', prompt: 'Once upon a time', max_tokens: 30 });
      expect(completion.object).toBe('text_completion');
      expect(completion.choices[0]!.text.length).toBeGreaterThan(10);
    });

    it('streams a text completion', async () => {
      const { key } = await customer();
      const chunks = await sdk(key).completions.create({ model: 'chat-2', prompt: 'Once upon a time', max_tokens: 30, stream: true });
      let text = '';
      for await (const chunk of chunks) text += chunk.choices[0]?.text ?? '';
      expect(text.length).toBeGreaterThan(10);
    });

    const weather: OpenAI.ChatCompletionTool = {
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'The weather in a city today',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
        strict: true,
      },
    };

    it('runs a tools round trip on a session (tool call, tool result, text), kept in the session and charged exactly', async () => {
      const { key } = await customer();
      const before = await availableMicros(key);
      const first = (await sdk(key).chat.completions.create({
        model: 'chat-2',
        messages: [{ role: 'user', content: 'What is the weather in Lisbon?' }],
        tools: [weather],
        tool_choice: 'required',
      })) as OpenAI.ChatCompletion & { session_id: string };
      const call = first.choices[0]!.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(first.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: null } });
      expect(JSON.parse(call.function.arguments)).toEqual({ city: expect.any(String) });
      const second = await sdk(key).chat.completions.create({
        model: 'chat-2',
        // Our extension: the session holds the user's question and the call; only the result is sent.
        session_id: first.session_id,
        messages: [{ role: 'tool', tool_call_id: call.id, content: 'Sunny and 24 degrees' }],
        tools: [weather],
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      expect(second.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: expect.stringMatching(/sunny|degrees/i) } });
      const session = await api.call('GET', `/v1/chat/completions/${first.session_id}`, { token: key });
      expect(session.body.messages.map((m: any) => [m.role, m.content === null, m.tool_calls?.[0]?.id ?? m.tool_call_id ?? null])).toEqual([
        ['user', false, null],
        ['assistant', true, call.id],
        ['tool', false, call.id],
        ['assistant', false, null],
      ]);
      const tokens = first.usage!.total_tokens + second.usage!.total_tokens;
      expect(await availableMicros(key)).toEqual({ available: before.available - tokens * MICROS_PER_TOKEN, reserved: 0 });
    });

    it("streams a tool call that the SDK's stream helper assembles", async () => {
      const { key } = await customer();
      const runner = sdk(key).chat.completions.stream({ model: 'chat-2', messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools: [weather] });
      const final = await runner.finalChatCompletion();
      const call = final.choices[0]!.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(final.choices[0]!.finish_reason).toBe('tool_calls');
      expect(call).toMatchObject({ id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather' } });
      expect(JSON.parse(call.function.arguments)).toEqual({ city: expect.any(String) });
    });

    it('parses n: 2 structured answers with chat.completions.parse and zodResponseFormat, each choice billed', async () => {
      const { key } = await customer();
      const before = await availableMicros(key);
      const Garden = z.object({ name: z.string(), plots: z.number().int(), crops: z.array(z.string()) });
      const parsed = await sdk(key).chat.completions.parse({
        model: 'chat-2',
        messages: [{ role: 'user', content: 'Describe a community garden.' }],
        response_format: zodResponseFormat(Garden, 'garden'),
        n: 2,
        max_completion_tokens: 200,
      });
      expect(parsed.choices).toHaveLength(2);
      for (const choice of parsed.choices) expect(Garden.parse(choice.message.parsed)).toEqual(choice.message.parsed);
      expect(await availableMicros(key)).toEqual({ available: before.available - parsed.usage!.total_tokens * MICROS_PER_TOKEN, reserved: 0 });
    });

    it('refuses a parameter it does not know with 400 unsupported_parameter naming it, and charges nothing', async () => {
      const { key } = await customer();
      const before = await availableMicros(key);
      const failure = await sdk(key)
        .chat.completions.create({ model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }], frobnicate: true } as OpenAI.ChatCompletionCreateParamsNonStreaming)
        .catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(OpenAI.BadRequestError);
      expect(failure).toMatchObject({ status: 400, code: 'unsupported_parameter', param: 'frobnicate', type: 'invalid_request_error' });
      expect(await availableMicros(key)).toEqual(before);
    });

    it('raises the API error the SDK way', async () => {
      const { key } = await customer({ credit: 0.001 });
      await expect(
        sdk(key).chat.completions.create({ model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 100 }),
      ).rejects.toMatchObject({ status: 402, code: 'insufficient_quota' });
    });
  });

  describe('charges', () => {
    it('charges exactly the sum of usage × price over many concurrent requests, and never below zero', async () => {
      // Each request holds its prompt plus the default 4,096-token cap (about 0.33 USD) while it runs.
      const { key } = await customer({ credit: 10 });
      const before = await availableMicros(key);
      const results = await Promise.all(
        Array.from({ length: 24 }, async (_, i) => {
          const messages = [{ role: 'user', content: `Tell me about topic number ${i} ${'and more '.repeat(i)}` }];
          if (i % 2 === 0) return (await chat(key, { messages })).body.usage.total_tokens as number;
          const events = await readSse(await stream(key, '/v1/chat/completions', { messages, stream_options: { include_usage: true } }));
          return events.at(-2)!.json.usage.total_tokens as number;
        }),
      );
      const tokens = results.reduce((a, b) => a + b, 0);
      expect(await availableMicros(key)).toEqual({ available: before.available - tokens * MICROS_PER_TOKEN, reserved: 0 });

      // A balance for a few requests only: the rest are refused, and the balance stays at or above zero.
      const poor = await customer({ credit: 0.05 });
      const attempts = await Promise.all(Array.from({ length: 20 }, () => chat(poor.key, { messages: hello, max_tokens: 100 })));
      const served = attempts.filter((r) => r.status === 200);
      expect(attempts.every((r) => r.status === 200 || r.status === 402)).toBe(true);
      expect(served.length).toBeGreaterThan(0);
      expect(served.length).toBeLessThan(20);
      const spent = served.reduce((sum, r) => sum + r.body.usage.total_tokens * MICROS_PER_TOKEN, 0);
      const left = await availableMicros(poor.key);
      expect(left).toEqual({ available: 50_000 - spent, reserved: 0 });
      expect(left.available).toBeGreaterThanOrEqual(0);
    });
  });
});

describe.each(modes)('chat with an OpenAI-compatible upstream (%s)', (_mode, start) => {
  let upstream: FakeUpstream;
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    service = await start({
      CHAT_UPSTREAM: 'openai',
      CHAT_UPSTREAM_BASE_URL: upstream.baseUrl,
      CHAT_UPSTREAM_API_KEY: 'sk-upstream',
      CHAT_UPSTREAM_MODEL: 'gpt-4o-mini',
      CHAT_SIMULATOR_WORD_DELAY_MS: '0',
    });
    api = clientFor(service);
  });
  afterAll(async () => {
    await service?.stop();
    await upstream?.close();
  });

  const balance = async (key: string) => {
    const res = await api.call('GET', '/v1/account/balance', { token: key });
    return { available: Math.round(res.body.available * 1e6), reserved: Math.round(res.body.reserved * 1e6) };
  };

  it('sends the theory position upstream as an instruction and charges the usage the upstream reports', async () => {
    const { key } = await api.newCustomer({ credit: 10, scopes: ['chat:write'] });
    upstream.requests.length = 0;
    upstream.script = [{ content: 'Organise' }, { content: ' locally.' }, { finish: 'stop' }, { usage: { prompt_tokens: 40, completion_tokens: 3, total_tokens: 43 } }];
    const res = await api.call('POST', '/v1/chat/completions', {
      token: key,
      body: { model: 'chat-2', messages: [{ role: 'user', content: 'Where do I start?' }], 'x-theory-position': { x: -1, y: -0.5 }, max_tokens: 64 },
    });
    expect(res.status).toBe(200);
    expect(res.body.choices[0].message.content).toBe('Organise locally.');
    expect(res.body.usage).toEqual({ prompt_tokens: 40, completion_tokens: 3, total_tokens: 43 });
    expect(upstream.requests).toEqual([
      expect.objectContaining({
        model: 'gpt-4o-mini',
        max_tokens: 64,
        messages: [
          {
            role: 'system',
            content:
              'Steer the emphasis of your reply by this blend of theories of change: voluntarism (grassroots mobilization) 75%, subjectivism (cultural transformation) 25%.',
          },
          { role: 'user', content: 'Where do I start?' },
        ],
      }),
    ]);
    // Not streamed to the client, so asked of the upstream as one JSON answer.
    expect(upstream.requests[0]).not.toHaveProperty('stream');
    expect(await balance(key)).toEqual({ available: 10_000_000 - 43 * MICROS_PER_TOKEN, reserved: 0 });
  });

  it('ends a stream with an error event when the upstream fails mid-stream, and charges the prompt and the text delivered', async () => {
    const { key } = await api.newCustomer({ credit: 10, scopes: ['chat:write'] });
    upstream.script = [{ content: 'Hel' }, { error: 'model overloaded' }];
    const res = await fetch(`${service.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'chat-2', stream: true, messages: [{ role: 'user', content: 'Hi' }] }),
    });
    expect(res.status).toBe(200);
    const events = await readSse(res);
    expect(events.map((e) => e.json?.choices?.[0]?.delta ?? e.json)).toEqual([
      { role: 'assistant', content: '' },
      { content: 'Hel' },
      // Not the upstream's words, which may name our account with it.
      { error: { type: 'service_unavailable_error', code: 'upstream_error', message: 'The provider serving chat-2 failed while answering.' } },
    ]);
    // "Hi" is 1 token, with the 3 + 4 the chat format adds; "Hel" is 1.
    const delivered = (1 + 3 + 4 + 1) * MICROS_PER_TOKEN;
    await vi.waitFor(async () => expect(await balance(key)).toEqual({ available: 10_000_000 - delivered, reserved: 0 }));
  });

  it('keeps serving test keys from the simulator', async () => {
    const { key } = await api.newCustomer({ scopes: ['chat:write'], key: { mode: 'test' } });
    upstream.requests.length = 0;
    const res = await api.call('POST', '/v1/chat/completions', { token: key, body: { model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }] } });
    expect(res.status).toBe(200);
    expect(upstream.requests).toEqual([]);
  });

  it.runIf(start === distributed)(
    'answers a stream and a completion whose chat replica is killed (SIGKILL) within seconds, with the 503 error, and charges neither',
    async () => {
      const { key } = await api.newCustomer({ credit: 10, scopes: ['chat:write'] });
      let upstreamGoesOn!: () => void;
      upstream.script = [{ content: 'Hel' }, { gate: new Promise<void>((resolve) => (upstreamGoesOn = resolve)) }, { content: 'lo' }, { finish: 'stop' }];
      upstream.requests.length = 0;
      const post = (stream: boolean) =>
        fetch(`${service.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'chat-2', stream, messages: [{ role: 'user', content: 'Hi' }] }),
        });
      const streamed = await post(true);
      const reader = streamed.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      while (!text.includes('"content":"Hel"')) text += decoder.decode((await reader.read()).value, { stream: true });
      const whole = post(false);
      // Both are with the upstream, waiting on it.
      await vi.waitFor(() => expect(upstream.requests).toHaveLength(2));

      const killedAt = Date.now();
      await service.crash!('chat');
      const [events, answer] = await Promise.all([
        (async () => {
          for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value, { stream: true });
          return { took: Date.now() - killedAt, data: text.split('\n\n').filter((b) => b.startsWith('data: ')).map((b) => b.slice(6)) };
        })(),
        whole.then(async (res) => ({ took: Date.now() - killedAt, status: res.status, body: await res.json() })),
      ]);
      upstreamGoesOn();
      console.info(`chat replica killed: the stream ended ${events.took} ms later, the completion answered whole ${answer.took} ms later`);
      const unavailable = { error: { type: 'service_unavailable_error', code: 'service_unavailable', message: expect.any(String) } };
      // Not the 60 s of a stalled stream nor the 300 s of a completion's timeout: presence says at once the process is gone.
      expect(events.took).toBeLessThan(10_000);
      expect(JSON.parse(events.data.at(-1)!)).toEqual(unavailable);
      expect(events.data).not.toContain('[DONE]');
      expect(answer.took).toBeLessThan(10_000);
      expect(answer).toMatchObject({ status: 503, body: unavailable });
      // The chat process started again releases what the killed one held: the text a stream delivered before it
      // broke off is not charged, since its client got no finished answer.
      await vi.waitFor(async () => expect(await balance(key)).toEqual({ available: 10_000_000, reserved: 0 }), { timeout: 30_000, interval: 200 });
    },
  );
});

describe('a charge that cannot be stored (embedded)', () => {
  it('keeps no exchange without it: the caller gets an error, and the sweep releases the funds held', async () => {
    const service = await embedded();
    // A connection of the test's own to the service's event log; it never appends.
    const events = new SqliteEventStore({ filename: join(service.dataDir!, 'events.sqlite'), readOnly: true });
    try {
      const api = clientFor(service);
      const { key } = await api.newCustomer({ credit: 10, scopes: ['chat:read', 'chat:write'] });
      // The capture's commit fails as a failing disk would; the session's exchange is queued right behind it.
      events.db.exec("CREATE TRIGGER capture_fails BEFORE INSERT ON events WHEN NEW.type = 'ReservationCaptured' BEGIN SELECT RAISE(ABORT, 'disk I/O error'); END");

      const res = await api.call('POST', '/v1/chat/completions', { token: key, body: { model: 'chat-2', messages: [{ role: 'user', content: 'Hi' }] } });

      expect(res.status).toBe(500);
      expect(res.body.error).toMatchObject({ type: 'api_error', code: 'internal_error' });
      expect((await api.call('GET', '/v1/chat/completions', { token: key })).body.data).toEqual([]);
      events.db.exec('DROP TRIGGER capture_fails');
      service.clock!.advance(ABANDONED_SWEEP_MS);
      await vi.waitFor(async () => {
        const balance = (await api.call('GET', '/v1/account/balance', { token: key })).body;
        expect(balance).toMatchObject({ available: 10, reserved: 0 });
      });
    } finally {
      await events.close();
      await service.stop();
    }
  });
});
