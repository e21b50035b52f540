import Anthropic, { APIConnectionError, APIConnectionTimeoutError, APIError } from '@anthropic-ai/sdk';
import { type ChatMessage, contentText, type FinishReason, isInstruction, type Usage } from '@oc/contracts';
import { ProviderError, providerHttpError, providerUnreachable, retryAfterMs } from '@oc/routing';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../application/ports';

export interface AnthropicChatOptions {
  apiKey: string;
  /**
   * What the SDK calls `baseURL`: the origin, without `/v1` (the SDK appends `/v1/messages`). Absent, the SDK's
   * own default applies (`ANTHROPIC_BASE_URL`, else Anthropic's API).
   */
  baseUrl?: string;
  /** The upstream model `chat-2` maps to. It must accept `thinking: {type: 'disabled'}` (see `thinkingOff`). */
  model: string;
  /** Longest wait for the first byte of the answer, and then for each next part of it. */
  timeoutMs: number;
}


const PROVIDER = 'Anthropic';

type Params = Omit<Anthropic.MessageCreateParamsNonStreaming, 'stream'>;
type Ending = Pick<Anthropic.Message, 'stop_reason' | 'stop_details'>;
type TokenCounts = Partial<Record<(typeof COUNTS)[number], number | null>>;

const COUNTS = ['input_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens', 'output_tokens'] as const;

/**
 * Claude's Messages API through Anthropic's official SDK. The SDK sends API version 2026-10-21, which answers 400
 * to `temperature` (even at its default), so this provider takes none; it retries nothing itself (the router
 * fails over).
 */
export class AnthropicChatProvider implements ChatProvider {
  private readonly client: Anthropic;

  constructor(private readonly options: AnthropicChatOptions) {
    this.client = new Anthropic({
      apiKey: options.apiKey,
      ...(options.baseUrl !== undefined ? { baseURL: options.baseUrl } : {}),
      maxRetries: 0,
      // Bounds the wait for the response headers. Without a timeout of its own the SDK also refuses, locally,
      // a non-streaming call whose max_tokens might take over ten minutes.
      timeout: options.timeoutMs,
      // Failures reach the operator as ProviderError.detail; the SDK would print provider text to the console.
      logLevel: 'off',
    });
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    if (request.temperature !== undefined) throw temperatureRefused();
    const silence = new Silence(this.options.timeoutMs, signal);
    try {
      if (request.stream) yield* this.streamed(this.params(request), silence);
      else yield* this.whole(this.params(request), silence);
    } catch (error) {
      if (signal.aborted) return;
      throw redacted(failure(error, silence), this.options.apiKey);
    } finally {
      silence.disarm();
    }
  }

  private params(request: GenerationRequest): Params {
    const system = request.messages.filter(isInstruction).map((m) => ({ type: 'text' as const, text: contentText(m.content) }));
    return {
      model: this.options.model,
      max_tokens: request.maxTokens,
      // Consecutive same-role turns go as they are: the API combines them into one turn itself (Messages API
      // reference, `messages`).
      messages: request.messages.filter(isTurn).map((m) => ({ role: m.role, content: contentText(m.content) })),
      // One text block per system message, in order: the API's own way to give several, no separator of ours.
      ...(system.length > 0 ? { system } : {}),
      ...(request.stop.length > 0 ? { stop_sequences: request.stop } : {}),
      thinking: thinkingOff,
    };
  }

  private async *streamed(params: Params, silence: Silence): AsyncIterable<GenerationEvent> {
    const stream = await this.client.messages.create({ ...params, stream: true }, { signal: silence.signal });
    let counts: TokenCounts = {};
    let ending: Ending = { stop_reason: null, stop_details: null };
    let stopped = false;
    for await (const event of silence.watch(stream)) {
      if (event.type === 'message_start') counts = event.message.usage;
      else if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') yield { type: 'content', text: event.delta.text };
      else if (event.type === 'message_delta') {
        ending = event.delta;
        counts = overlay(counts, event.usage);
      } else if (event.type === 'message_stop') stopped = true;
    }
    // An SSE body can end cleanly without the answer having ended: only message_stop says it has.
    if (!stopped) throw brokeOff('the stream ended before message_stop');
    yield finish(ending, counts);
  }

  private async *whole(params: Params, silence: Silence): AsyncIterable<GenerationEvent> {
    const message: unknown = await this.client.messages.create(params, { signal: silence.signal });
    silence.disarm();
    if (!isMessage(message)) throw brokeOff('the answer is not a message');
    const text = message.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('');
    if (text) yield { type: 'content', text };
    yield finish(message, message.usage);
  }
}

/**
 * Haiku 5.5 thinks by default and its thinking counts toward max_tokens, so a customer's max_tokens would no longer
 * bound the answer they see (https://platform.claude.com/docs/en/build-with-claude/prompt-engineering/prompting-claude-haiku-5-5).
 * Models that always think (Opus 5.5, the Fable models) answer 400 to this.
 */
const thinkingOff = { type: 'disabled' } as const;

/** Tool calls, tool results and images never reach this provider (it declares no such feature): text turns only. */
function isTurn(message: ChatMessage): message is Extract<ChatMessage, { role: 'user' | 'assistant' }> {
  return message.role === 'user' || message.role === 'assistant';
}

/** The cumulative counts of message_delta replace what message_start said; an absent (null) one leaves it. */
function overlay(base: TokenCounts, next: TokenCounts): TokenCounts {
  return Object.fromEntries(COUNTS.map((name) => [name, next[name] ?? base[name]]));
}

/**
 * The stop reasons as https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons describes them.
 * `refusal`: Claude's safety classifiers declined the request; the same conversation keeps being declined, so it
 * is the request that is refused (no failover), not an answer that ended. `pause_turn` and `tool_use` come only
 * with tools, which this provider never sends: such an answer is unfinished.
 */
function finish({ stop_reason, stop_details }: Ending, counts: TokenCounts): GenerationEvent {
  if (stop_reason === 'refusal') throw refused(stop_details?.category);
  const finishReason = FINISH_REASONS[stop_reason ?? ''];
  if (!finishReason) throw brokeOff(`stop_reason ${stop_reason}`);
  return { type: 'finish', finishReason, usage: usageOf(counts) };
}

const FINISH_REASONS: Record<string, FinishReason> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  max_tokens: 'length',
  // Cut at the model's context window rather than at max_tokens: a length limit all the same.
  model_context_window_exceeded: 'length',
};

/**
 * "Total input tokens in a request is the summation of input_tokens, cache_creation_input_tokens, and
 * cache_read_input_tokens" (Messages API reference, `usage`).
 */
function usageOf(counts: TokenCounts): Usage {
  if (counts.input_tokens == null || counts.output_tokens == null) throw brokeOff('the answer carries no usage');
  const prompt_tokens = counts.input_tokens + (counts.cache_creation_input_tokens ?? 0) + (counts.cache_read_input_tokens ?? 0);
  return { prompt_tokens, completion_tokens: counts.output_tokens, total_tokens: prompt_tokens + counts.output_tokens };
}

/** The SDK returns a non-JSON 200 body as a string: the shape is checked, not assumed. */
function isMessage(value: unknown): value is Anthropic.Message {
  const message = value as Partial<Anthropic.Message> | null;
  return typeof message === 'object' && message !== null && Array.isArray(message.content) && typeof message.usage === 'object' && message.usage !== null;
}

/**
 * Aborts the call when Anthropic stays silent for `ms`, before the headers and between parts of the answer alike:
 * the SDK's own timeout ends once the headers are in. The clock stops while our caller holds an event.
 */
class Silence {
  readonly signal: AbortSignal;
  expired = false;
  readonly #controller = new AbortController();
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ms: number,
    caller: AbortSignal,
  ) {
    this.signal = AbortSignal.any([caller, this.#controller.signal]);
    this.arm();
  }

  async *watch<T>(source: AsyncIterable<T>): AsyncIterable<T> {
    try {
      for await (const item of source) {
        this.disarm();
        // Parts already received when the call was aborted are not relayed: the caller has stopped listening.
        if (this.signal.aborted) return;
        yield item;
        this.arm();
      }
    } finally {
      this.disarm();
    }
  }

  arm(): void {
    this.disarm();
    this.#timer = setTimeout(() => {
      this.expired = true;
      this.#controller.abort();
    }, this.ms);
  }

  disarm(): void {
    clearTimeout(this.#timer);
  }
}

function failure(error: unknown, silence: Silence): ProviderError {
  // Checked first: a stream aborted for silence ends quietly, and then looks merely unfinished.
  if (silence.expired || error instanceof APIConnectionTimeoutError) return providerUnreachable(PROVIDER, error, true);
  if (error instanceof ProviderError) return error;
  if (error instanceof APIConnectionError) return providerUnreachable(PROVIDER, error);
  if (error instanceof APIError && error.status !== undefined) {
    const wait = retryAfterMs((name) => error.headers?.get(name), Date.now());
    return providerHttpError(PROVIDER, error.status, describe(error), wait);
  }
  if (error instanceof APIError) return failedWhileAnswering(error);
  // A connection cut mid-body, an event that is not JSON.
  return brokeOff(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
}

/** Our key, should the provider's text ever echo it, is kept out of the operator's log too. */
function redacted(error: ProviderError, apiKey: string): ProviderError {
  if (!error.detail.includes(apiKey)) return error;
  const { kind, message, status, retryAfterMs: wait } = error;
  return new ProviderError({ kind, message, status, retryAfterMs: wait, detail: error.detail.replaceAll(apiKey, '[api key]') });
}

function describe(error: APIError): string {
  const requestId = error.requestID ? ` (request-id ${error.requestID})` : '';
  return `${error.type ?? 'error'}: ${error.apiMessage ?? error.message}${requestId}`;
}

/**
 * An `error` event after the 200 (the SDK gives it no status). The documented one is overloaded_error, what a 529
 * would have been (https://platform.claude.com/docs/en/build-with-claude/streaming#error-events): the request was
 * accepted, so another deployment may well answer it.
 */
function failedWhileAnswering(error: APIError): ProviderError {
  return new ProviderError({ kind: 'retryable', message: `${PROVIDER} failed while answering.`, detail: `${PROVIDER} failed mid-answer: ${describe(error)}` });
}

/** The answer did not end as the API documents it; a second try may well get a whole one. */
function brokeOff(detail: string): ProviderError {
  return new ProviderError({ kind: 'retryable', message: `${PROVIDER}'s answer broke off.`, detail: `${PROVIDER}: ${detail.slice(0, 500)}` });
}

function refused(category: string | null | undefined): ProviderError {
  return new ProviderError({ kind: 'request', message: `${PROVIDER} declined the request.`, detail: `${PROVIDER}: stop_reason refusal, category ${category ?? 'none'}` });
}

/** The router sends no temperature here (features.temperature is false); one that arrives is a bug, not dropped silently. */
function temperatureRefused(): ProviderError {
  return new ProviderError({
    kind: 'request',
    message: `${PROVIDER} takes no temperature.`,
    detail: `${PROVIDER}: API version 2026-10-21 answers 400 to temperature; the request was not sent`,
  });
}
