import { formatUsd, type Usage } from '@oc/contracts';

/**
 * Token prices in integer micro-USD per 1,000 tokens (0.08 USD = 80,000). A request's cost is rounded
 * up to the next micro-dollar, once per request, so that a charge is never fractional and never below
 * the price; at the default price every token costs exactly 80 micro-USD and nothing is rounded.
 */
export const costMicros = (tokens: number, microsPer1kTokens: number) => Math.ceil((tokens * microsPer1kTokens) / 1000);

/** What a completion is charged: its usage, capped at what was reserved for it. */
export const chargeMicros = (usage: Usage, microsPer1kTokens: number, reservedMicros: number) =>
  Math.min(costMicros(usage.total_tokens, microsPer1kTokens), reservedMicros);

export interface ReservationBound {
  /** Prompt tokens of every prompt together. */
  promptTokens: number;
  /** Prompts in the request (a text completion may send several; each gets `max_tokens`). */
  prompts: number;
  /** Choices per prompt (a chat request's `n`; each gets `max_tokens` too); 1 when absent. */
  choices?: number;
  maxTokens: number;
  /** The request set no `max_tokens`, so the configured default was reserved. */
  maxTokensDefaulted: boolean;
  reservedMicros: number;
  microsPer1kTokens: number;
}

/**
 * A 402 in the request's own terms: what `max_tokens` made it reserve, what is available, and what to do. The
 * largest `max_tokens` that fits is exact: a bound of T tokens costs ceil(T × price / 1000) micro-USD, which
 * stays within the available balance exactly when T ≤ floor(available × 1000 / price).
 */
export function reservationRefusedMessage(bound: ReservationBound, availableMicros: number): string {
  const { promptTokens, prompts, maxTokens, reservedMicros, microsPer1kTokens } = bound;
  const choices = bound.choices ?? 1;
  const affordableTokens = Math.floor((Math.max(0, availableMicros) * 1000) / microsPer1kTokens);
  const fittingMaxTokens = Math.floor((affordableTokens - promptTokens) / (prompts * choices));
  const each = prompts > 1 ? ` for each of ${prompts} prompts` : choices > 1 ? ` for each of ${choices} choices (n)` : '';
  const what =
    `${promptTokens} prompt tokens + max_tokens ${maxTokens}${each}` +
    `${bound.maxTokensDefaulted ? ' (the default when max_tokens is not set)' : ''}, at ${formatUsd(microsPer1kTokens)} per 1,000 tokens`;
  const advice =
    fittingMaxTokens >= 1
      ? `Lower max_tokens to reserve less: max_tokens ${fittingMaxTokens} or less fits this balance. Only the tokens used are charged.`
      : 'Even max_tokens 1 does not fit with this prompt: add credit or send a shorter prompt.';
  return `Insufficient balance: this request reserves up to ${formatUsd(reservedMicros)} (${what}) but ${formatUsd(availableMicros)} is available. ${advice}`;
}

/**
 * What a provider charges us for a completion: its prompt and completion tokens at the deployment's prices in
 * micro-USD per million tokens, rounded up once, as the charge is.
 */
export const providerCostMicros = (usage: Usage, rates: { costMicrosPer1M: { input: number; output: number } }) =>
  Math.ceil((usage.prompt_tokens * rates.costMicrosPer1M.input + usage.completion_tokens * rates.costMicrosPer1M.output) / 1_000_000);
