import { ProviderError } from '@oc/routing';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { OpenAiCompatibleProvider } from '../src/adapters/openai-compatible';
import type { GenerationEvent } from '../src/application/ports';
import { type FakeUpstream, type Step, startFakeUpstream } from './fake-upstream';

describe('OpenAI-compatible upstream', () => {
  let upstream: FakeUpstream;
  let provider: OpenAiCompatibleProvider;
  const request = {
    messages: [
      { role: 'system' as const, content: 'Be brief.' },
      { role: 'user' as const, content: 'Hi' },
    ],
    maxTokens: 50,
    temperature: 0.3,
    stop: ['END'],
    stream: true,
  };

  beforeAll(async () => {
    upstream = await startFakeUpstream();
    provider = new OpenAiCompatibleProvider({
      baseUrl: upstream.baseUrl,
      apiKey: 'sk-upstream',
      model: 'llama-3.1-8b',
      timeoutMs: 5_000,
    });
  });
  afterAll(() => upstream.close());
  beforeEach(() => {
    upstream.requests.length = 0;
    upstream.failWith = undefined;
  });

  const collect = async (signal = new AbortController().signal, stream = true) => {
    const events: GenerationEvent[] = [];
    for await (const event of provider.generate({ ...request, stream }, signal)) events.push(event);
    return events;
  };

  it('asks for a stream with usage, under the mapped model, and relays content, finish and usage', async () => {
    upstream.script = [
      { content: 'Hello' },
      { content: ' world' },
      { finish: 'length' },
      { usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } },
    ];
    expect(await collect()).toEqual([
      { type: 'content', index: 0, text: 'Hello' },
      { type: 'content', index: 0, text: ' world' },
      { type: 'finish', index: 0, finishReason: 'length', usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } },
    ]);
    expect(upstream.requests).toEqual([
      {
        model: 'llama-3.1-8b',
        messages: request.messages,
        max_tokens: 50,
        temperature: 0.3,
        stop: ['END'],
        stream: true,
        stream_options: { include_usage: true },
      },
    ]);
    expect(upstream.authorizations).toContain('Bearer sk-upstream');
  });

  it('asks for the whole answer in one body when the caller does not relay it as it comes', async () => {
    upstream.script = [{ content: 'Hello' }, { content: ' world' }, { finish: 'stop' }, { usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } }];
    expect(await collect(undefined, false)).toEqual([
      { type: 'content', index: 0, text: 'Hello world' },
      { type: 'finish', index: 0, finishReason: 'stop', usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } },
    ]);
    expect(upstream.requests).toEqual([
      { model: 'llama-3.1-8b', messages: request.messages, max_tokens: 50, temperature: 0.3, stop: ['END'] },
    ]);
  });

  describe('the rest of the Chat Completions contract', () => {
    const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: true } }];
    const agentRequest = {
      ...request,
      messages: [
        { role: 'developer' as const, content: 'Use tools.' },
        { role: 'user' as const, content: [{ type: 'text' as const, text: 'Weather?' }, { type: 'image_url' as const, image_url: { url: 'https://example.com/a.png', detail: 'low' as const } }] },
        { role: 'assistant' as const, content: null, tool_calls: [{ id: 'call_1', type: 'function' as const, function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool' as const, tool_call_id: 'call_1', content: '{"temp":21}' },
      ],
      n: 2,
      tools,
      toolChoice: 'auto' as const,
      parallelToolCalls: false,
      responseFormat: { type: 'json_object' as const },
      logprobs: { top: 2 },
      seed: 7,
      options: { top_p: 0.9, frequency_penalty: 0.5, presence_penalty: -0.5, logit_bias: { '50256': -100 }, user: 'u1', safety_identifier: 's1', prompt_cache_key: 'k', prompt_cache_retention: '24h' as const, reasoning_effort: 'low' as const, verbosity: 'low' as const },
    };
    const logprob = { token: 'Hi', logprob: -0.1, bytes: [72, 105], top_logprobs: [{ token: 'Hi', logprob: -0.1, bytes: [72, 105] }] };
    const calls: Step[] = [
      { toolCall: { call: 0, id: 'call_9', name: 'get_weather', arguments: '' } },
      { toolCall: { call: 0, arguments: '{"city":' } },
      { toolCall: { call: 0, arguments: '"Oslo"}' } },
      { finish: 'tool_calls' },
      { content: 'Hi', index: 1, logprobs: [logprob] },
      { finish: 'content_filter', index: 1 },
      { usage: { prompt_tokens: 40, completion_tokens: 9, total_tokens: 49 } },
    ];

    it('passes every honoured field through as OpenAI names it (developer as system for a server without that role)', async () => {
      upstream.script = calls;
      for await (const _ of provider.generate({ ...agentRequest, stream: false }, new AbortController().signal));
      const { messages, ...rest } = upstream.requests.at(-1);
      expect(messages[0]).toEqual({ role: 'system', content: 'Use tools.' });
      expect(messages.slice(1)).toEqual(agentRequest.messages.slice(1));
      expect(rest).toEqual({
        model: 'llama-3.1-8b',
        max_tokens: 50,
        temperature: 0.3,
        stop: ['END'],
        n: 2,
        tools,
        tool_choice: 'auto',
        parallel_tool_calls: false,
        response_format: { type: 'json_object' },
        logprobs: true,
        top_logprobs: 2,
        seed: 7,
        ...agentRequest.options,
      });
    });

    it('sends developer messages as they are to a server that knows the role (OpenAI)', async () => {
      const openai = new OpenAiCompatibleProvider({ baseUrl: upstream.baseUrl, model: 'gpt', timeoutMs: 5_000, developerRole: true });
      upstream.script = [{ content: 'ok' }, { finish: 'stop' }];
      for await (const _ of openai.generate({ ...request, messages: agentRequest.messages.slice(0, 2), stream: false }, new AbortController().signal));
      expect(upstream.requests.at(-1).messages[0]).toEqual({ role: 'developer', content: 'Use tools.' });
    });

    it.each([true, false])('translates tool calls, log probabilities and finish reasons back, for each choice (stream: %s)', async (stream) => {
      upstream.script = calls;
      const events: GenerationEvent[] = [];
      for await (const event of provider.generate({ ...agentRequest, stream }, new AbortController().signal)) events.push(event);
      const toolEvents = events.filter((e) => e.type === 'tool_call');
      const args = toolEvents.map((e) => (e.type === 'tool_call' ? e.fragment.arguments : '')).join('');
      expect(args).toBe('{"city":"Oslo"}');
      expect(toolEvents[0]).toMatchObject({ index: 0, fragment: { call: 0, id: 'call_9', name: 'get_weather' } });
      expect(events.filter((e) => e.type === 'content')).toEqual([{ type: 'content', index: 1, text: 'Hi', logprobs: [logprob] }]);
      expect(events.filter((e) => e.type === 'finish')).toEqual([
        { type: 'finish', index: 0, finishReason: 'tool_calls' },
        { type: 'finish', index: 1, finishReason: 'content_filter', usage: { prompt_tokens: 40, completion_tokens: 9, total_tokens: 49 } },
      ]);
    });
  });

  it('relays each chunk as it arrives, before the upstream has finished', async () => {
    let release!: () => void;
    upstream.script = [{ content: 'first' }, { gate: new Promise<void>((r) => (release = r)) }, { content: ' second' }, { finish: 'stop' }];
    const iterator = provider.generate(request, new AbortController().signal)[Symbol.asyncIterator]();
    expect((await iterator.next()).value).toEqual({ type: 'content', index: 0, text: 'first' });
    release();
    expect((await iterator.next()).value).toEqual({ type: 'content', index: 0, text: ' second' });
    expect((await iterator.next()).value).toEqual({ type: 'finish', index: 0, finishReason: 'stop' });
    expect((await iterator.next()).done).toBe(true);
  });

  it('stops the upstream call when aborted, without an error', async () => {
    const abandonedBefore = upstream.abandoned;
    upstream.script = [{ content: 'first' }, { gate: new Promise<void>(() => {}) }];
    const abort = new AbortController();
    const events: GenerationEvent[] = [];
    for await (const event of provider.generate(request, abort.signal)) {
      events.push(event);
      abort.abort();
    }
    expect(events).toEqual([{ type: 'content', index: 0, text: 'first' }]);
    await vi.waitFor(() => expect(upstream.abandoned).toBe(abandonedBefore + 1));
  });

  it.each([
    ['an error status', () => (upstream.failWith = 500), /^The OpenAI-compatible upstream answered 500\.$/],
    ['an error event mid-stream', () => (upstream.script = [{ content: 'Hel' }, { error: 'model overloaded' }]), /failed while answering\.$/],
    ['a dropped connection mid-stream', () => (upstream.script = [{ content: 'Hel' }, { drop: true }]), /could not be reached|malformed/],
  ])('turns %s into a retryable failure, for the router to fail over', async (_, arrange, message) => {
    for (const stream of [true, false]) {
      arrange();
      const failure = await collect(undefined, stream).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(ProviderError);
      expect(failure).toMatchObject({ kind: 'retryable', message: expect.stringMatching(message) });
    }
  });

  it.each([
    [400, 'request'],
    [401, 'deployment'],
    [404, 'deployment'],
    [429, 'retryable'],
    [503, 'retryable'],
  ] as const)('classifies an answer of %i as a %s failure', async (status, kind) => {
    upstream.failWith = status;
    const failure = await collect(undefined, false).catch((error: unknown) => error);
    expect(failure).toMatchObject({ kind, status });
  });

  it("keeps what the upstream said for the operator's log, out of the message (it may name our upstream account)", async () => {
    upstream.script = [{ content: 'Hel' }, { error: 'quota of org-upstream-123 exceeded' }];
    const failure = (await collect().catch((error: unknown) => error)) as ProviderError;
    expect(failure.message).not.toContain('org-upstream-123');
    expect(failure.detail).toContain('quota of org-upstream-123 exceeded');
  });

  it('gives up on a silent upstream after its timeout', async () => {
    const slow = new OpenAiCompatibleProvider({ baseUrl: upstream.baseUrl, model: 'm', timeoutMs: 100 });
    upstream.script = [{ gate: new Promise<void>(() => {}) }];
    const failure = await (async () => {
      for await (const _ of slow.generate(request, new AbortController().signal));
    })().catch((error: unknown) => error);
    expect(failure).toMatchObject({ kind: 'retryable', message: 'The OpenAI-compatible upstream did not answer in time.' });
  });
});
