import type { BillingEvent } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import type { CollectionSpec, Projection } from '@oc/readmodel';

/** One top-up as its organization's payment history shows it (id: the PaymentIntent's). */
export interface PaymentDoc {
  _id: string;
  /** Null until the Checkout Session's completion is recorded (a refund may be delivered first); never listed before. */
  org_id: string | null;
  checkout_session: string | null;
  status: 'pending' | 'failed' | 'paid' | 'partially_refunded' | 'refunded' | 'disputed';
  amount_micros: number;
  refunded_micros: number;
  disputed_micros: number;
  paid: boolean;
  failed: boolean;
  receipt_url: string | null;
  refunds: Array<{ amount_micros: number; created: number }>;
  disputes: Array<{ id: string; amount_micros: number; created: number }>;
  created: number;
  paid_at: number | null;
  [key: string]: unknown;
}

export const PaymentCollections = { payments: 'billing_payments' } as const;

/** An organization's payments newest first. */
export const paymentCollections: CollectionSpec[] = [{ name: PaymentCollections.payments, indexes: [['org_id', 'created']] }];

type Stored = StoredEvent & BillingEvent;

const statusOf = (doc: PaymentDoc): PaymentDoc['status'] => {
  if (!doc.paid) return doc.failed ? 'failed' : 'pending';
  if (doc.disputes.length > 0) return 'disputed';
  if (doc.refunded_micros >= doc.amount_micros) return 'refunded';
  return doc.refunded_micros > 0 ? 'partially_refunded' : 'paid';
};

/** The payment history, from the top-ups' own streams (`payment-<payment_intent>`). */
export const paymentsProjection: Projection = {
  name: 'billing-payments',
  canHandle: ['TopUpCheckoutCompleted', 'TopUpPaid', 'TopUpPaymentFailed', 'TopUpRefunded', 'TopUpDisputed', 'TopUpReceiptIssued'],
  async handle(stored, ctx) {
    const event = stored as Stored;
    const payments = ctx.collection<PaymentDoc>(PaymentCollections.payments);
    const id = (event.data as { payment_id: string }).payment_id;
    const doc: PaymentDoc = (await payments.get(id)) ?? {
      _id: id,
      org_id: null,
      checkout_session: null,
      status: 'pending',
      amount_micros: 0,
      refunded_micros: 0,
      disputed_micros: 0,
      paid: false,
      failed: false,
      receipt_url: null,
      refunds: [],
      disputes: [],
      created: 0,
      paid_at: null,
    };
    switch (event.type) {
      case 'TopUpCheckoutCompleted':
        doc.org_id = event.data.org_id;
        doc.checkout_session = event.data.checkout_session;
        doc.amount_micros = event.data.amount_micros;
        doc.created = event.data.created;
        break;
      case 'TopUpPaid':
        doc.paid = true;
        doc.paid_at = event.data.paid_at;
        break;
      case 'TopUpPaymentFailed':
        doc.failed = true;
        break;
      case 'TopUpRefunded':
        doc.refunded_micros = event.data.refunded_total_micros;
        doc.refunds = [...doc.refunds, { amount_micros: event.data.amount_micros, created: event.data.created }];
        doc.receipt_url = event.data.receipt_url ?? doc.receipt_url;
        break;
      case 'TopUpDisputed':
        doc.disputed_micros += event.data.amount_micros;
        doc.disputes = [...doc.disputes, { id: event.data.dispute_id, amount_micros: event.data.amount_micros, created: event.data.created }];
        break;
      case 'TopUpReceiptIssued':
        doc.receipt_url = event.data.receipt_url;
        break;
      default:
        return;
    }
    doc.status = statusOf(doc);
    await payments.put(doc);
  },
};
