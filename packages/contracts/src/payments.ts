import { z } from 'zod';

// Top-ups paid with Stripe. Kept apart from billing.ts, which spreads these events into BillingEvents: this file
// imports nothing of billing's, so the two load in either order.

/** `POST /console/v1/top-ups`: USD in whole cents, within the operator's bounds (TOPUP_MIN_USD, TOPUP_MAX_USD). */
export const TopUpBody = z.strictObject({
  amount: z
    .number()
    .positive()
    .max(1_000_000)
    .refine((usd) => Math.abs(Math.round(usd * 100) - usd * 100) < 1e-6, 'at most 2 decimal places (whole cents)'),
});

/** Where the member's browser goes to pay: Stripe's hosted Checkout page. */
export const CheckoutSessionSchema = z.object({
  object: z.literal('checkout_session'),
  /** Stripe's Checkout Session id (`cs_…`). */
  id: z.string(),
  url: z.string(),
  amount: z.number(),
  currency: z.literal('usd'),
});
export type CheckoutSession = z.infer<typeof CheckoutSessionSchema>;

/** `failed`: the async payment method (a bank debit) did not go through; nothing was credited. */
export const PaymentStatus = z.enum(['pending', 'failed', 'paid', 'partially_refunded', 'refunded', 'disputed']);

/** One top-up as the member sees it: what was paid, what Stripe took back since, and where its receipt is. */
export const PaymentSchema = z.object({
  /** Stripe's PaymentIntent id (`pi_…`), which its charges, refunds and disputes name too. */
  id: z.string(),
  object: z.literal('payment'),
  status: PaymentStatus,
  /** USD credited (or to be credited, while pending). */
  amount: z.number(),
  refunded: z.number(),
  disputed: z.number(),
  currency: z.literal('usd'),
  checkout_session: z.string().nullable(),
  /** Charged off-session to the saved card by auto-recharge (not paid on Checkout). */
  auto_recharge: z.boolean(),
  receipt_url: z.string().nullable(),
  refunds: z.array(z.object({ amount: z.number(), created: z.int() })),
  disputes: z.array(z.object({ id: z.string(), amount: z.number(), created: z.int() })),
  created: z.int(),
  paid_at: z.int().nullable(),
});
export type Payment = z.infer<typeof PaymentSchema>;

export const PaymentMessages = {
  /** `return_url`: the console page the member comes back to, paid or not. */
  startTopUp: z.object({ org_id: z.string().min(1), amount_micros: z.int().positive(), return_url: z.url() }),
  /** A Stripe webhook delivery as received: the raw body (signed as it is) and its `Stripe-Signature` header. */
  stripeWebhook: z.object({ payload: z.string().max(512 * 1024), signature: z.string().max(4096) }),
  listPayments: z.object({ org_id: z.string().min(1), limit: z.coerce.number().int().min(1).max(100).default(20), after: z.string().max(200).optional() }),
} as const;
export type PaymentMessage<K extends keyof typeof PaymentMessages> = z.infer<(typeof PaymentMessages)[K]>;

/** What billing made of a Stripe delivery: handled, or acknowledged without effect (and why). */
export const StripeWebhookReplySchema = z.object({
  received: z.literal(true),
  outcome: z.enum(['applied', 'repeat', 'ignored']),
  reason: z.string().optional(),
});
export type StripeWebhookReply = z.infer<typeof StripeWebhookReplySchema>;

/**
 * Events of a top-up's stream (`payment-<payment_intent>`), one stream per Stripe payment so that every
 * delivery about it, in any order and at once, is decided against what was already recorded; and the two
 * account events that apply its money to the organization's balance, each once (by `entry_id`).
 */
export const PaymentEvents = {
  /** Checkout finished for this payment: whose it is and what it is for; `paid` false while an async method settles. */
  TopUpCheckoutCompleted: z.object({
    payment_id: z.string(),
    org_id: z.string(),
    /** Null for an auto-recharge: an off-session PaymentIntent, no Checkout. */
    checkout_session: z.string().nullable(),
    amount_micros: z.int().positive(),
    created: z.int(),
  }),
  TopUpPaid: z.object({ payment_id: z.string(), paid_at: z.int() }),
  /** `checkout.session.async_payment_failed`: the money never came; nothing is owed. */
  TopUpPaymentFailed: z.object({ payment_id: z.string(), failed_at: z.int() }),
  /** `refunded_total_micros`: Stripe's `amount_refunded`, cumulative; this event is the part not recorded before. */
  TopUpRefunded: z.object({
    payment_id: z.string(),
    amount_micros: z.int().positive(),
    refunded_total_micros: z.int().positive(),
    receipt_url: z.string().nullable(),
    created: z.int(),
  }),
  TopUpDisputed: z.object({ payment_id: z.string(), dispute_id: z.string(), amount_micros: z.int().positive(), created: z.int() }),
  /** Stripe's receipt for the charge (`charge.succeeded`'s `receipt_url`), for the member's history. */
  TopUpReceiptIssued: z.object({ payment_id: z.string(), receipt_url: z.string() }),
  /** On the account: a paid top-up's amount added to the balance. */
  TopUpCredited: z.object({ org_id: z.string(), entry_id: z.string(), payment_id: z.string(), amount_micros: z.int().positive(), description: z.string() }),
  /**
   * On the account: a refund debited, or a dispute's amount held, from the balance. The one movement that may
   * take the balance below zero (a debt): the money already left with Stripe.
   */
  TopUpReversed: z.object({
    org_id: z.string(),
    entry_id: z.string(),
    payment_id: z.string(),
    reason: z.enum(['refund', 'dispute']),
    amount_micros: z.int().positive(),
    description: z.string(),
  }),
} as const;
