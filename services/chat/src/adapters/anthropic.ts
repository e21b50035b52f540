import Anthropic, { APIConnectionError, APIConnectionTimeoutError, APIError } from '@anthropic-ai/sdk';
import type { FinishReason, Usage } from '@oc/contracts';
import { ProviderError, providerHttpError, providerUnreachable, retryAfterMs } from '@oc/routing';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../application/ports';
import { messageParams, type Params } from './anthropic-messages';

export interface AnthropicChatOptions {
  apiKey: string;
  /**
   * What the SDK calls `baseURL`: the origin, without `/v1` (the SDK appends `/v1/messages`). Absent, the SDK's
   * own default applies (`ANTHROPIC_BASE_URL`, else Anthropic's API).
   */
  baseUrl?: string;
  /** The upstream model `chat-2` maps to. It must accept `thinking: {type: 'disabled'}` (anthropic-messages.ts). */
  model: string;
  /** Longest wait for the first byte of the answer, and then for each next part of it. */
  timeoutMs: number;
}


const PROVIDER = 'Anthropic';

type Ending = Pick<Anthropic.Message, 'stop_reason'>;
type TokenCounts = Partial<Record<(typeof COUNTS)[number], number | null>>;

const COUNTS = ['input_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens', 'output_tokens'] as const;

/**
 * Claude's Messages API through Anthropic's official SDK. The SDK sends API version 2026-10-21, which answers 400
 * to `temperature` (even at its default), so this provider takes none; it retries nothing itself (the router
 * fails over). The request's translation is anthropic-messages.ts'; here are the call and its answer.
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
    const params = messageParams(request, this.options.model);
    const silence = new Silence(this.options.timeoutMs, signal);
    try {
      if (request.stream) yield* this.streamed(params, silence);
      else yield* this.whole(params, silence);
    } catch (error) {
      if (signal.aborted) return;
      throw redacted(failure(error, silence), this.options.apiKey);
    } finally {
      silence.disarm();
    }
  }

  private async *streamed(params: Params, silence: Silence): AsyncIterable<GenerationEvent> {
    const stream = await this.client.messages.create({ ...params, stream: true }, { signal: silence.signal });
    let counts: TokenCounts = {};
    let ending: Ending = { stop_reason: null };
    let stopped = false;
    const calls = new ToolCalls();
    for await (const event of silence.watch(stream)) {
      if (event.type === 'message_start') counts = event.message.usage;
      else if (event.type === 'content_block_start' && event.content_block.type === 'tool_use') {
        yield calls.start(event.index, event.content_block.id, event.content_block.name);
      } else if (event.type === 'content_block_delta') {
        if (event.delta.type === 'text_delta') yield { type: 'content', text: event.delta.text };
        else if (event.delta.type === 'input_json_delta') yield* calls.more(event.index, event.delta.partial_json);
      } else if (event.type === 'content_block_stop') yield* calls.stop(event.index);
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
    const uses = message.content.filter((block) => block.type === 'tool_use');
    for (const [call, use] of uses.entries()) {
      yield { type: 'tool_call', fragment: { call, id: use.id, name: use.name, arguments: JSON.stringify(use.input) } };
    }
    yield finish(message, message.usage);
  }
}

/** The cumulative counts of message_delta replace what message_start said; an absent (null) one leaves it. */
function overlay(base: TokenCounts, next: TokenCounts): TokenCounts {
  return Object.fromEntries(COUNTS.map((name) => [name, next[name] ?? base[name]]));
}

/**
 * The stop reasons as https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons describes them.
 * `pause_turn` comes only with server tools, which this provider never sends: such an answer is unfinished.
 */
function finish({ stop_reason }: Ending, counts: TokenCounts): GenerationEvent {
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
  tool_use: 'tool_calls',
  // Claude's safety classifiers stopped the answer: what OpenAI reports as content withheld by its filter.
  refusal: 'content_filter',
};

/**
 * The tool calls of a streamed answer, by content block: `content_block_start` names each (id, name), and its
 * `input_json_delta`s carry the input's JSON text, in order (https://platform.claude.com/docs/en/build-with-claude/streaming).
 */
class ToolCalls {
  readonly #calls = new Map<number, { call: number; sent: boolean }>();

  start(block: number, id: string, name: string): GenerationEvent {
    const call = this.#calls.size;
    this.#calls.set(block, { call, sent: false });
    return { type: 'tool_call', fragment: { call, id, name, arguments: '' } };
  }

  *more(block: number, json: string): Iterable<GenerationEvent> {
    const known = this.#calls.get(block);
    if (!known || json === '') return;
    known.sent = true;
    yield { type: 'tool_call', fragment: { call: known.call, arguments: json } };
  }

  /** A call without input streams no JSON at all; its arguments are then `{}`, as the whole answer's input is. */
  *stop(block: number): Iterable<GenerationEvent> {
    const known = this.#calls.get(block);
    if (known && !known.sent) yield { type: 'tool_call', fragment: { call: known.call, arguments: '{}' } };
  }
}

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
