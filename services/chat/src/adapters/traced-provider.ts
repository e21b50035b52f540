import type { FinishReason } from '@oc/contracts';
import { ProviderError } from '@oc/routing';
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

/**
 * OpenTelemetry's GenAI client metrics (gen_ai.client.*), one series per provider and upstream model, with the
 * names, units and bucket boundaries of the semantic conventions (docs/gen-ai/gen-ai-metrics.md, 1.41). The time
 * per output chunk is left out: recorded for every chunk, it would cost the most of all on the stream's path.
 */
const metrics = instruments((meter) => ({
  tokens: meter.createHistogram('gen_ai.client.token.usage', {
    description: 'Number of input and output tokens used.',
    unit: '{token}',
    advice: { explicitBucketBoundaries: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864] },
  }),
  duration: meter.createHistogram('gen_ai.client.operation.duration', {
    description: 'GenAI operation duration.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92] },
  }),
  firstChunk: meter.createHistogram('gen_ai.client.operation.time_to_first_chunk', {
    description:
      'Time to receive the first chunk, measured from when the client issues the generation request to when the first chunk is received in the response stream.',
    unit: 's',
    advice: { explicitBucketBoundaries: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92] },
  }),
}));

/**
 * `error.type` of a failed upstream call: the provider's HTTP status when it answered one, `cancelled` when we
 * stopped it (the customer went away, a deadline), `incomplete` when its answer ended without its last event, the
 * error's class name otherwise.
 */
function errorType(error: unknown, signal: AbortSignal): string {
  if (signal.aborted) return 'cancelled';
  if (error instanceof ProviderError && error.status !== undefined) return String(error.status);
  return error instanceof Error ? error.name : '_OTHER';
}

/** The attribute sets of one provider and model, made once: recording then allocates nothing of its own. */
function labelsFor(provider: string, model: string) {
  const base = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': provider, 'gen_ai.request.model': model };
  const failed = new Map<string, typeof base & { 'error.type': string }>();
  return {
    base,
    input: { ...base, 'gen_ai.token.type': 'input' },
    output: { ...base, 'gen_ai.token.type': 'output' },
    failed(type: string) {
      let found = failed.get(type);
      if (!found) failed.set(type, (found = { ...base, 'error.type': type }));
      return found;
    },
  };
}

/**
 * Each upstream call as a GenAI client span (`chat <model>`): operation, provider, model, request settings, finish
 * reason and token usage, from OpenTelemetry's GenAI conventions; and in the GenAI client metrics. Wrapped around
 * the provider only when telemetry is on.
 */
export function traceChatProvider(inner: ChatProvider, options: TracedProviderOptions): ChatProvider {
  const labels = labelsFor(options.provider, options.model);
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
      const choices = request.n ?? 1;
      let finishes = 0;
      const finishReasons: FinishReason[] = [];
      const started = performance.now();
      let failure: string | undefined;
      try {
        for await (const event of inner.generate(request, signal)) {
          if (event.type === 'content') {
            if (text === '' && request.stream) metrics().firstChunk.record((performance.now() - started) / 1000, labels.base);
            text += event.text;
          } else if (event.type === 'finish') {
            finishReasons.push(event.finishReason);
            // The whole call's usage comes on its last finish; without it, the prompt as counted and the text generated.
            if (++finishes === choices) {
              const input = event.usage?.prompt_tokens ?? request.promptTokens ?? 0;
              const output = event.usage?.completion_tokens ?? options.tokenizer.count(text);
              span?.setAttribute('gen_ai.response.finish_reasons', finishReasons);
              span?.setAttribute('gen_ai.usage.input_tokens', input);
              span?.setAttribute('gen_ai.usage.output_tokens', output);
              metrics().tokens.record(input, labels.input);
              metrics().tokens.record(output, labels.output);
            }
          }
          yield event;
        }
        if (finishes < choices) {
          span?.setAttribute('oc.cancelled', signal.aborted);
          failure = signal.aborted ? 'cancelled' : 'incomplete';
        }
      } catch (error) {
        failure = errorType(error, signal);
        if (span) failSpan(span, error);
        throw error;
      } finally {
        // A caller that stops iterating before the last finish ends the call here, having given it up.
        if (failure === undefined && finishes < choices) failure = 'cancelled';
        metrics().duration.record((performance.now() - started) / 1000, failure === undefined ? labels.base : labels.failed(failure));
        span?.end();
      }
    },
    ...(inner.close ? { close: () => inner.close!() } : {}),
  };
}
