import { type ConfigurationCheck, type ConfigurationProblem, usdToMicros } from '@oc/contracts';
import { z } from 'zod';
import type { StripeSettings } from './adapters/stripe';
import type { AutoRechargePolicy } from './domain/auto-recharge';

/** What a member may top up at once when the operator sets no bounds, USD. */
export const DEFAULT_TOPUP_MIN_USD = 5;
export const DEFAULT_TOPUP_MAX_USD = 1_000;

/** Whole cents: what a Checkout Session's `unit_amount` holds. */
const usdBound = (fallback: number) =>
  z.coerce
    .number()
    .positive()
    .max(1_000_000)
    .refine((usd) => Number.isInteger(Math.round(usd * 100)) && Math.abs(Math.round(usd * 100) - usd * 100) < 1e-6, 'whole cents')
    .default(fallback)
    .describe('USD, in whole cents, more than 0');

/** Auto-recharge: the least time between two attempts' starts, failures in a row before it turns off, how often balances are checked. */
export const DEFAULT_AUTO_RECHARGE = { cooldownSeconds: 600, maxFailures: 3, checkSeconds: 30 } as const;

/**
 * Top-ups with Stripe, for billing's process and the standalone one. Without STRIPE_SECRET_KEY top-up is off
 * (the console says so); the secret key and the webhook secret are only ever read here and handed to the adapter.
 */
export const StripeConfigSchema = z.object({
  STRIPE_SECRET_KEY: z.string().min(1).optional().describe('a Stripe secret key (sk_live_… or sk_test_…) or a restricted key'),
  STRIPE_WEBHOOK_SECRET: z.string().min(1).optional().describe("the endpoint's signing secret (whsec_…)"),
  /** Points the SDK at another server (tests, a local fake): its protocol, host and port. */
  STRIPE_API_BASE_URL: z.url({ protocol: /^https?$/ }).optional().describe('an http(s) URL, e.g. http://127.0.0.1:12111'),
  TOPUP_MIN_USD: usdBound(DEFAULT_TOPUP_MIN_USD),
  TOPUP_MAX_USD: usdBound(DEFAULT_TOPUP_MAX_USD),
  AUTO_RECHARGE_COOLDOWN_SECONDS: z.coerce.number().int().min(0).max(86_400).default(DEFAULT_AUTO_RECHARGE.cooldownSeconds).describe('seconds, 0 to 86400'),
  AUTO_RECHARGE_MAX_FAILURES: z.coerce.number().int().min(1).max(100).default(DEFAULT_AUTO_RECHARGE.maxFailures).describe('1 to 100'),
  AUTO_RECHARGE_CHECK_SECONDS: z.coerce.number().int().min(1).max(3600).default(DEFAULT_AUTO_RECHARGE.checkSeconds).describe('seconds, 1 to 3600'),
});
export type StripeConfig = z.infer<typeof StripeConfigSchema>;

/** A key without its webhook secret would take payments that are never credited; bounds must make a range. */
export const stripeConfigChecks: ConfigurationCheck = (env) => {
  const problems: ConfigurationProblem[] = [];
  if (env.STRIPE_SECRET_KEY && !env.STRIPE_WEBHOOK_SECRET) {
    problems.push({ variable: 'STRIPE_WEBHOOK_SECRET', message: 'required with STRIPE_SECRET_KEY (without it no payment is ever credited)' });
  }
  const min = Number(env.TOPUP_MIN_USD ?? DEFAULT_TOPUP_MIN_USD);
  const max = Number(env.TOPUP_MAX_USD ?? DEFAULT_TOPUP_MAX_USD);
  if (Number.isFinite(min) && Number.isFinite(max) && min > max) {
    problems.push({ variable: 'TOPUP_MAX_USD', message: `must be at least TOPUP_MIN_USD (${min})` });
  }
  return problems;
};

export interface TopUpBounds {
  minMicros: number;
  maxMicros: number;
}

/** What billing's runtime takes: the Stripe adapter's settings when a key is set, and the bounds in micro-USD. */
export interface PaymentSettings {
  stripe?: StripeSettings;
  bounds: TopUpBounds;
  autoRecharge: AutoRechargePolicy & { checkSeconds: number };
}

export function paymentSettings(config: Partial<StripeConfig>): PaymentSettings {
  const bounds = {
    minMicros: usdToMicros(config.TOPUP_MIN_USD ?? DEFAULT_TOPUP_MIN_USD),
    maxMicros: usdToMicros(config.TOPUP_MAX_USD ?? DEFAULT_TOPUP_MAX_USD),
  };
  const autoRecharge = {
    cooldownSeconds: config.AUTO_RECHARGE_COOLDOWN_SECONDS ?? DEFAULT_AUTO_RECHARGE.cooldownSeconds,
    maxFailures: config.AUTO_RECHARGE_MAX_FAILURES ?? DEFAULT_AUTO_RECHARGE.maxFailures,
    checkSeconds: config.AUTO_RECHARGE_CHECK_SECONDS ?? DEFAULT_AUTO_RECHARGE.checkSeconds,
  };
  if (!config.STRIPE_SECRET_KEY || !config.STRIPE_WEBHOOK_SECRET) return { bounds, autoRecharge };
  return {
    bounds,
    autoRecharge,
    stripe: {
      secretKey: config.STRIPE_SECRET_KEY,
      webhookSecret: config.STRIPE_WEBHOOK_SECRET,
      ...(config.STRIPE_API_BASE_URL ? { apiBaseUrl: config.STRIPE_API_BASE_URL } : {}),
    },
  };
}
