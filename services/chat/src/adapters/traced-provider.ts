import { failSpan, instruments, startSpan } from '@oc/telemetry';
import type { ChatProvider, GenerationEvent, GenerationRequest, Tokenizer } from '../application/ports';

export interface TracedProviderOptions {
  /** `gen_ai.provider.name`: `openai` for an OpenAI-compatible endpoint, `oc.simulator` for ours. */
  provider: string;
  /** The model the upstream is asked for. */
  model: string;
  /** Counts the reply when the upstream reports no usage (the simulator), as the chat service does for billing. */
  tokenizer: Pick<Tokenizer, 'count'>;
}

/** OpenTelemetry's GenAI client metrics (gen_ai.client.*), one series per provider and upstream model. */
const metrics = instruments((meter) => ({
  tokens: meter.createHistogram('gen_ai.client.token.usage', {
    description: 'Tokens of each upstream call, by type (input, output).',
    unit: '{token}',
    advice: { explicitBucketBoundaries: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576] },
  }),
  duration: meter.createHistogram('gen_ai.client.operation.duration', {
    description: 'Each upstream call, from its request to its last event.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92] },
  }),
  firstChunk: meter.createHistogram('gen_ai.client.operation.time_to_first_chunk', {
    description: 'Each streamed upstream call, from its request to its first text.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24] },
  }),
}));

/**
 * Each upstream call as a GenAI client span (`chat <model>`): operation, provider, model, request settings, finish
 * reason and token usage, from OpenTelemetry's GenAI conventions. Wrapped around the provider only when
 * telemetry is on.
 */
export function traceChatProvider(inner: ChatProvider, options: TracedProviderOptions): ChatProvider {
  return {
    async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
      const span = startSpan(`chat ${options.model}`, {
        kind: 'client',
        attributes: {
          'gen_ai.operation.name': 'chat',
          'gen_ai.provider.name': options.provider,
          'gen_ai.request.model': options.model,
          'gen_ai.request.max_tokens': request.maxTokens,
          ...(request.temperature !== undefined ? { 'gen_ai.request.temperature': request.temperature } : {}),
          ...(request.stop.length > 0 ? { 'gen_ai.request.stop_sequences': request.stop } : {}),
          'oc.stream': request.stream,
        },
      });
      let text = '';
      let finished = false;
      const labels = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': options.provider, 'gen_ai.request.model': options.model };
      const started = performance.now();
      let failure: string | undefined;
      try {
        for await (const event of inner.generate(request, signal)) {
          if (event.type === 'content') {
            if (text === '' && request.stream) metrics().firstChunk.record((performance.now() - started) / 1000, labels);
            text += event.text;
          } else if (event.type === 'finish') {
            finished = true;
            const input = event.usage?.prompt_tokens ?? request.promptTokens ?? 0;
            const output = event.usage?.completion_tokens ?? options.tokenizer.count(text);
            span?.setAttribute('gen_ai.response.finish_reasons', [event.finishReason]);
            span?.setAttribute('gen_ai.usage.input_tokens', input);
            span?.setAttribute('gen_ai.usage.output_tokens', output);
            metrics().tokens.record(input, { ...labels, 'gen_ai.token.type': 'input' });
            metrics().tokens.record(output, { ...labels, 'gen_ai.token.type': 'output' });
          }
          yield event;
        }
        if (!finished) span?.setAttribute('oc.cancelled', signal.aborted);
      } catch (error) {
        failure = error instanceof Error ? error.name : 'error';
        if (span) failSpan(span, error);
        throw error;
      } finally {
        metrics().duration.record((performance.now() - started) / 1000, failure ? { ...labels, 'error.type': failure } : labels);
        span?.end();
      }
    },
    ...(inner.close ? { close: () => inner.close!() } : {}),
  };
}
