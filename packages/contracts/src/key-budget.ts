import { z } from 'zod';
import { ApiError } from './errors';
import { formatUsd, usdToMicros } from './money';

/** The periods a key's budget may limit: the UTC day, the UTC calendar month, and all time. */
export const BUDGET_PERIODS = ['daily', 'monthly', 'total'] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];

const exactMicros = (usd: number, ctx: z.RefinementCtx) => {
  try {
    return usdToMicros(usd);
  } catch (error) {
    ctx.addIssue({ code: 'custom', message: (error as Error).message });
    return z.NEVER;
  }
};

/** A limit in USD at the API edge (at most 6 decimals), null for none; micro-dollars once parsed. */
const LimitUsd = z.number().positive().max(1_000_000_000).transform(exactMicros).nullable().optional();

/**
 * A key's budget as a request states it, in USD: each period's limit, null to remove it, absent to leave it as it
 * is (a new key: no limit). Parsed into micro-dollars (`KeyBudgetMicros`), as billing is asked it.
 */
export const KeyBudgetBody = z.strictObject({ daily: LimitUsd, monthly: LimitUsd, total: LimitUsd });

const LimitMicros = z.int().positive().nullable().optional();
export const KeyBudgetMicrosSchema = z.object({ daily: LimitMicros, monthly: LimitMicros, total: LimitMicros });
export type KeyBudgetMicros = z.infer<typeof KeyBudgetMicrosSchema>;

/** Every period stated: its limit in micro-dollars, or null. */
export type KeyBudgetLimits = Record<BudgetPeriod, number | null>;
export const NO_KEY_BUDGET: KeyBudgetLimits = { daily: null, monthly: null, total: null };

/** The key object's budget and spend, in USD: a period's limit (null: none) and what the key spent in it. */
export const KeyBudgetSchema = z.object({ daily: z.number().nullable(), monthly: z.number().nullable(), total: z.number().nullable() });
export const KeySpendSchema = z.object({ today: z.number(), this_month: z.number(), total: z.number() });

const PERIOD_WORDS: Record<BudgetPeriod, string> = { daily: 'daily budget', monthly: 'monthly budget', total: 'total budget' };
const PERIOD_SPAN: Record<BudgetPeriod, string> = { daily: 'today (UTC)', monthly: 'this month (UTC)', total: 'in all' };

/** 402 for a reservation that would take a key's spend in a period (captured plus held) over its budget. */
export const keyBudgetExceeded = (keyId: string, period: BudgetPeriod, limitMicros: number, leftMicros: number, requiredMicros: number) =>
  new ApiError({
    status: 402,
    type: 'insufficient_quota',
    code: 'key_budget_exceeded',
    message:
      `This request would exceed the ${PERIOD_WORDS[period]} of the API key '${keyId}' (${formatUsd(limitMicros)}): it requires ` +
      `${formatUsd(requiredMicros)} and ${formatUsd(Math.max(0, leftMicros))} is left ${PERIOD_SPAN[period]}.`,
  });
