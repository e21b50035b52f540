import type { ChatMessage, FinishReason, TokenLogprob, Usage } from '@oc/contracts';
import { ProviderError, providerHttpError, providerUnreachable, retryAfterMs } from '@oc/routing';
import { createParser } from 'eventsource-parser';
import { Agent, errors, request as undiciRequest } from 'undici';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../application/ports';

export interface OpenAiCompatibleOptions {
  /** e.g. `https://api.openai.com/v1`, `http://localhost:8000/v1` (vLLM), `http://localhost:11434/v1` (Ollama). */
  baseUrl: string;
  apiKey?: string | undefined;
  /** The upstream model `chat-2` maps to. */
  model: string;
  /** Longest wait for the upstream's answer or its next chunk. */
  timeoutMs: number;
  /**
   * OpenAI's reasoning models refuse `max_tokens` and take `max_completion_tokens`; many compatible servers
   * (Ollama, older vLLM) know only `max_tokens`.
   */
  maxTokensField?: 'max_tokens' | 'max_completion_tokens';
  /** Whether the server knows OpenAI's `developer` role (OpenAI's own endpoint); otherwise it is sent as `system`. */
  developerRole?: boolean;
}


type UpstreamUsage = { prompt_tokens?: number; completion_tokens?: number; total_tokens?: number };
type UpstreamLogprobs = { content?: TokenLogprob[] | null } | null;
type UpstreamToolCall = { index?: number; id?: string; function?: { name?: string; arguments?: string } };

interface UpstreamChunk {
  choices?: Array<{
    index?: number;
    delta?: { content?: string | null; tool_calls?: UpstreamToolCall[] | null };
    logprobs?: UpstreamLogprobs;
    finish_reason?: string | null;
  }>;
  usage?: UpstreamUsage | null;
  error?: { message?: string };
}

interface UpstreamCompletion {
  choices?: Array<{
    index?: number;
    message?: { content?: string | null; tool_calls?: UpstreamToolCall[] | null };
    logprobs?: UpstreamLogprobs;
    finish_reason?: string | null;
  }>;
  usage?: UpstreamUsage | null;
  error?: { message?: string };
}

/**
 * Any OpenAI-compatible Chat Completions endpoint. A caller that relays the text as it comes gets an event
 * stream (with usage, through `stream_options.include_usage`) relayed chunk by chunk; one that needs only the
 * whole answer gets it in one JSON body, which costs a fraction of parsing a stream. undici's `request` on a keep-alive pool rather than `fetch`: no WHATWG streams on the hot path, and
 * the idle timeouts (until the headers, then between body chunks) are the client's own.
 */
export class OpenAiCompatibleProvider implements ChatProvider {
  private readonly url: string;
  private readonly pool = new Agent({ keepAliveTimeout: 30_000 });
  /** Built once per kind of answer: the same headers go with every call. */
  readonly #headers: Partial<Record<'stream' | 'whole', Record<string, string>>> = {};

  constructor(private readonly options: OpenAiCompatibleOptions) {
    this.url = `${options.baseUrl.replace(/\/+$/, '')}/chat/completions`;
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    try {
      const response = await undiciRequest(this.url, {
        method: 'POST',
        dispatcher: this.pool,
        headers: this.headers(request.stream),
        body: JSON.stringify(this.body(request)),
        signal,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
      });
      if (response.statusCode >= 300) {
        const text = await response.body.text().catch(() => '');
        const header = (name: string) => {
          const value = response.headers[name];
          return Array.isArray(value) ? value[0] : value;
        };
        throw providerHttpError('The OpenAI-compatible upstream', response.statusCode, text, retryAfterMs(header, Date.now()));
      }
      if (request.stream) yield* this.relay(response.body, signal, request.n ?? 1);
      else yield* this.whole((await response.body.json()) as UpstreamCompletion, request.n ?? 1);
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ProviderError) throw error;
      if (error instanceof SyntaxError) throw malformed(error.message);
      throw providerUnreachable('The OpenAI-compatible upstream', error, error instanceof errors.HeadersTimeoutError || error instanceof errors.BodyTimeoutError);
    }
  }

  /** The request in OpenAI's own terms: every field the customer set goes as it came. */
  private body(request: GenerationRequest): Record<string, unknown> {
    const developer = this.options.developerRole === true;
    return {
      model: this.options.model,
      messages: developer ? request.messages : request.messages.map(asSystem),
      [this.options.maxTokensField ?? 'max_tokens']: request.maxTokens,
      ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
      ...(request.stop.length > 0 ? { stop: request.stop } : {}),
      ...((request.n ?? 1) > 1 ? { n: request.n } : {}),
      ...(request.tools !== undefined ? { tools: request.tools } : {}),
      ...(request.toolChoice !== undefined ? { tool_choice: request.toolChoice } : {}),
      ...(request.parallelToolCalls !== undefined ? { parallel_tool_calls: request.parallelToolCalls } : {}),
      ...(request.responseFormat !== undefined ? { response_format: request.responseFormat } : {}),
      ...(request.logprobs !== undefined ? { logprobs: true, top_logprobs: request.logprobs.top } : {}),
      ...(request.seed !== undefined ? { seed: request.seed } : {}),
      ...request.options,
      ...(request.stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    };
  }

  private headers(stream: boolean): Record<string, string> {
    const key = stream ? 'stream' : 'whole';
    return (this.#headers[key] ??= {
      'content-type': 'application/json',
      accept: stream ? 'text/event-stream' : 'application/json',
      ...(this.options.apiKey ? { authorization: `Bearer ${this.options.apiKey}` } : {}),
    });
  }

  /** An event stream, chunk by chunk: each choice's text, tool-call fragments and log probabilities as they come. */
  private async *relay(body: AsyncIterable<unknown>, signal: AbortSignal, choices: number): AsyncIterable<GenerationEvent> {
    const finishes = new Map<number, FinishReason>();
    let usage: Usage | undefined;
    const data: string[] = [];
    const parser = createParser({ onEvent: (event) => void data.push(event.data) });
    const decoder = new TextDecoder();
    let done = false;
    // Read to the end even after [DONE]: a body left unread would cost the pooled connection.
    for await (const bytes of body) {
      if (done) continue;
      parser.feed(decoder.decode(bytes as Buffer, { stream: true }));
      for (const payload of data.splice(0)) {
        if (done || (done = payload === '[DONE]')) continue;
        const chunk = JSON.parse(payload) as UpstreamChunk;
        if (chunk.error) this.failedWhileAnswering(chunk.error);
        for (const choice of chunk.choices ?? []) {
          const index = choice.index ?? 0;
          const logprobs = choice.logprobs?.content ?? undefined;
          if (choice.delta?.content) yield { type: 'content', index, text: choice.delta.content, ...(logprobs ? { logprobs } : {}) };
          for (const call of choice.delta?.tool_calls ?? []) yield toolCall(index, call);
          if (choice.finish_reason) finishes.set(index, finishReasonOf(choice.finish_reason));
        }
        if (chunk.usage) usage = toUsage(chunk.usage);
      }
    }
    if (signal.aborted) return;
    // A stream cut before its end is not a whole answer, whatever came before.
    if (!done) throw malformed('the event stream ended before [DONE]');
    yield* finished(choices, (i) => finishes.get(i) ?? 'stop', usage);
  }

  /** One answer, when the caller needs only the whole text: no event stream to parse chunk by chunk. */
  private *whole(answer: UpstreamCompletion, choices: number): Iterable<GenerationEvent> {
    if (answer.error) this.failedWhileAnswering(answer.error);
    const finishes = new Map<number, FinishReason>();
    for (const choice of answer.choices ?? []) {
      const index = choice.index ?? 0;
      const logprobs = choice.logprobs?.content ?? undefined;
      if (choice.message?.content) yield { type: 'content', index, text: choice.message.content, ...(logprobs ? { logprobs } : {}) };
      for (const [call, toolCallAt] of (choice.message?.tool_calls ?? []).entries()) yield toolCall(index, { ...toolCallAt, index: call });
      finishes.set(index, finishReasonOf(choice.finish_reason));
    }
    yield* finished(choices, (i) => finishes.get(i) ?? 'stop', answer.usage ? toUsage(answer.usage) : undefined);
  }

  private failedWhileAnswering(error: { message?: string }): never {
    throw new ProviderError({
      kind: 'retryable',
      message: 'The OpenAI-compatible upstream failed while answering.',
      detail: `The OpenAI-compatible upstream failed while answering: ${String(error.message).slice(0, 500)}`,
    });
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

const malformed = (detail: string) =>
  new ProviderError({ kind: 'retryable', message: 'The OpenAI-compatible upstream sent a malformed answer.', detail: `malformed answer: ${detail.slice(0, 500)}` });

function toUsage(u: UpstreamUsage): Usage {
  const prompt_tokens = u.prompt_tokens ?? 0;
  const completion_tokens = u.completion_tokens ?? 0;
  return { prompt_tokens, completion_tokens, total_tokens: u.total_tokens ?? prompt_tokens + completion_tokens };
}

/** Each choice's end, in order, the call's usage on the last. */
function* finished(choices: number, reason: (index: number) => FinishReason, usage: Usage | undefined): Iterable<GenerationEvent> {
  for (let index = 0; index < choices; index++) {
    yield { type: 'finish', index, finishReason: reason(index), ...(usage && index === choices - 1 ? { usage } : {}) };
  }
}

const FINISH_REASONS: Record<string, FinishReason> = { stop: 'stop', length: 'length', tool_calls: 'tool_calls', content_filter: 'content_filter', function_call: 'tool_calls' };
const finishReasonOf = (reason: string | null | undefined): FinishReason => FINISH_REASONS[reason ?? ''] ?? 'stop';

function toolCall(index: number, call: UpstreamToolCall): GenerationEvent {
  return {
    type: 'tool_call',
    index,
    fragment: {
      call: call.index ?? 0,
      ...(call.id ? { id: call.id } : {}),
      ...(call.function?.name ? { name: call.function.name } : {}),
      arguments: call.function?.arguments ?? '',
    },
  };
}

/** OpenAI's `developer` role, for a server that knows only `system`. */
const asSystem = (message: ChatMessage): ChatMessage => (message.role === 'developer' ? { ...message, role: 'system' } : message);
