import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { registerTestTracing } from '@oc/telemetry/testing';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { OpenAiCompatibleProvider } from '../src/adapters/openai-compatible';
import { SimulatorProvider } from '../src/adapters/simulator';
import { gptTokenizer } from '../src/adapters/tokenizer';
import { traceChatProvider } from '../src/adapters/traced-provider';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../src/application/ports';
import { type FakeUpstream, startFakeUpstream } from './fake-upstream';

const request: GenerationRequest = {
  messages: [{ role: 'user', content: 'How do rivers shape valleys over time?' }],
  maxTokens: 50,
  temperature: 0.3,
  stop: ['END'],
  stream: true,
  promptTokens: 9,
};

const run = async (provider: ChatProvider) => {
  const events: GenerationEvent[] = [];
  for await (const event of provider.generate(request, new AbortController().signal)) events.push(event);
  return events.flatMap((e) => (e.type === 'content' ? [e.text] : [])).join('');
};

/** Each upstream model call as OpenTelemetry's GenAI conventions describe a chat call. */
describe('the upstream call span', () => {
  let tracing: ReturnType<typeof registerTestTracing>;
  let upstream: FakeUpstream;
  beforeAll(async () => {
    upstream = await startFakeUpstream();
  });
  afterAll(() => upstream.close());
  beforeEach(() => {
    tracing = registerTestTracing();
    upstream.failWith = undefined;
  });
  afterEach(() => tracing.shutdown());

  const openai = () =>
    traceChatProvider(
      new OpenAiCompatibleProvider({ baseUrl: upstream.baseUrl, apiKey: 'sk-upstream', model: 'llama-3.1-8b', timeoutMs: 5_000 }),
      { provider: 'openai', model: 'llama-3.1-8b', tokenizer: gptTokenizer },
    );

  it("names the operation, the provider, the model and the request's settings, with the usage the upstream reports", async () => {
    upstream.script = [
      { content: 'Hello' },
      { content: ' world' },
      { finish: 'length' },
      { usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } },
    ];
    expect(await run(openai())).toBe('Hello world');

    const [span, ...others] = tracing.spans();
    expect(others).toEqual([]);
    expect(span!.name).toBe('chat llama-3.1-8b');
    expect(span!.kind).toBe(SpanKind.CLIENT);
    expect(span!.attributes).toEqual({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'llama-3.1-8b',
      'gen_ai.request.max_tokens': 50,
      'gen_ai.request.temperature': 0.3,
      'gen_ai.request.stop_sequences': ['END'],
      'oc.stream': true,
      'gen_ai.response.finish_reasons': ['length'],
      'gen_ai.usage.input_tokens': 12,
      'gen_ai.usage.output_tokens': 2,
    });
  });

  it('counts the tokens itself when the model reports no usage (the simulator)', async () => {
    const simulator = traceChatProvider(new SimulatorProvider({ tokenizer: gptTokenizer, wordDelayMs: 0 }), {
      provider: 'oc.simulator',
      model: 'chat-2',
      tokenizer: gptTokenizer,
    });
    const reply = await run(simulator);

    const span = tracing.spans().find((s) => s.name === 'chat chat-2')!;
    expect(span.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.provider.name': 'oc.simulator',
      'gen_ai.request.model': 'chat-2',
      'gen_ai.usage.input_tokens': request.promptTokens,
      'gen_ai.usage.output_tokens': gptTokenizer.count(reply),
    });
  });

  it('marks the span failed when the upstream fails', async () => {
    upstream.failWith = 500;
    await expect(run(openai())).rejects.toThrow();

    const span = tracing.spans().find((s) => s.name === 'chat llama-3.1-8b')!;
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
    expect(span.attributes).not.toHaveProperty('gen_ai.usage.output_tokens');
  });
});
