import { type ApiKey, type KeyBudgetMicros, microsToUsd, NO_KEY_BUDGET } from '@oc/contracts';
import { utcDay } from '../projections/billing-projections';
import type { ApiKeyDoc } from '../projections/documents';

const usdOrNull = (micros: number | null) => (micros === null ? null : microsToUsd(micros));

/** A key's budget and captured spend as the API shows them, in USD; a day or month gone by shows 0. */
export function keyBudgetView(doc: ApiKeyDoc, nowMs: number): Pick<ApiKey, 'budget' | 'spend'> {
  const budget = doc.budget ?? NO_KEY_BUDGET;
  const spend = doc.spend;
  const today = utcDay(nowMs);
  return {
    budget: { daily: usdOrNull(budget.daily), monthly: usdOrNull(budget.monthly), total: usdOrNull(budget.total) },
    spend: {
      today: microsToUsd(spend?.day === today ? spend.day_micros : 0),
      this_month: microsToUsd(spend?.month === today.slice(0, 7) ? spend.month_micros : 0),
      total: microsToUsd(spend?.total_micros ?? 0),
    },
  };
}

/** A budget stated in a request that sets at least one limit (a new key's, which starts with none). */
export const setsAnyLimit = (budget: KeyBudgetMicros | undefined) =>
  budget !== undefined && Object.values(budget).some((limit) => limit !== null && limit !== undefined);
