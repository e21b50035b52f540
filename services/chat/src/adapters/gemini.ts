import { randomBytes } from 'node:crypto';
import {
  ApiError,
  type Fetch,
  type GenerateContentConfig,
  type GenerateContentResponse,
  type GenerateContentResponseUsageMetadata,
  GoogleGenAI,
  ThinkingLevel,
} from '@google/genai';
import type { FinishReason, Usage } from '@oc/contracts';
import { ProviderError, providerHttpError, providerUnreachable, retryAfterMs } from '@oc/routing';
import type { ChatProvider, GenerationEvent, GenerationRequest } from '../application/ports';
import { requestSettings, turns } from './gemini-content';

export interface GeminiChatOptions {
  apiKey: string;
  /** Replaces the Gemini API's own host (the SDK adds `/v1beta`); absent, the SDK's default host applies. */
  baseUrl?: string;
  /** The upstream model `chat-2` maps to. */
  model: string;
  /** Longest wait for Gemini's answer or its next chunk. */
  timeoutMs: number;
}


const PROVIDER = 'Gemini';

/**
 * Google's generateContent (one JSON body) and streamGenerateContent (`?alt=sse`) through the official SDK.
 * The SDK's own retries stay off (3.3.0 retries only when `httpOptions.retryOptions` is set), and so does its
 * automatic continuation, which would re-send the request: failing over is the router's job.
 */
export class GeminiChatProvider implements ChatProvider {
  readonly #client: GoogleGenAI;

  constructor(private readonly options: GeminiChatOptions) {
    this.#client = new GoogleGenAI({
      // Explicit, so that GOOGLE_GENAI_USE_VERTEXAI in the environment cannot send us to Vertex AI instead.
      vertexai: false,
      // SDK 3.3.0 defaults to `v1` (or GOOGLE_GENAI_API_VERSION); Google's REST reference documents generateContent
      // and `thinkingConfig` on v1beta (ai.google.dev/api/generate-content).
      apiVersion: 'v1beta',
      apiKey: options.apiKey,
      ...(options.baseUrl ? { httpOptions: { baseUrl: options.baseUrl } } : {}),
    });
  }

  async *generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent> {
    const call = new Call(this.options.timeoutMs, signal);
    try {
      const params = { model: this.options.model, contents: turns(request.messages), config: settings(request, call) };
      const chunks = request.stream
        ? await this.#client.models.generateContentStream(params)
        : [await this.#client.models.generateContent(params)];
      const answer = new Answer(request.n ?? 1);
      for await (const chunk of chunks) {
        call.hold();
        yield* answer.add(chunk);
        call.wait();
      }
      call.hold();
      yield* answer.finish();
    } catch (error) {
      if (signal.aborted) return;
      throw failure(error, call);
    } finally {
      call.end();
    }
  }
}

/**
 * One call's clock, and what its HTTP answer said before the SDK turned it into an `ApiError` (which keeps no
 * headers). The clock bounds each wait for Gemini, not the whole answer: the SDK's `httpOptions.timeout` stays
 * armed while the body is read, so it would cut a long stream that is still flowing.
 */
class Call {
  readonly signal: AbortSignal;
  /** Whether Gemini answered with a status at all: a failure after it is a broken answer, not a missing one. */
  answered = false;
  retryAfterMs: number | undefined;
  readonly #idle = new AbortController();
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly timeoutMs: number,
    caller: AbortSignal,
  ) {
    this.signal = AbortSignal.any([caller, this.#idle.signal]);
    this.wait();
  }

  readonly fetch: Fetch = async (input, init) => {
    const response = await fetch(input, init);
    this.answered = true;
    if (!response.ok) this.retryAfterMs = retryAfterMs((name) => response.headers.get(name), Date.now());
    return response;
  };

  /** Gemini must answer, or send its next chunk, within `timeoutMs` from now. */
  wait(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#idle.abort(), this.timeoutMs);
  }

  /** While the caller holds an event, a slow reader is not a hung provider. */
  hold(): void {
    clearTimeout(this.#timer);
  }

  get timedOut(): boolean {
    return this.#idle.signal.aborted;
  }

  /** Also drops the connection when the caller stopped reading before the end. */
  end(): void {
    clearTimeout(this.#timer);
    this.#idle.abort();
  }
}

function settings(request: GenerationRequest, call: Call): GenerateContentConfig {
  return {
    ...requestSettings(request),
    // Thinking tokens are billed as output. MINIMAL is 3.1 Flash-Lite's own default (ai.google.dev/gemini-api/docs/
    // gemini-3), pinned so that thinking stays near nothing and `maxTokens` keeps meaning visible text. A model
    // configured here must accept MINIMAL: 3.1 and 3.5 Flash-Lite and 3.6 Flash do, 3.7 Flash does not
    // (docs.cloud.google.com/gemini-enterprise-agent-platform/models/thinking).
    thinkingConfig: { thinkingLevel: ThinkingLevel.MINIMAL },
    automaticContinuation: false,
    abortSignal: call.signal,
    httpOptions: { fetch: call.fetch },
  };
}

/** One choice (candidate) of the answer so far: how many tools it called and how it ended. */
interface Choice {
  calls: number;
  finishReason?: string;
}

/** The answer so far, chunk by chunk: each candidate's text and function calls as they come, its end, the usage. */
class Answer {
  readonly #choices: Choice[];
  /** Each chunk's usage is the running total so far, so the last one counts (not their sum). */
  #usage: GenerateContentResponseUsageMetadata | undefined;

  constructor(n: number) {
    this.#choices = Array.from({ length: n }, () => ({ calls: 0 }));
  }

  *add(chunk: GenerateContentResponse): Iterable<GenerationEvent> {
    // A blocked prompt comes with no candidates at all (ai.google.dev/api/generate-content#PromptFeedback).
    const blocked = chunk.promptFeedback?.blockReason;
    if (blocked) throw refused(`blocked the prompt: ${blocked}`);
    for (const candidate of chunk.candidates ?? []) {
      const index = candidate.index ?? 0;
      const choice = this.#choices[index];
      if (!choice) throw brokeOff(`a candidate ${index} beyond the ${this.#choices.length} asked for`);
      const at = index === 0 ? {} : { index };
      const parts = (candidate.content?.parts ?? []).filter((part) => !part.thought);
      const text = parts.map((part) => part.text ?? '').join('');
      if (text) yield { type: 'content', text, ...at };
      // Gemini sends each call whole (partial arguments are Vertex AI's only); ids only on some models.
      for (const { functionCall: fc } of parts.filter((part) => part.functionCall)) {
        const fragment = { call: choice.calls++, id: fc!.id || callId(), name: fc!.name ?? '', arguments: JSON.stringify(fc!.args ?? {}) };
        yield { type: 'tool_call', fragment, ...at };
      }
      if (candidate.finishReason) choice.finishReason = candidate.finishReason;
    }
    if (chunk.usageMetadata) this.#usage = chunk.usageMetadata;
  }

  /** Each choice's end, in order, the call's usage on the last. */
  *finish(): Iterable<GenerationEvent> {
    const last = this.#choices.length - 1;
    for (const [index, choice] of this.#choices.entries()) {
      if (!choice.finishReason) throw brokeOff('the answer ended without a finish reason');
      yield {
        type: 'finish',
        finishReason: finishReasonOf(choice.finishReason, choice.calls > 0),
        ...(index === 0 ? {} : { index }),
        ...(index === last && this.#usage ? { usage: usageOf(this.#usage) } : {}),
      };
    }
  }
}

/** OpenAI's form of a call id, for calls Gemini gives none: unique, so that a tool result finds its call. */
const callId = () => `call_${randomBytes(12).toString('hex')}`;

/** Gemini withheld (the rest of) the answer for what it says. */
const WITHHELD = new Set(['SAFETY', 'RECITATION', 'LANGUAGE', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'ESCALATION']);

/** Gemini ends an answer of function calls with STOP; OpenAI's clients look for `tool_calls` to run them. */
function finishReasonOf(reason: string, calledTools: boolean): FinishReason {
  if (reason === 'STOP') return calledTools ? 'tool_calls' : 'stop';
  // CONTINUATION: "stopped because the response reached the per-request token limit" (the SDK's FinishReason).
  if (reason === 'MAX_TOKENS' || reason === 'CONTINUATION') return 'length';
  // What OpenAI reports as content its filter withheld: the answer so far stands, the rest is not given.
  if (WITHHELD.has(reason)) return 'content_filter';
  if (reason === 'PUP_LIMITED_DISABLED') {
    // Our account is limited for Prohibited Use Policy violations: this deployment can serve nothing.
    throw new ProviderError({ kind: 'deployment', message: `${PROVIDER} refused to answer.`, detail: `${PROVIDER} ${reason}` });
  }
  // OTHER, MALFORMED_RESPONSE and reasons newer than this adapter: nothing says another try would fail too.
  throw new ProviderError({
    kind: 'retryable',
    message: `${PROVIDER} stopped the answer unexpectedly.`,
    detail: `${PROVIDER} stopped the answer: ${reason}`,
  });
}

/**
 * Thinking tokens are output, and billed as output ("Output price (including thinking tokens)" on the pricing
 * page). The total is our own sum: Google's `totalTokenCount` also counts tool-use prompt tokens, which we never
 * cause, and the three numbers must agree.
 */
function usageOf(u: GenerateContentResponseUsageMetadata): Usage {
  const prompt_tokens = u.promptTokenCount ?? 0;
  const completion_tokens = (u.candidatesTokenCount ?? 0) + (u.thoughtsTokenCount ?? 0);
  return { prompt_tokens, completion_tokens, total_tokens: prompt_tokens + completion_tokens };
}

const refused = (what: string) =>
  new ProviderError({ kind: 'request', message: `${PROVIDER} refused to answer this request.`, detail: `${PROVIDER} ${what}` });

const brokeOff = (reason: string) =>
  new ProviderError({ kind: 'retryable', message: `${PROVIDER} broke off its answer.`, detail: `${PROVIDER} broke off: ${reason.slice(0, 500)}` });

function failure(error: unknown, call: Call): ProviderError {
  if (error instanceof ProviderError) return error;
  if (call.timedOut) return providerUnreachable(PROVIDER, error, true);
  if (error instanceof ApiError) return httpFailure(error, call.retryAfterMs);
  return call.answered ? brokeOff(String(error)) : providerUnreachable(PROVIDER, error);
}

/** Google's error body (ai.google.dev/gemini-api/docs/generate-content/api-errors). */
interface GoogleError {
  message?: string;
  status?: string;
  details?: Array<{ '@type'?: string; reason?: string; retryDelay?: string }>;
}

function httpFailure(error: ApiError, headerRetryAfterMs: number | undefined): ProviderError {
  const body = googleError(error);
  const detail = body ? `${body.status ?? ''} ${body.message ?? ''}`.trim() : error.message;
  const failed = providerHttpError(PROVIDER, error.status, detail, headerRetryAfterMs ?? retryDelayMs(body));
  if (!ourAccountAtFault(error.status, body)) return failed;
  return new ProviderError({
    kind: 'deployment',
    status: failed.status,
    message: failed.message,
    detail: failed.detail,
    retryAfterMs: failed.retryAfterMs,
  });
}

/**
 * The SDK's `ApiError` carries Google's body as JSON in its message: the whole message for an HTTP error, after
 * "got status: …. " for an error event inside a stream.
 */
function googleError(error: ApiError): GoogleError | undefined {
  try {
    return (JSON.parse(error.message.slice(error.message.indexOf('{'))) as { error?: GoogleError }).error;
  } catch {
    return undefined;
  }
}

/**
 * Gemini answers a 429 without `Retry-After`: the wait is a `google.rpc.RetryInfo` detail, a protobuf duration
 * such as "53s" or "45.837906927s" (github.com/googleapis/python-genai/issues/1875, github.com/dcdpr/jp/pull/1061).
 */
function retryDelayMs(body: GoogleError | undefined): number | undefined {
  const info = body?.details?.find((detail) => detail['@type'] === 'type.googleapis.com/google.rpc.RetryInfo');
  const seconds = /^(\d+(?:\.\d+)?)s$/.exec(info?.retryDelay ?? '')?.[1];
  return seconds === undefined ? undefined : Math.round(Number(seconds) * 1000);
}

/**
 * Statuses that blame our account rather than the customer's request: Google answers a wrong key with 400
 * INVALID_ARGUMENT and an `API_KEY_INVALID` ErrorInfo, a project without billing with 400 FAILED_PRECONDITION, and
 * spent prepaid credit with 402 (ai.google.dev/gemini-api/docs/generate-content/api-errors).
 */
function ourAccountAtFault(status: number, body: GoogleError | undefined): boolean {
  if (status === 402) return true;
  if (status !== 400) return false;
  return body?.status === 'FAILED_PRECONDITION' || !!body?.details?.some((detail) => detail.reason === 'API_KEY_INVALID');
}
