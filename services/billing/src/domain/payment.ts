import { BillingStreams, type BillingEvent, streamName } from '@oc/contracts';

/**
 * One top-up paid with Stripe (stream `payment-<payment_intent>`). Stripe delivers each webhook at least once,
 * in any order, sometimes twice at once; every delivery about one payment (its Checkout Session's completion,
 * its async success, its charge's refunds and disputes all name the PaymentIntent) is decided here against what
 * was recorded before, with the stream's expected revision, so each is recorded once whatever the order.
 *
 * What the payment owes the organization's account follows from this state (`accountEntries`), each entry named,
 * so that the account applies it once too (a delivery repeated after a crash between the two appends applies the
 * rest). Refunds and disputes are applied only once the top-up is paid and credited: a refund delivered before
 * the completion waits for it.
 */
export type PaymentEvent = Extract<
  BillingEvent,
  { type: 'TopUpCheckoutCompleted' | 'TopUpPaid' | 'TopUpPaymentFailed' | 'TopUpRefunded' | 'TopUpDisputed' | 'TopUpReceiptIssued' }
>;

export type PaymentCommand =
  /**
   * `checkout.session.completed` (paid, or `pending` while an async method settles), and
   * `checkout.session.async_payment_succeeded` (paid) or `…_failed` (failed); an auto-recharge's
   * `payment_intent.succeeded` or `…payment_failed`, with no Checkout Session (`sessionId` null).
   */
  | { type: 'RecordCheckout'; paymentId: string; orgId: string; sessionId: string | null; amountMicros: number; payment: CheckoutPayment; now: number }
  /** `charge.refunded`: `refundedTotalMicros` is the charge's `amount_refunded`, everything refunded so far. */
  | { type: 'RecordRefund'; paymentId: string; refundedTotalMicros: number; receiptUrl: string | null; now: number }
  | { type: 'RecordDispute'; paymentId: string; disputeId: string; amountMicros: number; now: number }
  /** `charge.succeeded`: where Stripe shows the charge's receipt. */
  | { type: 'RecordReceipt'; paymentId: string; receiptUrl: string };

export type CheckoutPayment = 'paid' | 'pending' | 'failed';

export interface PaymentState {
  checkout: { orgId: string; sessionId: string | null; amountMicros: number } | null;
  paid: boolean;
  failed: boolean;
  /** Each refund recorded, with Stripe's cumulative total after it (which names it). */
  refunds: Array<{ amountMicros: number; totalMicros: number }>;
  disputes: Array<{ disputeId: string; amountMicros: number }>;
  receiptUrl: string | null;
}

export const paymentStream = (paymentId: string) => streamName(BillingStreams.payment, paymentId);

const initialState = (): PaymentState => ({ checkout: null, paid: false, failed: false, refunds: [], disputes: [], receiptUrl: null });

const refundedMicros = (state: PaymentState) => state.refunds.at(-1)?.totalMicros ?? 0;

function decide(command: PaymentCommand, state: PaymentState): PaymentEvent[] {
  const payment_id = command.paymentId;
  switch (command.type) {
    case 'RecordCheckout': {
      const events: PaymentEvent[] = [];
      if (!state.checkout) {
        events.push({
          type: 'TopUpCheckoutCompleted',
          data: { payment_id, org_id: command.orgId, checkout_session: command.sessionId, amount_micros: command.amountMicros, created: command.now },
        });
      }
      if (command.payment === 'paid' && !state.paid) events.push({ type: 'TopUpPaid', data: { payment_id, paid_at: command.now } });
      // Stripe sends one outcome per payment; a failure after the success (which cannot happen) would change nothing.
      if (command.payment === 'failed' && !state.paid && !state.failed) events.push({ type: 'TopUpPaymentFailed', data: { payment_id, failed_at: command.now } });
      return events;
    }
    case 'RecordRefund': {
      // A delivery older than one already recorded (a smaller cumulative total) says nothing new.
      const amount = command.refundedTotalMicros - refundedMicros(state);
      if (amount <= 0) return [];
      return [
        {
          type: 'TopUpRefunded',
          data: { payment_id, amount_micros: amount, refunded_total_micros: command.refundedTotalMicros, receipt_url: command.receiptUrl, created: command.now },
        },
      ];
    }
    case 'RecordDispute':
      if (state.disputes.some((d) => d.disputeId === command.disputeId)) return [];
      return [{ type: 'TopUpDisputed', data: { payment_id, dispute_id: command.disputeId, amount_micros: command.amountMicros, created: command.now } }];
    case 'RecordReceipt':
      if (state.receiptUrl === command.receiptUrl) return [];
      return [{ type: 'TopUpReceiptIssued', data: { payment_id, receipt_url: command.receiptUrl } }];
    default: {
      const never: never = command;
      return never;
    }
  }
}

function evolve(state: PaymentState, event: PaymentEvent): PaymentState {
  switch (event.type) {
    case 'TopUpCheckoutCompleted':
      return { ...state, checkout: { orgId: event.data.org_id, sessionId: event.data.checkout_session, amountMicros: event.data.amount_micros } };
    case 'TopUpPaid':
      return { ...state, paid: true };
    case 'TopUpPaymentFailed':
      return { ...state, failed: true };
    case 'TopUpRefunded':
      return { ...state, refunds: [...state.refunds, { amountMicros: event.data.amount_micros, totalMicros: event.data.refunded_total_micros }] };
    case 'TopUpDisputed':
      return { ...state, disputes: [...state.disputes, { disputeId: event.data.dispute_id, amountMicros: event.data.amount_micros }] };
    case 'TopUpReceiptIssued':
      return { ...state, receiptUrl: event.data.receipt_url };
    default: {
      const never: never = event;
      return never;
    }
  }
}

export const paymentDecider = { decide, evolve, initialState };

/** A movement the payment owes the organization's account, named so that the account applies it once. */
export type AccountEntry =
  | { kind: 'credit'; entryId: string; amountMicros: number }
  | { kind: 'refund' | 'dispute'; entryId: string; amountMicros: number };

/** Everything this payment owes its organization's account so far, in the order it happened; none before it is paid. */
export function accountEntries(paymentId: string, state: PaymentState): { orgId: string; entries: AccountEntry[] } | null {
  if (!state.checkout || !state.paid) return null;
  const entries: AccountEntry[] = [{ kind: 'credit', entryId: `${paymentId}/paid`, amountMicros: state.checkout.amountMicros }];
  for (const r of state.refunds) entries.push({ kind: 'refund', entryId: `${paymentId}/refund/${r.totalMicros}`, amountMicros: r.amountMicros });
  for (const d of state.disputes) entries.push({ kind: 'dispute', entryId: `${paymentId}/dispute/${d.disputeId}`, amountMicros: d.amountMicros });
  return { orgId: state.checkout.orgId, entries };
}
