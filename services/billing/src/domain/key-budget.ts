import { type BudgetPeriod, DomainError, type KeyBudgetLimits, NO_KEY_BUDGET } from '@oc/contracts';

/**
 * What one API key has spent, as the account decides its reservations: per period, what was captured plus what is
 * still held, in micro-USD. A period is the UTC day or calendar month of the reservation: a hold counts in the day
 * and month it was made, whenever it is captured, and the key's day and month roll over with the first reservation
 * of a later one. A few numbers a key, whatever its history.
 */
export interface KeySpend {
  budget: KeyBudgetLimits;
  /** Days and months since 1970 (UTC) of the periods the figures below are for. */
  day: number;
  month: number;
  dayMicros: number;
  monthMicros: number;
  totalMicros: number;
}

/** The key and periods an open reservation was counted in, so that its settlement gives back what it held there. */
export interface KeyHold {
  keyId: string;
  day: number;
  month: number;
}

export const utcDay = (unixSeconds: number) => Math.floor(unixSeconds / 86_400);
export function utcMonth(unixSeconds: number) {
  const date = new Date(unixSeconds * 1000);
  return date.getUTCFullYear() * 12 + date.getUTCMonth();
}

const unspent = (budget: KeyBudgetLimits = NO_KEY_BUDGET): KeySpend => ({ budget, day: 0, month: 0, dayMicros: 0, monthMicros: 0, totalMicros: 0 });

/** A key's figures as of the periods of `now`. */
export function spendAt(spend: KeySpend | undefined, day: number, month: number) {
  if (!spend) return { daily: 0, monthly: 0, total: 0 };
  return { daily: spend.day === day ? spend.dayMicros : 0, monthly: spend.month === month ? spend.monthMicros : 0, total: spend.totalMicros };
}

/** Refuses a reservation that would take the key's spend in any period over its budget (equal to it is allowed). */
export function checkKeyBudget(keys: Map<string, KeySpend>, keyId: string, amountMicros: number, now: number) {
  const spend = keys.get(keyId);
  if (!spend) return;
  const used = spendAt(spend, utcDay(now), utcMonth(now));
  for (const period of ['daily', 'monthly', 'total'] as const satisfies readonly BudgetPeriod[]) {
    const limit = spend.budget[period];
    if (limit !== null && used[period] + amountMicros > limit) {
      throw new DomainError({ kind: 'KeyBudgetExceeded', keyId, period, limitMicros: limit, leftMicros: limit - used[period], requiredMicros: amountMicros });
    }
  }
}

/** Counts a new hold in its key's periods, rolling them over first; in place (see the account's evolve). */
export function holdForKey(keys: Map<string, KeySpend>, keyId: string, amountMicros: number, reservedAt: number): KeyHold {
  const day = utcDay(reservedAt);
  const month = utcMonth(reservedAt);
  let spend = keys.get(keyId);
  if (!spend) keys.set(keyId, (spend = unspent()));
  if (day > spend.day) {
    spend.day = day;
    spend.dayMicros = 0;
  }
  if (month > spend.month) {
    spend.month = month;
    spend.monthMicros = 0;
  }
  // A clock behind the key's periods (another replica's) counts the hold in them: never less than was held.
  const hold = { keyId, day: Math.max(day, spend.day), month: Math.max(month, spend.month) };
  spend.dayMicros += amountMicros;
  spend.monthMicros += amountMicros;
  spend.totalMicros += amountMicros;
  return hold;
}

/** Gives back the part of a hold that was not captured (all of it for a release or expiry), in the periods still current. */
export function freeForKey(keys: Map<string, KeySpend>, hold: KeyHold, freedMicros: number) {
  const spend = keys.get(hold.keyId);
  if (!spend || freedMicros === 0) return;
  if (spend.day === hold.day) spend.dayMicros -= freedMicros;
  if (spend.month === hold.month) spend.monthMicros -= freedMicros;
  spend.totalMicros -= freedMicros;
}

/** A key's budget as it is after a change: a period left undefined keeps its limit. */
export function changedBudget(current: KeyBudgetLimits, change: Partial<Record<BudgetPeriod, number | null | undefined>>): KeyBudgetLimits {
  return {
    daily: change.daily === undefined ? current.daily : change.daily,
    monthly: change.monthly === undefined ? current.monthly : change.monthly,
    total: change.total === undefined ? current.total : change.total,
  };
}

export function setKeyBudget(keys: Map<string, KeySpend>, keyId: string, budget: KeyBudgetLimits) {
  const spend = keys.get(keyId);
  if (spend) spend.budget = budget;
  else keys.set(keyId, unspent(budget));
}
