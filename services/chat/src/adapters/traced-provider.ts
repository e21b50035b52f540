import { failSpan, startSpan } from '@oc/telemetry';
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
      try {
        for await (const event of inner.generate(request, signal)) {
          if (event.type === 'content') text += event.text;
          else if (event.type === 'finish') {
            finished = true;
            span?.setAttribute('gen_ai.response.finish_reasons', [event.finishReason]);
            span?.setAttribute('gen_ai.usage.input_tokens', event.usage?.prompt_tokens ?? request.promptTokens ?? 0);
            span?.setAttribute('gen_ai.usage.output_tokens', event.usage?.completion_tokens ?? options.tokenizer.count(text));
          }
          yield event;
        }
        if (!finished) span?.setAttribute('oc.cancelled', signal.aborted);
      } catch (error) {
        if (span) failSpan(span, error);
        throw error;
      } finally {
        span?.end();
      }
    },
    ...(inner.close ? { close: () => inner.close!() } : {}),
  };
}
