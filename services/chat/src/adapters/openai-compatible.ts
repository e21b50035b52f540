import { ApiError, type FinishReason, type Usage } from '@oc/contracts';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../application/ports';

export interface OpenAiCompatibleOptions {
  /** e.g. `https://api.openai.com/v1`, `http://localhost:8000/v1` (vLLM), `http://localhost:11434/v1` (Ollama). */
  baseUrl: string;
  apiKey?: string | undefined;
  /** The upstream model `chat-2` maps to. */
  model: string;
  /** Longest wait for the upstream's answer or its next chunk. */
  timeoutMs: number;
}

interface UpstreamChunk {
  choices?: Array<{ delta?: { content?: string | null }; finish_reason?: string | null }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number } | null;
  error?: { message?: string };
}

const upstreamFailed = (message: string) =>
  new ApiError({ status: 503, type: 'service_unavailable_error', code: 'upstream_error', message, retryAfter: 1 });

/**
 * Any OpenAI-compatible Chat Completions endpoint. Always asks for a stream (with usage, through
 * `stream_options.include_usage`) and relays it chunk by chunk, so both of our modes share one path.
 */
export class OpenAiCompatibleProvider implements ChatProvider {
  constructor(private readonly options: OpenAiCompatibleOptions) {}

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    const idle = new AbortController();
    let timer = setTimeout(() => idle.abort(), this.options.timeoutMs);
    const refresh = () => {
      clearTimeout(timer);
      timer = setTimeout(() => idle.abort(), this.options.timeoutMs);
    };
    const combined = AbortSignal.any([signal, idle.signal]);
    try {
      const response = await fetch(`${this.options.baseUrl.replace(/\/+$/, '')}/chat/completions`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'text/event-stream',
          ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
        },
        body: JSON.stringify({
          model: this.options.model,
          messages: request.messages,
          max_tokens: request.maxTokens,
          temperature: request.temperature,
          ...(request.stop.length > 0 ? { stop: request.stop } : {}),
          stream: true,
          stream_options: { include_usage: true },
        }),
        signal: combined,
      });
      if (!response.ok || !response.body) {
        const text = await response.text().catch(() => '');
        throw upstreamFailed(`The upstream model answered ${response.status}: ${text.slice(0, 200)}`);
      }
      let finishReason: FinishReason = 'stop';
      let usage: Usage | undefined;
      const events = response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
      for await (const event of events) {
        refresh();
        if (event.data === '[DONE]') break;
        const chunk = JSON.parse(event.data) as UpstreamChunk;
        if (chunk.error) throw upstreamFailed(`The upstream model failed: ${chunk.error.message ?? 'unknown error'}`);
        const choice = chunk.choices?.[0];
        if (choice?.delta?.content) yield { type: 'content', text: choice.delta.content };
        if (choice?.finish_reason) finishReason = choice.finish_reason === 'length' ? 'length' : 'stop';
        if (chunk.usage) usage = toUsage(chunk.usage);
      }
      if (signal.aborted) return;
      yield { type: 'finish', finishReason, ...(usage ? { usage } : {}) };
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError) throw error;
      throw upstreamFailed(
        idle.signal.aborted ? `The upstream model did not answer within ${this.options.timeoutMs} ms.` : 'The upstream model could not be reached.',
      );
    } finally {
      clearTimeout(timer);
    }
  }
}

function toUsage(u: NonNullable<UpstreamChunk['usage']>): Usage {
  const prompt_tokens = u.prompt_tokens ?? 0;
  const completion_tokens = u.completion_tokens ?? 0;
  return { prompt_tokens, completion_tokens, total_tokens: u.total_tokens ?? prompt_tokens + completion_tokens };
}
