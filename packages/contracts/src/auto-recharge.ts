import { z } from 'zod';

// Auto-recharge: a card saved with Stripe charged off-session when an organization's available funds fall below
// its threshold. Kept apart from billing.ts, which spreads these events into BillingEvents: this file imports
// nothing of billing's, so the two load in either order.

const wholeCents = (usd: number) => Math.abs(Math.round(usd * 100) - usd * 100) < 1e-6;

/**
 * `PATCH /console/v1/auto-recharge`: on or off, the threshold (recharge when available funds fall below it) and the
 * amount charged each time, USD in whole cents; the amount within the top-up bounds (TOPUP_MIN_USD, TOPUP_MAX_USD).
 * Any subset; the first change states both figures.
 */
export const AutoRechargeBody = z
  .strictObject({
    enabled: z.boolean().optional(),
    threshold: z.number().positive().max(1_000_000).refine(wholeCents, 'at most 2 decimal places (whole cents)').optional(),
    amount: z.number().positive().max(1_000_000).refine(wholeCents, 'at most 2 decimal places (whole cents)').optional(),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'give at least one of enabled, threshold, amount' });

export const AutoRechargeValidationCodes = { enabled: 'invalid_enabled', threshold: 'invalid_threshold', amount: 'invalid_amount' };

/** `succeeded`: the PaymentIntent was paid (credited with its webhook); `failed`: declined or not payable off-session. */
export const AutoRechargeOutcome = z.enum(['pending', 'succeeded', 'failed']);

/** What a member sees of the organization's auto-recharge: its settings and how the last attempts went. */
export const AutoRechargeSchema = z.object({
  object: z.literal('auto_recharge'),
  enabled: z.boolean(),
  /** USD; null before it was ever set. */
  threshold: z.number().nullable(),
  amount: z.number().nullable(),
  currency: z.literal('usd'),
  /** A card is saved with Stripe for off-session payments (Checkout in setup mode). */
  payment_method_saved: z.boolean(),
  /** The latest attempt: its PaymentIntent (null until Stripe answered), amount, outcome and Stripe's reason when it failed. */
  last_attempt: z
    .object({
      id: z.string(),
      payment_id: z.string().nullable(),
      amount: z.number(),
      outcome: AutoRechargeOutcome,
      failure_message: z.string().nullable(),
      created: z.int(),
      settled_at: z.int().nullable(),
    })
    .nullable(),
  /** Failed attempts in a row; at the service's limit auto-recharge turns itself off. */
  consecutive_failures: z.int(),
  /** Why auto-recharge turned itself off (null while on, or when the member turned it off). */
  disabled_reason: z.string().nullable(),
  /** Unix seconds before which no new attempt is made (the cool-down after the last one); null when none. */
  next_attempt_after: z.int().nullable(),
});
export type AutoRecharge = z.infer<typeof AutoRechargeSchema>;

/** Where the member's browser goes to save a card: Stripe's hosted Checkout page in setup mode. */
export const SetupSessionSchema = z.object({
  object: z.literal('checkout_session'),
  id: z.string(),
  url: z.string(),
  mode: z.literal('setup'),
});
export type SetupSession = z.infer<typeof SetupSessionSchema>;

export const AutoRechargeMessages = {
  getAutoRecharge: z.object({ org_id: z.string().min(1) }),
  configureAutoRecharge: z.object({
    org_id: z.string().min(1),
    enabled: z.boolean().optional(),
    threshold_micros: z.int().positive().optional(),
    amount_micros: z.int().positive().optional(),
  }),
  /** `return_url`: the console page the member comes back to, card saved or not. */
  startCardSetup: z.object({ org_id: z.string().min(1), return_url: z.url() }),
} as const;
export type AutoRechargeMessage<K extends keyof typeof AutoRechargeMessages> = z.infer<(typeof AutoRechargeMessages)[K]>;

/**
 * Events of an organization's auto-recharge stream (`autorecharge-<org_id>`): every attempt is decided there with
 * the stream's expected revision, so two billing replicas that both see the balance low start one attempt.
 */
export const AutoRechargeEvents = {
  AutoRechargeConfigured: z.object({ org_id: z.string(), enabled: z.boolean(), threshold_micros: z.int().positive(), amount_micros: z.int().positive() }),
  /** The organization's Stripe Customer, created once, which saved cards and off-session payments name. */
  AutoRechargeCustomerCreated: z.object({ org_id: z.string(), customer_id: z.string() }),
  /** `setup_intent.succeeded`: the card saved for off-session payments. */
  AutoRechargePaymentMethodSaved: z.object({ org_id: z.string(), customer_id: z.string(), payment_method_id: z.string(), setup_intent_id: z.string(), saved_at: z.int() }),
  /** One off-session PaymentIntent to create, keyed by `attempt_id` (its idempotency key); the only one until it settles. */
  AutoRechargeStarted: z.object({ org_id: z.string(), attempt_id: z.string(), amount_micros: z.int().positive(), available_micros: z.int(), created: z.int() }),
  AutoRechargeSucceeded: z.object({ org_id: z.string(), attempt_id: z.string(), payment_id: z.string(), settled_at: z.int() }),
  AutoRechargeFailed: z.object({ org_id: z.string(), attempt_id: z.string(), payment_id: z.string().nullable(), message: z.string(), settled_at: z.int() }),
  /** Turned itself off after too many failures in a row; the member turns it on again. */
  AutoRechargeDisabled: z.object({ org_id: z.string(), reason: z.string(), disabled_at: z.int() }),
} as const;
