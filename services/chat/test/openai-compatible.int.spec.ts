import { ProviderError } from '@oc/routing';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { OpenAiCompatibleProvider } from '../src/adapters/openai-compatible';
import type { GenerationEvent } from '../src/application/ports';
import { type FakeUpstream, startFakeUpstream } from './fake-upstream';

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
      { type: 'content', text: 'Hello' },
      { type: 'content', text: ' world' },
      { type: 'finish', finishReason: 'length', usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } },
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
      { type: 'content', text: 'Hello world' },
      { type: 'finish', finishReason: 'stop', usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } },
    ]);
    expect(upstream.requests).toEqual([
      { model: 'llama-3.1-8b', messages: request.messages, max_tokens: 50, temperature: 0.3, stop: ['END'] },
    ]);
  });

  it('relays each chunk as it arrives, before the upstream has finished', async () => {
    let release!: () => void;
    upstream.script = [{ content: 'first' }, { gate: new Promise<void>((r) => (release = r)) }, { content: ' second' }, { finish: 'stop' }];
    const iterator = provider.generate(request, new AbortController().signal)[Symbol.asyncIterator]();
    expect((await iterator.next()).value).toEqual({ type: 'content', text: 'first' });
    release();
    expect((await iterator.next()).value).toEqual({ type: 'content', text: ' second' });
    expect((await iterator.next()).value).toEqual({ type: 'finish', finishReason: 'stop' });
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
    expect(events).toEqual([{ type: 'content', text: 'first' }]);
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
