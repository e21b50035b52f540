import { type BillingEvent, BillingStreams, DEFAULT_BUDGET_THRESHOLDS, streamName } from '@oc/contracts';

/**
 * An organization's billing alerts (stream `billingalerts-<org_id>`): its monthly budget with thresholds, its
 * low-balance amount, and every alert decided against what was sent before. The account's events are observed by
 * a process manager (`application/alerts.ts`) that may see one event twice, or two replicas at once; each alert is
 * decided here, appended with the stream's expected revision, so it is recorded once whatever the repeats.
 *
 * Observations carry figures as they stand (the month's spend, the balance), not changes, so observing one twice
 * decides nothing new. A threshold fires once per UTC month; `balance.low` fires when the balance is below the
 * amount and fires again only after it was back at or above it (or the amount was changed).
 */
export type AlertEvent = Extract<
  BillingEvent,
  { type: 'OrganizationAlertsChanged' | 'BudgetThresholdCrossed' | 'BalanceLow' | 'BalanceRestored' | 'PaymentOutcomeNotified' }
>;

export type AlertCommand =
  | {
      type: 'ConfigureAlerts';
      orgId: string;
      monthlyBudgetMicros?: number | null | undefined;
      thresholds?: number[] | undefined;
      lowBalanceMicros?: number | null | undefined;
    }
  /** `month` (`YYYY-MM`) and its captured spend; the balance (credited minus charged); `now` unix seconds. */
  | { type: 'ObserveAccount'; orgId: string; month: string; spentMicros: number; balanceMicros: number; now: number }
  | { type: 'NotifyPayment'; orgId: string; paymentId: string; outcome: 'succeeded' | 'failed'; amountMicros: number; now: number };

export interface AlertState {
  monthlyBudgetMicros: number | null;
  thresholds: number[];
  lowBalanceMicros: number | null;
  /** The latest month a threshold fired in, and the thresholds fired in it. */
  month: string | null;
  fired: number[];
  /** `balance.low` was sent and the balance has not been back above the amount since. */
  low: boolean;
  /** `<payment_id>/<outcome>` of every payment outcome announced. */
  payments: Record<string, true>;
}

export const alertStream = (orgId: string) => streamName(BillingStreams.alerts, orgId);

const initialState = (): AlertState => ({
  monthlyBudgetMicros: null,
  thresholds: [...DEFAULT_BUDGET_THRESHOLDS],
  lowBalanceMicros: null,
  month: null,
  fired: [],
  low: false,
  payments: {},
});

const sameList = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((x, i) => x === b[i]);

function decide(command: AlertCommand, state: AlertState): AlertEvent[] {
  const org_id = command.orgId;
  switch (command.type) {
    case 'ConfigureAlerts': {
      const next = {
        monthly_budget_micros: command.monthlyBudgetMicros === undefined ? state.monthlyBudgetMicros : command.monthlyBudgetMicros,
        budget_thresholds: command.thresholds ?? state.thresholds,
        low_balance_micros: command.lowBalanceMicros === undefined ? state.lowBalanceMicros : command.lowBalanceMicros,
      };
      const unchanged =
        next.monthly_budget_micros === state.monthlyBudgetMicros &&
        sameList(next.budget_thresholds, state.thresholds) &&
        next.low_balance_micros === state.lowBalanceMicros;
      return unchanged ? [] : [{ type: 'OrganizationAlertsChanged', data: { org_id, ...next } }];
    }
    case 'ObserveAccount': {
      const events: AlertEvent[] = [];
      const budget = state.monthlyBudgetMicros;
      // A month older than one already alerted in is over: its late captures alert nothing.
      if (budget !== null && (state.month === null || command.month >= state.month)) {
        const fired = command.month === state.month ? state.fired : [];
        for (const threshold of state.thresholds) {
          // Integers throughout: spent / budget >= threshold / 100, without rounding.
          if (fired.includes(threshold) || command.spentMicros * 100 < threshold * budget) continue;
          events.push({
            type: 'BudgetThresholdCrossed',
            data: { org_id, month: command.month, threshold, monthly_budget_micros: budget, spent_micros: command.spentMicros, crossed_at: command.now },
          });
        }
      }
      const low = state.lowBalanceMicros;
      if (low !== null && !state.low && command.balanceMicros < low) {
        events.push({ type: 'BalanceLow', data: { org_id, balance_micros: command.balanceMicros, low_balance_micros: low, at: command.now } });
      } else if (state.low && (low === null || command.balanceMicros >= low)) {
        events.push({ type: 'BalanceRestored', data: { org_id, balance_micros: command.balanceMicros, at: command.now } });
      }
      return events;
    }
    case 'NotifyPayment':
      if (state.payments[`${command.paymentId}/${command.outcome}`]) return [];
      return [
        {
          type: 'PaymentOutcomeNotified',
          data: { org_id, payment_id: command.paymentId, outcome: command.outcome, amount_micros: command.amountMicros, at: command.now },
        },
      ];
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: AlertState, event: AlertEvent): AlertState {
  switch (event.type) {
    case 'OrganizationAlertsChanged':
      return {
        ...state,
        monthlyBudgetMicros: event.data.monthly_budget_micros,
        thresholds: event.data.budget_thresholds,
        lowBalanceMicros: event.data.low_balance_micros,
        // A new amount is a new alert: a balance still below it is told again.
        low: state.low && event.data.low_balance_micros === state.lowBalanceMicros,
      };
    case 'BudgetThresholdCrossed':
      return event.data.month === state.month
        ? { ...state, fired: [...state.fired, event.data.threshold] }
        : { ...state, month: event.data.month, fired: [event.data.threshold] };
    case 'BalanceLow':
      return { ...state, low: true };
    case 'BalanceRestored':
      return { ...state, low: false };
    case 'PaymentOutcomeNotified':
      return { ...state, payments: { ...state.payments, [`${event.data.payment_id}/${event.data.outcome}`]: true } };
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const alertDecider = { decide, evolve, initialState };
