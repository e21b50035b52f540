import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { attemptId, autoRechargeDecider, type AutoRechargeEvent } from '../src/domain/auto-recharge';

const spec = deciderSpec(autoRechargeDecider);
const org_id = 'org_1';
const NOW = 1_000_000;
const policy = { cooldownSeconds: 600, maxFailures: 3 };

const configured = (enabled = true): AutoRechargeEvent => ({
  type: 'AutoRechargeConfigured',
  data: { org_id, enabled, threshold_micros: 5_000_000, amount_micros: 20_000_000 },
});
const cardSaved: AutoRechargeEvent = {
  type: 'AutoRechargePaymentMethodSaved',
  data: { org_id, customer_id: 'cus_1', payment_method_id: 'pm_1', setup_intent_id: 'seti_1', saved_at: NOW - 100 },
};
const started = (n: number, created: number, available_micros = 4_000_000): AutoRechargeEvent => ({
  type: 'AutoRechargeStarted',
  data: { org_id, attempt_id: attemptId(org_id, n), amount_micros: 20_000_000, available_micros, created },
});
const failed = (n: number, at: number): AutoRechargeEvent => ({
  type: 'AutoRechargeFailed',
  data: { org_id, attempt_id: attemptId(org_id, n), payment_id: `pi_${n}`, message: 'Your card was declined.', settled_at: at },
});
const succeeded = (n: number, at: number): AutoRechargeEvent => ({
  type: 'AutoRechargeSucceeded',
  data: { org_id, attempt_id: attemptId(org_id, n), payment_id: `pi_${n}`, settled_at: at },
});
const observe = (availableMicros: number, now = NOW) => ({ type: 'Observe', orgId: org_id, availableMicros, now, policy }) as const;
const settle = (n: number, outcome: 'succeeded' | 'failed', now = NOW) =>
  ({ type: 'Settle', orgId: org_id, attemptId: attemptId(org_id, n), paymentId: `pi_${n}`, outcome, message: 'Your card was declined.', now, policy }) as const;

describe('auto-recharge decider (one organization)', () => {
  it('starts one attempt for the amount when available funds fall below the threshold', () => {
    expect(spec.given([configured(), cardSaved]).when(observe(4_000_000))).toEqual({ events: [started(1, NOW)] });
  });

  it('does nothing at or above the threshold, when off, or without a saved card', () => {
    expect(spec.given([configured(), cardSaved]).when(observe(5_000_000))).toEqual({ events: [] });
    expect(spec.given([configured(false), cardSaved]).when(observe(0))).toEqual({ events: [] });
    expect(spec.given([configured()]).when(observe(0))).toEqual({ events: [] });
  });

  it('never starts a second attempt while one is pending, however long it takes', () => {
    expect(spec.given([configured(), cardSaved, started(1, NOW)]).when(observe(1_000_000, NOW + 5))).toEqual({ events: [] });
    expect(spec.given([configured(), cardSaved, started(1, NOW)]).when(observe(0, NOW + 86_400))).toEqual({ events: [] });
  });

  it('waits out the cool-down after an attempt before starting the next', () => {
    const history = [configured(), cardSaved, started(1, NOW), succeeded(1, NOW + 2)];
    expect(spec.given(history).when(observe(1_000_000, NOW + 599))).toEqual({ events: [] });
    expect(spec.given(history).when(observe(1_000_000, NOW + 600))).toEqual({ events: [started(2, NOW + 600, 1_000_000)] });
  });

  it('settles an attempt once: a repeated or stale outcome changes nothing', () => {
    expect(spec.given([configured(), cardSaved, started(1, NOW)]).when(settle(1, 'succeeded', NOW + 1))).toEqual({ events: [succeeded(1, NOW + 1)] });
    expect(spec.given([configured(), cardSaved, started(1, NOW), succeeded(1, NOW + 1)]).when(settle(1, 'succeeded', NOW + 2))).toEqual({ events: [] });
    expect(spec.given([configured(), cardSaved, started(1, NOW), succeeded(1, NOW + 1)]).when(settle(1, 'failed', NOW + 2))).toEqual({ events: [] });
    expect(spec.given([configured(), cardSaved, started(2, NOW)]).when(settle(1, 'failed', NOW + 2))).toEqual({ events: [] });
  });

  it('turns itself off after 3 failures in a row, saying why, and counts afresh when turned on again', () => {
    const twoFailed = [configured(), cardSaved, started(1, NOW), failed(1, NOW), started(2, NOW + 600), failed(2, NOW + 600), started(3, NOW + 1200)];
    const decided = spec.given(twoFailed).when(settle(3, 'failed', NOW + 1201));
    if (!('events' in decided)) throw new Error('the third failure was refused');
    const { events } = decided;
    expect(events).toEqual([
      failed(3, NOW + 1201),
      { type: 'AutoRechargeDisabled', data: { org_id, reason: expect.stringContaining('3 failed payments in a row of $20.00'), disabled_at: NOW + 1201 } },
    ]);
    const off = [...twoFailed, ...events];
    expect(spec.given(off).when(observe(0, NOW + 99_999))).toEqual({ events: [] });
    const state = off.reduce(autoRechargeDecider.evolve, autoRechargeDecider.initialState());
    expect(state).toMatchObject({ enabled: false, failures: 3, disabledReason: expect.stringContaining('Your card was declined.') });
    const on = [...off, configured()];
    const again = on.reduce(autoRechargeDecider.evolve, autoRechargeDecider.initialState());
    expect(again).toMatchObject({ enabled: true, failures: 0, disabledReason: null });
    expect(spec.given(on).when(observe(0, NOW + 99_999))).toEqual({ events: [started(4, NOW + 99_999, 0)] });
  });

  it('a success between failures resets the count', () => {
    const history = [configured(), cardSaved, started(1, NOW), failed(1, NOW), started(2, NOW + 600), failed(2, NOW + 600), started(3, NOW + 1200), succeeded(3, NOW + 1200), started(4, NOW + 1800)];
    expect(spec.given(history).when(settle(4, 'failed', NOW + 1801))).toEqual({ events: [failed(4, NOW + 1801)] });
  });

  it('records the Customer once and a saved card once', () => {
    expect(spec.given([]).when({ type: 'RecordCustomer', orgId: org_id, customerId: 'cus_1' })).toEqual({
      events: [{ type: 'AutoRechargeCustomerCreated', data: { org_id, customer_id: 'cus_1' } }],
    });
    expect(spec.given([{ type: 'AutoRechargeCustomerCreated', data: { org_id, customer_id: 'cus_1' } }]).when({ type: 'RecordCustomer', orgId: org_id, customerId: 'cus_2' })).toEqual({
      events: [],
    });
    const save = { type: 'SavePaymentMethod', orgId: org_id, customerId: 'cus_1', paymentMethodId: 'pm_1', setupIntentId: 'seti_1', now: NOW - 100 } as const;
    expect(spec.given([]).when(save)).toEqual({ events: [cardSaved] });
    expect(spec.given([cardSaved]).when(save)).toEqual({ events: [] });
  });
});
