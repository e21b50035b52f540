import { z } from 'zod';

export const TIERS = ['free', 'standard', 'premium', 'enterprise'] as const;
export const TierSchema = z.enum(TIERS);
export type Tier = z.infer<typeof TierSchema>;

export interface TierLimits {
  requestsPerMinute: number;
  requestsPerDay: number;
  chatRequestsPerMinute: number;
  chatTokensPerDay: number;
}

/**
 * The spec's Limits table. Enterprise is "custom" there; these are the figures an enterprise
 * organization gets until an operator agrees others (documented in docs/decisions.md).
 */
export const TIER_LIMITS: Record<Tier, TierLimits> = {
  free: { requestsPerMinute: 10, requestsPerDay: 100, chatRequestsPerMinute: 10, chatTokensPerDay: 10_000 },
  standard: { requestsPerMinute: 100, requestsPerDay: 10_000, chatRequestsPerMinute: 60, chatTokensPerDay: 1_000_000 },
  premium: { requestsPerMinute: 500, requestsPerDay: 50_000, chatRequestsPerMinute: 300, chatTokensPerDay: 10_000_000 },
  enterprise: {
    requestsPerMinute: 2_000,
    requestsPerDay: 1_000_000,
    chatRequestsPerMinute: 1_000,
    chatTokensPerDay: 100_000_000,
  },
};

export const DEFAULT_KEY_RATE_LIMIT_PER_MINUTE = 100;
