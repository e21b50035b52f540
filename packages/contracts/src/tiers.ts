import { z } from 'zod';

export const TIERS = ['free', 'standard', 'premium', 'enterprise'] as const;
export const TierSchema = z.enum(TIERS);
export type Tier = z.infer<typeof TierSchema>;

/** One figure of an organization's limits: a positive whole number of requests or tokens. */
const LimitFigure = z.int().positive();

/** The windows an organization's requests count in, as the organization object shows them. */
export const OrganizationLimitsSchema = z.object({
  requests_per_minute: LimitFigure,
  requests_per_day: LimitFigure,
  chat_requests_per_minute: LimitFigure,
  chat_tokens_per_day: LimitFigure,
});
export type OrganizationLimits = z.infer<typeof OrganizationLimitsSchema>;
export type LimitName = keyof OrganizationLimits;
export const LIMIT_NAMES = Object.keys(OrganizationLimitsSchema.shape) as LimitName[];

/** An enterprise organization's agreed figures; null (or absent) is the tier's own. */
export const CustomLimitsSchema = z.object({
  requests_per_minute: LimitFigure.nullable(),
  requests_per_day: LimitFigure.nullable(),
  chat_requests_per_minute: LimitFigure.nullable(),
  chat_tokens_per_day: LimitFigure.nullable(),
});
export type CustomLimits = z.infer<typeof CustomLimitsSchema>;

export const NO_CUSTOM_LIMITS: CustomLimits = {
  requests_per_minute: null,
  requests_per_day: null,
  chat_requests_per_minute: null,
  chat_tokens_per_day: null,
};

/**
 * The spec's Limits table. Enterprise is "custom" there: these are the figures an enterprise organization
 * gets until an operator sets others (`PATCH /admin/v1/organizations/{id}` with `limits`).
 */
export const TIER_LIMITS: Record<Tier, OrganizationLimits> = {
  free: { requests_per_minute: 10, requests_per_day: 100, chat_requests_per_minute: 10, chat_tokens_per_day: 10_000 },
  standard: { requests_per_minute: 100, requests_per_day: 10_000, chat_requests_per_minute: 60, chat_tokens_per_day: 1_000_000 },
  premium: { requests_per_minute: 500, requests_per_day: 50_000, chat_requests_per_minute: 300, chat_tokens_per_day: 10_000_000 },
  enterprise: {
    requests_per_minute: 2_000,
    requests_per_day: 1_000_000,
    chat_requests_per_minute: 1_000,
    chat_tokens_per_day: 100_000_000,
  },
};

/** What applies: each custom figure where one is set, the tier's elsewhere. */
export function effectiveLimits(tier: Tier, custom: CustomLimits = NO_CUSTOM_LIMITS): OrganizationLimits {
  const base = TIER_LIMITS[tier];
  return {
    requests_per_minute: custom.requests_per_minute ?? base.requests_per_minute,
    requests_per_day: custom.requests_per_day ?? base.requests_per_day,
    chat_requests_per_minute: custom.chat_requests_per_minute ?? base.chat_requests_per_minute,
    chat_tokens_per_day: custom.chat_tokens_per_day ?? base.chat_tokens_per_day,
  };
}

export const DEFAULT_KEY_RATE_LIMIT_PER_MINUTE = 100;
