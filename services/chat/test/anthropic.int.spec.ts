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

    it('refuses a temperature itself, sending nothing', async () => {
      const error = await failure({ temperature: 0.7 });
      expect(error).toBeInstanceOf(ProviderError);
      expect(error.kind).toBe('request');
      expect(fake.requests).toHaveLength(0);
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

    it('turns a refusal into a request-kind error (no failover), streamed or whole', async () => {
      fake.reply = answer({ stopReason: 'refusal', stopDetails: { type: 'refusal', category: 'cyber', explanation: 'Declined: could enable cyber harm.' } });
      for (const stream of [true, false]) {
        const error = await failure({ stream });
        expect(error).toMatchObject({ kind: 'request', status: undefined });
        expect(error.message).not.toContain('cyber');
        expect(error.detail).toContain('cyber');
      }
    });

    it('treats a turn paused for tools (never asked for) as unfinished: retryable', async () => {
      fake.reply = answer({ stopReason: 'pause_turn' });
      for (const stream of [true, false]) expect(await failure({ stream })).toMatchObject({ kind: 'retryable' });
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
