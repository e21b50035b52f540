import { z } from 'zod';

// An organization's billing alerts: a monthly budget with alert thresholds, and a low-balance amount. Kept apart
// from billing.ts, which spreads these events into BillingEvents: this file imports nothing of billing's.

/** Percentages of the monthly budget at which `billing.budget_threshold` is sent, unless the member chooses others. */
export const DEFAULT_BUDGET_THRESHOLDS = [50, 80, 100] as const;

/** A USD amount micro-dollars hold exactly, or null for none. */
const UsdOrNull = z
  .number()
  .positive()
  .max(1_000_000)
  .refine((usd) => Math.abs(Math.round(usd * 1e6) - usd * 1e6) < 1e-3, 'at most 6 decimal places')
  .nullable();

/**
 * `PATCH /admin/v1/organizations/{org}/alerts` and `PATCH /console/v1/organization/alerts`: any subset; null turns
 * a budget or low-balance alert off. Thresholds are whole percentages, kept sorted and without repeats.
 */
export const UpdateOrganizationAlertsBody = z
  .strictObject({
    monthly_budget: UsdOrNull.optional(),
    budget_thresholds: z
      .array(z.int().min(1).max(1000))
      .min(1)
      .max(10)
      .refine((ts) => new Set(ts).size === ts.length, 'each threshold once')
      .transform((ts) => [...ts].sort((a, b) => a - b))
      .optional(),
    low_balance: UsdOrNull.optional(),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'give at least one of monthly_budget, budget_thresholds, low_balance' });

export const OrganizationAlertsValidationCodes = {
  monthly_budget: 'invalid_monthly_budget',
  budget_thresholds: 'invalid_budget_thresholds',
  low_balance: 'invalid_low_balance',
};

/** As shown in the organization object (USD). */
export const OrganizationAlertsSchema = z.object({
  /** USD per UTC calendar month; null: no budget. An alert, not a limit: work is not refused past it. */
  monthly_budget: z.number().nullable(),
  /** Percentages of the monthly budget. */
  budget_thresholds: z.array(z.int()),
  /** `balance.low` is sent when the balance falls below this (USD); null: never. */
  low_balance: z.number().nullable(),
});
export type OrganizationAlerts = z.infer<typeof OrganizationAlertsSchema>;

/** Billing's subject for them (apart from `Subjects.billing`, so that this feature's files stay its own). */
export const BillingAlertSubjects = { updateOrganizationAlerts: 'billing.organizations.update_alerts' } as const;

export const BillingAlertMessages = {
  updateOrganizationAlerts: z.object({
    org_id: z.string().min(1),
    monthly_budget_micros: z.int().positive().nullable().optional(),
    budget_thresholds: z.array(z.int().min(1).max(1000)).min(1).max(10).optional(),
    low_balance_micros: z.int().positive().nullable().optional(),
  }),
} as const;
export type BillingAlertMessage<K extends keyof typeof BillingAlertMessages> = z.infer<(typeof BillingAlertMessages)[K]>;

/**
 * Events of an organization's alert stream (`billingalerts-<org_id>`): its settings, and each alert decided once
 * there, with the stream's expected revision, however often and wherever the account's events are handled.
 */
export const BillingAlertEvents = {
  /** The settings after the change, every one stated. */
  OrganizationAlertsChanged: z.object({
    org_id: z.string(),
    monthly_budget_micros: z.int().positive().nullable(),
    budget_thresholds: z.array(z.int()),
    low_balance_micros: z.int().positive().nullable(),
  }),
  /** Captured spend in the UTC month `month` (`YYYY-MM`) reached `threshold` percent of the budget. */
  BudgetThresholdCrossed: z.object({
    org_id: z.string(),
    month: z.string(),
    threshold: z.int(),
    monthly_budget_micros: z.int().positive(),
    spent_micros: z.int().nonnegative(),
    /** Unix seconds. */
    crossed_at: z.int(),
  }),
  /** The balance fell below the low-balance amount; not sent again until it is back at or above it. */
  BalanceLow: z.object({
    org_id: z.string(),
    balance_micros: z.int(),
    low_balance_micros: z.int().positive(),
    at: z.int(),
  }),
  /** The balance is back at or above the amount (or the alert was turned off or changed): the next fall alerts again. */
  BalanceRestored: z.object({ org_id: z.string(), balance_micros: z.int(), at: z.int() }),
  /** A top-up's outcome, announced once per payment (`billing.payment_succeeded` or `billing.payment_failed`). */
  PaymentOutcomeNotified: z.object({
    org_id: z.string(),
    payment_id: z.string(),
    outcome: z.enum(['succeeded', 'failed']),
    amount_micros: z.int().positive(),
    at: z.int(),
  }),
} as const;

// ---------- What a webhook receiver gets for the billing events ----------

export const BudgetThresholdDataSchema = z.object({
  object: z.literal('budget_alert'),
  organization_id: z.string(),
  /** UTC calendar month, `YYYY-MM`. */
  month: z.string(),
  /** Percentage of the monthly budget reached. */
  threshold: z.int(),
  monthly_budget: z.number(),
  /** Captured spend of the month when the threshold was crossed, USD. */
  spent: z.number(),
  currency: z.literal('usd'),
});

export const BalanceLowDataSchema = z.object({
  object: z.literal('balance_alert'),
  organization_id: z.string(),
  /** The balance (credited minus charged) when it fell below the amount, USD. */
  balance: z.number(),
  low_balance: z.number(),
  currency: z.literal('usd'),
});

export const PaymentEventDataSchema = z.object({
  object: z.literal('payment'),
  /** Stripe's PaymentIntent id (`pi_…`). */
  id: z.string(),
  organization_id: z.string(),
  amount: z.number(),
  currency: z.literal('usd'),
});
