import { DomainError, toApiError } from '@oc/contracts';
import { deciderSpec } from '@oc/eventstore/testing';
import { describe, expect, it } from 'vitest';
import { accountDecider, type AccountEvent, availableMicros } from '../src/domain/account';
import { accountEntries, paymentDecider, type PaymentEvent } from '../src/domain/payment';

const spec = deciderSpec(paymentDecider);
const payment_id = 'pi_1';
const org_id = 'org_1';
const NOW = 1_000;
const completed: PaymentEvent = {
  type: 'TopUpCheckoutCompleted',
  data: { payment_id, org_id, checkout_session: 'cs_1', amount_micros: 20_000_000, created: NOW },
};
const paid: PaymentEvent = { type: 'TopUpPaid', data: { payment_id, paid_at: NOW } };
const checkout = (payment: 'paid' | 'pending' | 'failed', now = NOW) =>
  ({ type: 'RecordCheckout', paymentId: payment_id, orgId: org_id, sessionId: 'cs_1', amountMicros: 20_000_000, payment, now }) as const;
const refund = (total: number) => ({ type: 'RecordRefund', paymentId: payment_id, refundedTotalMicros: total, receiptUrl: null, now: NOW }) as const;
const refunded = (amount_micros: number, refunded_total_micros: number): PaymentEvent => ({
  type: 'TopUpRefunded',
  data: { payment_id, amount_micros, refunded_total_micros, receipt_url: null, created: NOW },
});

const fold = (events: PaymentEvent[]) => events.reduce(paymentDecider.evolve, paymentDecider.initialState());

describe('payment decider (one Stripe payment)', () => {
  it('records a paid completion once, however often it is delivered', () => {
    expect(spec.given([]).when(checkout('paid'))).toEqual({ events: [completed, paid] });
    expect(spec.given([completed, paid]).when(checkout('paid'))).toEqual({ events: [] });
  });

  it('waits for the async payment of an unpaid completion, in either order of delivery', () => {
    expect(spec.given([]).when(checkout('pending'))).toEqual({ events: [completed] });
    expect(spec.given([completed]).when(checkout('paid', NOW + 60))).toEqual({ events: [{ type: 'TopUpPaid', data: { payment_id, paid_at: NOW + 60 } }] });
    // async_payment_succeeded first, then the (unpaid) completion: nothing more.
    expect(spec.given([completed, paid]).when(checkout('pending'))).toEqual({ events: [] });
    expect(accountEntries(payment_id, fold([completed]))).toBeNull();
  });

  it('records a failed async payment once, owing nothing, and never after the payment succeeded', () => {
    const failed: PaymentEvent = { type: 'TopUpPaymentFailed', data: { payment_id, failed_at: NOW + 60 } };
    expect(spec.given([completed]).when(checkout('failed', NOW + 60))).toEqual({ events: [failed] });
    expect(spec.given([completed, failed]).when(checkout('failed', NOW + 90))).toEqual({ events: [] });
    expect(spec.given([completed, paid]).when(checkout('failed'))).toEqual({ events: [] });
    expect(accountEntries(payment_id, fold([completed, failed]))).toBeNull();
  });

  it('records each refund by its cumulative total: an older delivery after a newer one adds nothing', () => {
    expect(spec.given([completed, paid]).when(refund(5_000_000))).toEqual({ events: [refunded(5_000_000, 5_000_000)] });
    expect(spec.given([completed, paid, refunded(5_000_000, 5_000_000)]).when(refund(8_000_000))).toEqual({ events: [refunded(3_000_000, 8_000_000)] });
    expect(spec.given([completed, paid, refunded(8_000_000, 8_000_000)]).when(refund(5_000_000))).toEqual({ events: [] });
  });

  it('holds a dispute once', () => {
    const dispute = { type: 'RecordDispute', paymentId: payment_id, disputeId: 'dp_1', amountMicros: 20_000_000, now: NOW } as const;
    const disputed: PaymentEvent = { type: 'TopUpDisputed', data: { payment_id, dispute_id: 'dp_1', amount_micros: 20_000_000, created: NOW } };
    expect(spec.given([completed, paid]).when(dispute)).toEqual({ events: [disputed] });
    expect(spec.given([completed, paid, disputed]).when(dispute)).toEqual({ events: [] });
  });

  it('owes the account a credit once paid, then each refund and dispute, each named once', () => {
    // A refund delivered before the completion waits for it.
    expect(accountEntries(payment_id, fold([refunded(5_000_000, 5_000_000)]))).toBeNull();
    expect(accountEntries(payment_id, fold([refunded(5_000_000, 5_000_000), completed, paid]))).toEqual({
      orgId: org_id,
      entries: [
        { kind: 'credit', entryId: 'pi_1/paid', amountMicros: 20_000_000 },
        { kind: 'refund', entryId: 'pi_1/refund/5000000', amountMicros: 5_000_000 },
      ],
    });
  });
});

describe('account decider: top-ups', () => {
  const account = deciderSpec(accountDecider);
  const created: AccountEvent = { type: 'OrganizationCreated', data: { org_id, name: 'Acme', tier: 'free', created: 1 } };
  const credit = { type: 'CreditTopUp', orgId: org_id, entryId: 'pi_1/paid', paymentId: payment_id, amountMicros: 20_000_000, description: 'top-up' } as const;
  const creditedEvent: AccountEvent = {
    type: 'TopUpCredited',
    data: { org_id, entry_id: 'pi_1/paid', payment_id, amount_micros: 20_000_000, description: 'top-up' },
  };
  const reverse = {
    type: 'ReverseTopUp',
    orgId: org_id,
    entryId: 'pi_1/dispute/dp_1',
    paymentId: payment_id,
    reason: 'dispute',
    amountMicros: 20_000_000,
    description: 'disputed',
  } as const;
  const reversedEvent: AccountEvent = {
    type: 'TopUpReversed',
    data: { org_id, entry_id: 'pi_1/dispute/dp_1', payment_id, reason: 'dispute', amount_micros: 20_000_000, description: 'disputed' },
  };
  const spent: AccountEvent[] = [
    { type: 'FundsReserved', data: { org_id, reservation_id: 'r1', amount_micros: 15_000_000, description: 'video', expires_at: 5_000, reserved_at: NOW } },
    { type: 'ReservationCaptured', data: { org_id, reservation_id: 'r1', amount_micros: 15_000_000, released_micros: 0, settled_at: NOW } },
  ];

  it('credits an entry once', () => {
    expect(account.given([created]).when(credit)).toEqual({ events: [creditedEvent] });
    expect(account.given([created, creditedEvent]).when(credit)).toEqual({ events: [] });
  });

  it('remembers the entries it applied across a snapshot, so a redelivery after a reload credits nothing', () => {
    const state = [created, creditedEvent].reduce(accountDecider.evolve, accountDecider.initialState());
    const { snapshot } = accountDecider;
    const reloaded = snapshot.decode(JSON.parse(JSON.stringify(snapshot.encode(state))));
    expect(accountDecider.decide(credit, reloaded)).toEqual([]);
    expect(availableMicros(reloaded)).toBe(20_000_000);
  });

  it('debits a dispute after spend below zero, and then refuses every reservation with 402 while open ones still capture', () => {
    const open: AccountEvent = {
      type: 'FundsReserved',
      data: { org_id, reservation_id: 'r2', amount_micros: 2_000_000, description: 'chat', expires_at: 5_000, reserved_at: NOW },
    };
    const history = [created, creditedEvent, ...spent, open];
    expect(account.given(history).when(reverse)).toEqual({ events: [reversedEvent] });
    expect(account.given([...history, reversedEvent]).when(reverse)).toEqual({ events: [] });
    const inDebt = [...history, reversedEvent].reduce(accountDecider.evolve, accountDecider.initialState());
    // 20 credited, 15 spent, 20 held back, 2 reserved: 17 USD owed.
    expect(availableMicros(inDebt)).toBe(-17_000_000);
    const refused = account
      .given([...history, reversedEvent])
      .when({ type: 'ReserveFunds', orgId: org_id, reservationId: 'r3', amountMicros: 1, description: 'chat', expiresAt: 5_000, now: NOW });
    if (!('error' in refused)) throw new Error('expected a refusal');
    expect(refused.error).toBeInstanceOf(DomainError);
    expect(toApiError(refused.error).status).toBe(402);
    expect(
      account.given([...history, reversedEvent]).when({ type: 'CaptureReservation', orgId: org_id, reservationId: 'r2', amountMicros: 1_500_000, now: NOW }),
    ).toMatchObject({ events: [{ type: 'ReservationCaptured' }] });
  });
});
