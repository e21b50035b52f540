import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { alertDecider, type AlertEvent } from '../src/domain/alerts';

const spec = deciderSpec(alertDecider);
const org_id = 'org_1';
const NOW = 1_000;
const USD = 1_000_000;

const configured = (budgetUsd: number | null, lowUsd: number | null = null, thresholds = [50, 80, 100]): AlertEvent => ({
  type: 'OrganizationAlertsChanged',
  data: {
    org_id,
    monthly_budget_micros: budgetUsd === null ? null : budgetUsd * USD,
    budget_thresholds: thresholds,
    low_balance_micros: lowUsd === null ? null : lowUsd * USD,
  },
});
const observe = (month: string, spentUsd: number, balanceUsd = 1_000) =>
  ({ type: 'ObserveAccount', orgId: org_id, month, spentMicros: spentUsd * USD, balanceMicros: balanceUsd * USD, now: NOW }) as const;
const crossed = (month: string, threshold: number, spentUsd: number, budgetUsd = 100): AlertEvent => ({
  type: 'BudgetThresholdCrossed',
  data: { org_id, month, threshold, monthly_budget_micros: budgetUsd * USD, spent_micros: spentUsd * USD, crossed_at: NOW },
});
const low = (balanceUsd: number, lowUsd: number): AlertEvent => ({
  type: 'BalanceLow',
  data: { org_id, balance_micros: balanceUsd * USD, low_balance_micros: lowUsd * USD, at: NOW },
});
const restored = (balanceUsd: number): AlertEvent => ({ type: 'BalanceRestored', data: { org_id, balance_micros: balanceUsd * USD, at: NOW } });

describe('alert decider (an organization’s budget and balance alerts)', () => {
  it('fires both 50% and 80% once when one capture crosses them together, and nothing on a repeat', () => {
    expect(spec.given([configured(100)]).when(observe('2026-12', 85))).toEqual({
      events: [crossed('2026-12', 50, 85), crossed('2026-12', 80, 85)],
    });
    expect(spec.given([configured(100), crossed('2026-12', 50, 85), crossed('2026-12', 80, 85)]).when(observe('2026-12', 85))).toEqual({ events: [] });
    expect(spec.given([configured(100), crossed('2026-12', 50, 85), crossed('2026-12', 80, 85)]).when(observe('2026-12', 99.99))).toEqual({ events: [] });
  });

  it('fires a threshold at exactly its share of the budget, not a micro-dollar before', () => {
    expect(spec.given([configured(100)]).when({ ...observe('2026-12', 0), spentMicros: 50 * USD - 1 })).toEqual({ events: [] });
    expect(spec.given([configured(100)]).when(observe('2026-12', 50))).toEqual({ events: [crossed('2026-12', 50, 50)] });
  });

  it('starts again in a new UTC month, and ignores a late capture of a month already over', () => {
    const december = [configured(100), crossed('2026-12', 50, 60)];
    expect(spec.given(december).when(observe('2027-01', 55))).toEqual({ events: [crossed('2027-01', 50, 55)] });
    expect(spec.given([...december, crossed('2027-01', 50, 55)]).when(observe('2026-12', 90))).toEqual({ events: [] });
  });

  it('alerts on nothing without a budget, and on the thresholds the member chose', () => {
    expect(spec.given([]).when(observe('2026-12', 1_000_000))).toEqual({ events: [] });
    expect(spec.given([configured(10, null, [25])]).when(observe('2026-12', 9))).toEqual({ events: [crossed('2026-12', 25, 9, 10)] });
  });

  it('fires balance.low once below the amount, re-arms when the balance is back at it, and fires again on the next fall', () => {
    const given = [configured(null, 5)];
    expect(spec.given(given).when(observe('2026-12', 0, 4))).toEqual({ events: [low(4, 5)] });
    expect(spec.given([...given, low(4, 5)]).when(observe('2026-12', 0, 3))).toEqual({ events: [] });
    expect(spec.given([...given, low(4, 5)]).when(observe('2026-12', 0, 5))).toEqual({ events: [restored(5)] });
    expect(spec.given([...given, low(4, 5), restored(5)]).when(observe('2026-12', 0, 4.5))).toEqual({ events: [low(4.5, 5)] });
  });

  it('tells a balance still below a new low-balance amount again', () => {
    expect(spec.given([configured(null, 5), low(4, 5), configured(null, 3)]).when(observe('2026-12', 0, 2))).toEqual({ events: [low(2, 3)] });
  });

  it('records settings only when they change', () => {
    expect(spec.given([]).when({ type: 'ConfigureAlerts', orgId: org_id, monthlyBudgetMicros: 100 * USD })).toEqual({ events: [configured(100)] });
    expect(spec.given([configured(100)]).when({ type: 'ConfigureAlerts', orgId: org_id, thresholds: [50, 80, 100] })).toEqual({ events: [] });
  });

  it('announces a payment’s outcome once', () => {
    const notify = { type: 'NotifyPayment', orgId: org_id, paymentId: 'pi_1', outcome: 'succeeded', amountMicros: 20 * USD, now: NOW } as const;
    const notified: AlertEvent = {
      type: 'PaymentOutcomeNotified',
      data: { org_id, payment_id: 'pi_1', outcome: 'succeeded', amount_micros: 20 * USD, at: NOW },
    };
    expect(spec.given([]).when(notify)).toEqual({ events: [notified] });
    expect(spec.given([notified]).when(notify)).toEqual({ events: [] });
  });
});
