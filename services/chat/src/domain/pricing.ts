import type { Usage } from '@oc/contracts';

/**
 * Token prices in integer micro-USD per 1,000 tokens (0.08 USD = 80,000). A request's cost is rounded
 * up to the next micro-dollar, once per request, so that a charge is never fractional and never below
 * the price; at the default price every token costs exactly 80 micro-USD and nothing is rounded.
 */
export const costMicros = (tokens: number, microsPer1kTokens: number) => Math.ceil((tokens * microsPer1kTokens) / 1000);

/** What a completion is charged: its usage, capped at what was reserved for it. */
export const chargeMicros = (usage: Usage, microsPer1kTokens: number, reservedMicros: number) =>
  Math.min(costMicros(usage.total_tokens, microsPer1kTokens), reservedMicros);
