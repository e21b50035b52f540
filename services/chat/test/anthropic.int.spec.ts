import { createServer } from 'node:net';
import { ProviderError } from '@oc/routing';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AnthropicChatProvider } from '../src/adapters/anthropic';
import { ANTHROPIC_CHAT_DEFAULT } from '../src/adapters/provider-defaults';
import type { GenerationEvent, GenerationRequest } from '../src/application/ports';
import { type FakeAnswer, type FakeAnthropic, startFakeAnthropic } from './fakes/anthropic';

const KEY = 'sk-ant-test-not-a-real-key';

describe('Anthropic chat provider (official SDK against a local fake of the Messages API)', { timeout: 10_000 }, () => {
  let fake: FakeAnthropic;
  let provider: AnthropicChatProvider;

  const request: GenerationRequest = {
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi' },
    ],
    maxTokens: 50,
    temperature: undefined,
    stop: [],
    stream: true,
  };
  const answer = (overrides: Partial<FakeAnswer> = {}): { answer: FakeAnswer } => ({
    answer: { text: ['Hel', 'lo'], stopReason: 'end_turn', usage: { input_tokens: 12, output_tokens: 3 }, ...overrides },
  });

  const collect = async (overrides: Partial<GenerationRequest> = {}, signal = new AbortController().signal, using = provider) => {
    const events: GenerationEvent[] = [];
    for await (const event of using.generate({ ...request, ...overrides }, signal)) events.push(event);
    return events;
  };
  const failure = (overrides: Partial<GenerationRequest> = {}, using = provider) =>
    collect(overrides, undefined, using).then(
      () => expect.unreachable('the call succeeded'),
      (error: unknown) => error as ProviderError,
    );

  beforeAll(async () => {
    fake = await startFakeAnthropic();
    provider = new AnthropicChatProvider({ apiKey: KEY, baseUrl: fake.baseUrl, model: ANTHROPIC_CHAT_DEFAULT.model, timeoutMs: 5_000 });
  });
  afterAll(() => fake.close());
  beforeEach(() => {
    fake.requests.length = 0;
  });

  describe('what is sent', () => {
    it('puts the system messages on top in order, the turns as they are, and asks for max_tokens, stop_sequences, no thinking and no temperature', async () => {
      fake.reply = answer();
      const messages: GenerationRequest['messages'] = [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Hello.' },
        { role: 'system', content: 'Answer in French.' },
        { role: 'user', content: 'Name a colour.' },
        { role: 'user', content: 'One word.' },
      ];
      await collect({ messages, stop: ['END', '###'] });
      expect(fake.requests).toHaveLength(1);
      expect(fake.requests[0]!.body).toStrictEqual({
        model: 'claude-haiku-5-5',
        max_tokens: 50,
        system: [
          { type: 'text', text: 'Be brief.' },
          { type: 'text', text: 'Answer in French.' },
        ],
        messages: [
          { role: 'user', content: 'Hi' },
          { role: 'assistant', content: 'Hello.' },
          { role: 'user', content: 'Name a colour.' },
          { role: 'user', content: 'One word.' },
        ],
        stop_sequences: ['END', '###'],
        thinking: { type: 'disabled' },
        stream: true,
      });
    });

    it('sends no system and no stop_sequences when there are none, and no stream flag for a whole answer', async () => {
      fake.reply = answer();
      await collect({ messages: [{ role: 'user', content: 'Hi' }], stream: false });
      expect(fake.requests[0]!.body).toStrictEqual({
        model: 'claude-haiku-5-5',
        max_tokens: 50,
        messages: [{ role: 'user', content: 'Hi' }],
        thinking: { type: 'disabled' },
      });
    });

    it('authenticates with a Bearer key on POST /v1/messages under API version 2026-10-21', async () => {
      fake.reply = answer();
      await collect();
      const [sent] = fake.requests;
      expect(sent).toMatchObject({ method: 'POST', path: '/v1/messages' });
      expect(sent!.headers.authorization).toBe(`Bearer ${KEY}`);
      expect(sent!.headers['anthropic-version']).toBe('2026-10-21');
      expect(sent!.headers['x-api-key']).toBeUndefined();
    });

  });

  describe('answers', () => {
    it('relays a streamed answer delta by delta, then finish with the exact usage, cache writes and reads counted as prompt', async () => {
      fake.reply = answer({ usage: { input_tokens: 12, cache_creation_input_tokens: 100, cache_read_input_tokens: 7, output_tokens: 3 } });
      expect(await collect()).toEqual([
        { type: 'content', text: 'Hel' },
        { type: 'content', text: 'lo' },
        { type: 'finish', finishReason: 'stop', usage: { prompt_tokens: 119, completion_tokens: 3, total_tokens: 122 } },
      ]);
    });

    it('gives a whole answer as one content event, then finish with the exact usage', async () => {
      fake.reply = answer({ usage: { input_tokens: 12, cache_read_input_tokens: 7, output_tokens: 3 } });
      expect(await collect({ stream: false })).toEqual([
        { type: 'content', text: 'Hello' },
        { type: 'finish', finishReason: 'stop', usage: { prompt_tokens: 19, completion_tokens: 3, total_tokens: 22 } },
      ]);
    });

    it.each([true, false])('relays only the text, not a thinking block (stream: %s)', async (stream) => {
      fake.reply = answer({ thinking: 'The user greets me.' });
      const events = await collect({ stream });
      expect(events.filter((e) => e.type === 'content').map((e) => (e.type === 'content' ? e.text : '')).join('')).toBe('Hello');
    });

    it.each([
      ['end_turn', 'stop'],
      ['stop_sequence', 'stop'],
      ['max_tokens', 'length'],
      ['model_context_window_exceeded', 'length'],
    ])('ends on stop_reason %s with finish reason %s, streamed or whole', async (stopReason, finishReason) => {
      fake.reply = answer({ stopReason });
      for (const stream of [true, false]) expect((await collect({ stream })).at(-1)).toMatchObject({ type: 'finish', finishReason });
    });

    it('ends an answer its safety classifiers stopped (refusal) with content_filter, after the text that came, streamed or whole', async () => {
      fake.reply = answer({ stopReason: 'refusal', stopDetails: { type: 'refusal', category: 'cyber', explanation: 'Declined: could enable cyber harm.' } });
      expect(await collect()).toEqual([
        { type: 'content', text: 'Hel' },
        { type: 'content', text: 'lo' },
        { type: 'finish', finishReason: 'content_filter', usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 } },
      ]);
      expect((await collect({ stream: false })).at(-1)).toMatchObject({ type: 'finish', finishReason: 'content_filter' });
    });

    it('treats a turn paused for server tools (never sent) as unfinished: retryable', async () => {
      fake.reply = answer({ stopReason: 'pause_turn' });
      for (const stream of [true, false]) expect(await failure({ stream })).toMatchObject({ kind: 'retryable' });
    });
  });

  describe('agent features', () => {
    const weather = {
      type: 'function' as const,
      function: {
        name: 'get_weather',
        description: 'Weather for a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
        strict: true,
      },
    };
    const time = { type: 'function' as const, function: { name: 'get_time' } };
    const PNG = 'iVBORw0KGgo=';

    it('sends tools, a tool round trip, images, developer instructions and a JSON schema in the documented shapes', async () => {
      fake.reply = answer();
      await collect({
        stream: false,
        messages: [
          { role: 'developer', content: [{ type: 'text', text: 'Use tools.' }] },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is on these, and the weather?' },
              { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } },
              { type: 'image_url', image_url: { url: 'https://example.com/a.jpg', detail: 'high' } },
            ],
          },
          {
            role: 'assistant',
            content: null,
            tool_calls: [
              { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
              { id: 'call_2', type: 'function', function: { name: 'get_time', arguments: '' } },
            ],
          },
          { role: 'tool', tool_call_id: 'call_1', content: '18°C' },
          { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: '14:00' }] },
          { role: 'user', content: 'Thanks.' },
        ],
        tools: [weather, time],
        toolChoice: 'required',
        parallelToolCalls: false,
        responseFormat: { type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: false } } },
        options: { safety_identifier: 'user-42' },
      });
      expect(fake.requests).toHaveLength(1);
      expect(fake.requests[0]!.body).toStrictEqual({
        model: 'claude-haiku-5-5',
        max_tokens: 50,
        system: [{ type: 'text', text: 'Use tools.' }],
        messages: [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is on these, and the weather?' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: PNG } },
              { type: 'image', source: { type: 'url', url: 'https://example.com/a.jpg' } },
            ],
          },
          {
            role: 'assistant',
            content: [
              { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
              { type: 'tool_use', id: 'call_2', name: 'get_time', input: {} },
            ],
          },
          {
            role: 'user',
            content: [
              { type: 'tool_result', tool_use_id: 'call_1', content: '18°C' },
              { type: 'tool_result', tool_use_id: 'call_2', content: [{ type: 'text', text: '14:00' }] },
            ],
          },
          { role: 'user', content: 'Thanks.' },
        ],
        tools: [
          {
            name: 'get_weather',
            description: 'Weather for a city',
            input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
            strict: true,
          },
          { name: 'get_time', input_schema: { type: 'object', properties: {} } },
        ],
        tool_choice: { type: 'any', disable_parallel_tool_use: true },
        output_config: { format: { type: 'json_schema', schema: { type: 'object', properties: { a: { type: 'string' } }, additionalProperties: false } } },
        metadata: { user_id: 'user-42' },
        thinking: { type: 'disabled' },
      });
    });

    it.each([
      ['none', undefined, { type: 'none' }],
      ['auto', undefined, { type: 'auto' }],
      ['required', undefined, { type: 'any' }],
      [{ type: 'function', function: { name: 'get_time' } }, undefined, { type: 'tool', name: 'get_time' }],
      [undefined, false, { type: 'auto', disable_parallel_tool_use: true }],
      [{ type: 'function', function: { name: 'get_time' } }, false, { type: 'tool', name: 'get_time', disable_parallel_tool_use: true }],
      [undefined, true, undefined],
    ] as const)('maps tool_choice %j with parallel_tool_calls %s to %j', async (toolChoice, parallelToolCalls, expected) => {
      fake.reply = answer();
      await collect({ tools: [weather, time], ...(toolChoice ? { toolChoice } : {}), ...(parallelToolCalls !== undefined ? { parallelToolCalls } : {}) });
      expect(fake.requests[0]!.body.tool_choice).toStrictEqual(expected);
    });

    it('gives a whole answer that calls tools as tool-call events with the input as JSON text, finishing with tool_calls', async () => {
      fake.reply = answer({
        text: ['Checking.'],
        stopReason: 'tool_use',
        toolUses: [
          { id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' } },
          { id: 'toolu_02', name: 'get_time', input: {} },
        ],
      });
      expect(await collect({ stream: false, tools: [weather, time] })).toEqual([
        { type: 'content', text: 'Checking.' },
        { type: 'tool_call', fragment: { call: 0, id: 'toolu_01', name: 'get_weather', arguments: '{"city":"Paris"}' } },
        { type: 'tool_call', fragment: { call: 1, id: 'toolu_02', name: 'get_time', arguments: '{}' } },
        { type: 'finish', finishReason: 'tool_calls', usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 } },
      ]);
    });

    it('relays a streamed tool call as it comes: its id and name, then each input_json_delta; a call without input gets {}', async () => {
      fake.reply = answer({
        text: [],
        stopReason: 'tool_use',
        toolUses: [
          { id: 'toolu_01', name: 'get_weather', input: { city: 'Paris' }, json: ['{"ci', 'ty": "Par', 'is"}'] },
          { id: 'toolu_02', name: 'get_time', input: {}, json: [''] },
        ],
      });
      expect(await collect({ tools: [weather, time] })).toEqual([
        { type: 'tool_call', fragment: { call: 0, id: 'toolu_01', name: 'get_weather', arguments: '' } },
        { type: 'tool_call', fragment: { call: 0, arguments: '{"ci' } },
        { type: 'tool_call', fragment: { call: 0, arguments: 'ty": "Par' } },
        { type: 'tool_call', fragment: { call: 0, arguments: 'is"}' } },
        { type: 'tool_call', fragment: { call: 1, id: 'toolu_02', name: 'get_time', arguments: '' } },
        { type: 'tool_call', fragment: { call: 1, arguments: '{}' } },
        { type: 'finish', finishReason: 'tool_calls', usage: { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15 } },
      ]);
    });

    it('gives a structured answer as the JSON text it is', async () => {
      fake.reply = answer({ text: ['{"a":', '"b"}'] });
      const events = await collect({ responseFormat: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object' } } } });
      expect(events.flatMap((e) => (e.type === 'content' ? [e.text] : [])).join('')).toBe('{"a":"b"}');
    });

    it.each<[string, Partial<GenerationRequest>]>([
      ['a temperature', { temperature: 0.7 }],
      ['a JSON-object answer (no such mode)', { responseFormat: { type: 'json_object' } }],
      ['n', { n: 2 }],
      ['log probabilities', { logprobs: { top: 2 } }],
      ['a seed', { seed: 7 }],
      ['top_p', { options: { top_p: 0.5 } }],
      ['a participant name', { messages: [{ role: 'user', content: 'Hi', name: 'ann' }] }],
      ['tool-call arguments that are not JSON', { messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"a":' } }] }] }],
      ['two different end-user ids', { options: { user: 'a', safety_identifier: 'b' } }],
      ['a json_schema without its schema', { responseFormat: { type: 'json_schema', json_schema: { name: 'x' } } }],
    ])('refuses %s itself, sending nothing', async (_, overrides) => {
      const error = await failure(overrides);
      expect(error).toBeInstanceOf(ProviderError);
      expect(error.kind).toBe('request');
      expect(fake.requests).toHaveLength(0);
    });
  });

  describe('HTTP errors', () => {
    it.each([
      [400, 'invalid_request_error', 'request', undefined, undefined],
      [401, 'authentication_error', 'deployment', undefined, undefined],
      [403, 'permission_error', 'deployment', undefined, undefined],
      [404, 'not_found_error', 'deployment', undefined, undefined],
      [413, 'request_too_large', 'request', undefined, undefined],
      [429, 'rate_limit_error', 'retryable', 7_000, '7'],
      [500, 'api_error', 'retryable', undefined, undefined],
      [529, 'overloaded_error', 'retryable', 3_000, '3'],
    ])('%i %s: %s, retryAfterMs %s, tried once; the provider text only in detail, our key nowhere', async (status, errorType, kind, retryAfterMs, retryAfter) => {
      const text = `${errorType} for org-upstream-123 with key ${KEY}`;
      fake.reply = { status, errorType, message: text, ...(retryAfter ? { headers: { 'retry-after': retryAfter } } : {}) };
      for (const stream of [true, false]) {
        fake.requests.length = 0;
        const error = await failure({ stream });
        expect(error).toBeInstanceOf(ProviderError);
        expect(error).toMatchObject({ kind, status, retryAfterMs });
        expect(fake.requests).toHaveLength(1);
        expect(error.message).not.toContain('org-upstream-123');
        expect(error.message).not.toContain(errorType);
        expect(error.detail).toContain('org-upstream-123');
        expect(`${error.message} ${error.detail}`).not.toContain(KEY.slice(7));
      }
    });

    it('is retryable when nothing listens at the base URL', async () => {
      const closed = createServer();
      await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
      const { port } = closed.address() as { port: number };
      await new Promise<void>((resolve) => closed.close(() => resolve()));
      const nowhere = new AnthropicChatProvider({ apiKey: KEY, baseUrl: `http://127.0.0.1:${port}`, model: 'claude-haiku-5-5', timeoutMs: 5_000 });
      expect(await failure({}, nowhere)).toMatchObject({ kind: 'retryable', message: 'Anthropic could not be reached.' });
    });
  });

  describe('answers that break off', () => {
    it.each([
      ['a stream cut mid-way', 'cut'],
      ['a stream with an event that is not JSON', 'garbled'],
      ['a stream that ends without message_stop', 'no_message_stop'],
      ['an overloaded_error event mid-stream', { errorEvent: 'overloaded_error' }],
    ] as const)('fails %s as retryable, after relaying the text that came', async (_, fault) => {
      fake.reply = answer({ fault });
      const events: GenerationEvent[] = [];
      const error = await (async () => {
        for await (const event of provider.generate(request, new AbortController().signal)) events.push(event);
      })().then(
        () => expect.unreachable('the stream succeeded'),
        (e: unknown) => e,
      );
      expect(events).toEqual([
        { type: 'content', text: 'Hel' },
        { type: 'content', text: 'lo' },
      ]);
      expect(error).toBeInstanceOf(ProviderError);
      expect(error).toMatchObject({ kind: 'retryable' });
    });

    it.each(['cut', 'garbled'] as const)('fails a whole answer that is %s as retryable', async (fault) => {
      fake.reply = answer({ fault });
      expect(await failure({ stream: false })).toMatchObject({ kind: 'retryable' });
    });
  });

  describe('time and cancellation', () => {
    const timeoutMs = 300;
    let impatient: AnthropicChatProvider;
    beforeAll(() => {
      impatient = new AnthropicChatProvider({ apiKey: KEY, baseUrl: fake.baseUrl, model: 'claude-haiku-5-5', timeoutMs });
    });

    it.each([
      ['no answer at all, streamed', { silence: true } as const, true],
      ['no answer at all, whole', { silence: true } as const, false],
      ['a stream that stops mid-way', answer({ fault: 'hang' }), true],
      ['a whole answer whose body never comes', answer({ fault: 'hang' }), false],
    ])('gives up on %s after about timeoutMs, as retryable, and hangs up', async (_, reply, stream) => {
      fake.reply = reply;
      const hungUp = fake.nextAbandon();
      const started = performance.now();
      const error = await failure({ stream }, impatient);
      const waited = performance.now() - started;
      expect(error).toMatchObject({ kind: 'retryable', message: 'Anthropic did not answer in time.' });
      expect(waited).toBeGreaterThanOrEqual(timeoutMs - 20);
      expect(waited).toBeLessThan(timeoutMs + 1_500);
      await hungUp;
    });

    it('relays each delta as it comes, and counts silence from the last one: a slow but steady stream is not cut', async () => {
      fake.reply = answer({ text: ['a', 'b', 'c', 'd'], gapMs: timeoutMs / 2 });
      const arrivals: Array<[GenerationEvent['type'], number]> = [];
      for await (const event of impatient.generate(request, new AbortController().signal)) arrivals.push([event.type, performance.now()]);
      expect(arrivals.map(([type]) => type)).toEqual(['content', 'content', 'content', 'content', 'finish']);
      const [first, last] = [arrivals[0]![1], arrivals[3]![1]];
      expect(last - first).toBeGreaterThan(timeoutMs);
    });

    it('stops the provider call and ends quietly when aborted mid-stream', async () => {
      fake.reply = answer({ fault: 'hang' });
      const abort = new AbortController();
      const hungUp = fake.nextAbandon();
      const events: GenerationEvent[] = [];
      for await (const event of provider.generate(request, abort.signal)) {
        events.push(event);
        abort.abort();
      }
      expect(events).toEqual([{ type: 'content', text: 'Hel' }]);
      await hungUp;
    });

    it('ends quietly when aborted before the answer starts', async () => {
      fake.reply = { silence: true };
      const abort = new AbortController();
      const hungUp = fake.nextAbandon();
      const events = collect({}, abort.signal);
      await expect.poll(() => fake.requests.length).toBe(1);
      abort.abort();
      expect(await events).toEqual([]);
      await hungUp;
    });
  });
});
