import type {
  ChatFeature,
  ChatMessage,
  CreateChatCompletion,
  FinishReason,
  FunctionTool,
  ResponseFormat,
  ServedUsage,
  TokenLogprob,
  ToolChoice,
  Usage,
} from '@oc/contracts';

/**
 * Request fields passed through, in OpenAI's names, to deployments that declare the feature of the same name
 * (ChatFeature); what they mean is OpenAI's. Present only when the customer set them.
 */
export const PASS_THROUGH_OPTIONS = [
  'top_p',
  'frequency_penalty',
  'presence_penalty',
  'logit_bias',
  'user',
  'safety_identifier',
  'prompt_cache_key',
  'prompt_cache_retention',
  'reasoning_effort',
  'verbosity',
] as const satisfies readonly ChatFeature[];
export type PassThroughOptions = { [K in (typeof PASS_THROUGH_OPTIONS)[number]]?: NonNullable<CreateChatCompletion[K]> };

/**
 * What one upstream call is asked for; `maxTokens` is always set, since it bounds the reservation (per choice).
 * Messages are OpenAI's: `developer` is a system message to a provider without that role; content may be parts
 * (text, images); an assistant turn may be tool calls with null content, answered by `tool` messages.
 */
export interface GenerationRequest {
  messages: ChatMessage[];
  maxTokens: number;
  /** Absent when the customer named none: the provider's own default applies (some refuse the parameter). */
  temperature: number | undefined;
  stop: string[];
  /**
   * Whether the caller relays the text as it comes. Without it only the whole answer is needed, and a
   * provider may fetch it in one piece (yielding it as one content event).
   */
  stream: boolean;
  /** The prompt's tokens as counted for the reservation; what a span reports when the upstream reports none. */
  promptTokens?: number;
  /** Choices to generate in this call (OpenAI's `n`), each with its own events by `index`; 1 when absent. */
  n?: number;
  /** Function tools the model may call, and how (absent: the provider's default, `auto` when there are tools). */
  tools?: FunctionTool[];
  toolChoice?: ToolChoice;
  parallelToolCalls?: boolean;
  /** A JSON answer (`json_object`, or one valid against `json_schema`); absent for plain text. */
  responseFormat?: Exclude<ResponseFormat, { type: 'text' }>;
  /** Log probabilities of each generated token, with this many alternatives each (0..20). */
  logprobs?: { top: number };
  seed?: number;
  options?: PassThroughOptions;
}

/** The deployment that answered, and what it costs us (integer micro-USD per million tokens). */
export interface ServedBy {
  deployment: string;
  provider: string;
  model: string;
  costMicrosPer1M: { input: number; output: number };
}

/**
 * A fragment of a tool call of one choice: the first for a call (by `call`, its position among the choice's calls)
 * carries `id` and `name`, the others more of its `arguments` (JSON text, in order). A whole answer may give each
 * call in one event.
 */
export interface ToolCallFragment {
  call: number;
  id?: string;
  name?: string;
  arguments: string;
}

/**
 * `index` is the choice (0 when absent: one choice). A choice ends with its `finish`; the call ends when every
 * choice has.
 */
export type GenerationEvent =
  /** From the router, before the answer's first text: the deployment answering. */
  | { type: 'served'; served: ServedBy }
  /** `logprobs`: the tokens of `text`, when the request asked for them. */
  | { type: 'content'; text: string; index?: number; logprobs?: TokenLogprob[] }
  | { type: 'tool_call'; index?: number; fragment: ToolCallFragment }
  /**
   * `usage` when the provider reports it: the whole call's (every choice's), on the last finish; otherwise it is
   * counted with our tokenizer.
   */
  | { type: 'finish'; finishReason: FinishReason; index?: number; usage?: Usage };

/**
 * An upstream model, or the router over several. Aborting `signal` stops the call; the iteration then ends early
 * or throws.
 */
export interface ChatProvider {
  generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent>;
  /**
   * The first optional parameter the request uses that no deployment accepts (`temperature`, `tools`,
   * `messages[2].content[1]` for an image): it is refused with 400 before anything is reserved. Absent: everything
   * is accepted.
   */
  unsupported?(request: GenerationRequest): string | undefined;
  /** Releases pooled connections, if the provider keeps any. */
  close?(): Promise<void>;
}

export interface Tokenizer {
  count(text: string): number;
  /** Tokens of each text; a text over `cap` tokens counts as `cap + 1`, how far over is not worked out. */
  measure(texts: string[], cap: number): Promise<number[]>;
}

/** How a reservation is held while its completion runs. */
export interface Hold {
  /** Unix seconds: billing releases the reservation itself if it is still open then. */
  expiresAt: number;
  /** The process running the completion (`chat/<replica>/<run>`): what it left open is found by this name. */
  holder: string;
  /** The API key asking: billing refuses a hold that would take it over its budget (402 key_budget_exceeded). */
  keyId?: string | undefined;
}

/** The billing service's reservations, in integer micro-USD; a refusal throws billing's 402, with its `funds`. */
export interface Funds {
  /**
   * Held when this resolves; or, where billing runs in this process, decided and still being stored, so that the
   * upstream call overlaps its commit. Billing stores it before the capture or release that follows, and a crash
   * before then takes the completion with it: nothing generated is charged, nothing is held.
   */
  reserve(orgId: string, reservationId: string, amountMicros: number, description: string, hold: Hold): Promise<void>;
  /**
   * Charged when this resolves. `usage`: what was served, by which deployment, at what cost to us (recorded
   * beside the charge). `answerWhenDecided`: the caller's next append (a session's exchange) is stored behind
   * the capture and the caller answers only once it is, so where billing runs in this process it may resolve
   * once the capture is decided and still being stored (the next append then joins its commit or a later one).
   */
  capture(orgId: string, reservationId: string, amountMicros: number, usage: ServedUsage | undefined, options: { answerWhenDecided: boolean }): Promise<void>;
  release(orgId: string, reservationId: string): Promise<void>;
  /** The holders of open reservations whose names start with `prefix`. */
  holders(prefix: string): Promise<string[]>;
  /** Releases what `holder` still holds (in batches: `more` when some are left). */
  releaseHeld(holder: string): Promise<{ released: number; more: boolean }>;
}

/** Where streamed frames go: a subject the gateway is listening on. */
export interface FramePublisher {
  publish(subject: string, frame: unknown): Promise<void>;
}
