import type { ChatMessage, FinishReason, ServedUsage, Usage } from '@oc/contracts';

/** What one upstream call is asked for; `maxTokens` is always set, since it bounds the reservation. */
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
}

/** The deployment that answered, and what it costs us (integer micro-USD per million tokens). */
export interface ServedBy {
  deployment: string;
  provider: string;
  model: string;
  costMicrosPer1M: { input: number; output: number };
}

export type GenerationEvent =
  /** From the router, before the answer's first text: the deployment answering. */
  | { type: 'served'; served: ServedBy }
  | { type: 'content'; text: string }
  /** `usage` when the provider reports it; otherwise it is counted with our tokenizer. */
  | { type: 'finish'; finishReason: FinishReason; usage?: Usage };

/**
 * An upstream model, or the router over several. Aborting `signal` stops the call; the iteration then ends early
 * or throws.
 */
export interface ChatProvider {
  generate(request: GenerationRequest, signal: AbortSignal): AsyncIterable<GenerationEvent>;
  /**
   * The first optional parameter the request uses that no deployment accepts (`temperature`, `stop`): it is
   * refused with 400 before anything is reserved. Absent: everything is accepted.
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
}

/** The billing service's reservations, in integer micro-USD; a refusal throws billing's 402, with its `funds`. */
export interface Funds {
  /**
   * Held when this resolves; or, where billing runs in this process, decided and still being stored, so that the
   * upstream call overlaps its commit. Billing stores it before the capture or release that follows, and a crash
   * before then takes the completion with it: nothing generated is charged, nothing is held.
   */
  reserve(orgId: string, reservationId: string, amountMicros: number, description: string, hold: Hold): Promise<void>;
  /** `usage`: what was served, by which deployment, at what cost to us (recorded beside the charge). */
  capture(orgId: string, reservationId: string, amountMicros: number, usage?: ServedUsage): Promise<void>;
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
