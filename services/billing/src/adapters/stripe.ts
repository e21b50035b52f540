import Stripe from 'stripe';
import type { Logger } from 'pino';
import { serviceUnavailable } from '@oc/contracts';
import { type PaymentNotice, type PaymentProvider, SignatureRejected } from '../application/payments';

/** Stripe's own default: a delivery signed longer ago than this is refused (a replay). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

/** One currency: balances are USD. Stripe counts USD in cents. */
const MICROS_PER_CENT = 10_000;

export interface StripeSettings {
  secretKey: string;
  webhookSecret: string;
  /** Another server in Stripe's place (tests): the SDK's protocol, host and port. */
  apiBaseUrl?: string;
}

/**
 * The official SDK behind the payment port; Stripe's types stay in this file. The secret key is handed to the
 * SDK and nowhere else: failures are logged by type, code and request id, never with the request or the key.
 */
export function stripePayments(settings: StripeSettings, logger: Logger): PaymentProvider {
  const base = settings.apiBaseUrl ? new URL(settings.apiBaseUrl) : undefined;
  const stripe = new Stripe(settings.secretKey, {
    maxNetworkRetries: 2,
    timeout: 20_000,
    ...(base
      ? { protocol: base.protocol === 'http:' ? 'http' : 'https', host: base.hostname, port: base.port || (base.protocol === 'http:' ? 80 : 443) }
      : {}),
  });

  return {
    async createCheckoutSession(input) {
      try {
        const session = await stripe.checkout.sessions.create(
          {
            mode: 'payment',
            client_reference_id: input.orgId,
            line_items: [
              {
                quantity: 1,
                price_data: { currency: 'usd', unit_amount: input.amountMicros / MICROS_PER_CENT, product_data: { name: 'Prepaid API credit' } },
              },
            ],
            metadata: { organization_id: input.orgId },
            payment_intent_data: { metadata: { organization_id: input.orgId } },
            success_url: input.successUrl,
            cancel_url: input.cancelUrl,
          },
          // Retries of one request (the SDK's, after a network failure) create one session.
          { idempotencyKey: input.idempotencyKey },
        );
        if (!session.url) throw new Error('Stripe answered a Checkout Session without a url');
        return { id: session.id, url: session.url };
      } catch (err) {
        logStripeError(logger, err, 'Stripe refused or failed to create a Checkout Session');
        throw serviceUnavailable('Stripe could not start the payment just now. Please retry.');
      }
    },

    async createCustomer(input) {
      try {
        const customer = await stripe.customers.create(
          { name: input.name, metadata: { organization_id: input.orgId } },
          // Two replicas (or a retry) creating the organization's Customer get one.
          { idempotencyKey: input.idempotencyKey },
        );
        return customer.id;
      } catch (err) {
        logStripeError(logger, err, 'Stripe refused or failed to create a Customer');
        throw serviceUnavailable('Stripe could not save a card just now. Please retry.');
      }
    },

    async createSetupSession(input) {
      try {
        const session = await stripe.checkout.sessions.create(
          {
            mode: 'setup',
            currency: 'usd',
            customer: input.customerId,
            client_reference_id: input.orgId,
            metadata: { organization_id: input.orgId },
            setup_intent_data: { metadata: { organization_id: input.orgId } },
            success_url: input.successUrl,
            cancel_url: input.cancelUrl,
          },
          { idempotencyKey: input.idempotencyKey },
        );
        if (!session.url) throw new Error('Stripe answered a Checkout Session without a url');
        return { id: session.id, url: session.url };
      } catch (err) {
        logStripeError(logger, err, 'Stripe refused or failed to create a setup Checkout Session');
        throw serviceUnavailable('Stripe could not start saving a card just now. Please retry.');
      }
    },

    async chargeOffSession(input) {
      try {
        const intent = await stripe.paymentIntents.create(
          {
            amount: input.amountMicros / MICROS_PER_CENT,
            currency: 'usd',
            customer: input.customerId,
            payment_method: input.paymentMethodId,
            off_session: true,
            confirm: true,
            description: 'Prepaid API credit (auto-recharge)',
            metadata: { organization_id: input.orgId, auto_recharge_attempt: input.attemptId },
          },
          { idempotencyKey: input.attemptId },
        );
        if (intent.status === 'succeeded') return { outcome: 'succeeded', paymentId: intent.id };
        if (intent.status === 'processing') return { outcome: 'pending', paymentId: intent.id };
        return { outcome: 'failed', paymentId: intent.id, message: `the payment needs the cardholder (status ${intent.status})` };
      } catch (err) {
        const e = err as { type?: string; message?: string; payment_intent?: { id: string } };
        // A card error is Stripe's answer (declined, authentication required); any other is not an answer.
        if (e.type === 'StripeCardError') return { outcome: 'failed', paymentId: e.payment_intent?.id ?? null, message: e.message ?? 'card declined' };
        logStripeError(logger, err, 'Stripe failed to create an off-session PaymentIntent; the attempt will be retried');
        throw err;
      }
    },

    verify(payload, signature, receivedAtMs) {
      let event: Stripe.Event;
      try {
        event = stripe.webhooks.constructEvent(payload, signature, settings.webhookSecret, WEBHOOK_TOLERANCE_SECONDS, undefined, receivedAtMs);
      } catch (err) {
        throw new SignatureRejected((err as Error).message);
      }
      return noticeOf(event);
    },
  };
}

const paymentIntentId = (value: string | { id: string } | null | undefined) => (typeof value === 'string' ? value : (value?.id ?? null));

/** What billing needs of an event it handles; anything else is `other`. */
function noticeOf(event: Stripe.Event): PaymentNotice {
  const base = { eventId: event.id, type: event.type, created: event.created };
  switch (event.type) {
    case 'checkout.session.completed':
    case 'checkout.session.async_payment_succeeded':
    case 'checkout.session.async_payment_failed': {
      const s = event.data.object;
      return {
        ...base,
        kind: 'checkout',
        sessionId: s.id,
        paymentId: paymentIntentId(s.payment_intent) ?? s.id,
        orgId: s.client_reference_id,
        amountMicros: (s.amount_total ?? 0) * MICROS_PER_CENT,
        currency: s.currency,
        payment: event.type === 'checkout.session.async_payment_failed' ? 'failed' : s.payment_status === 'paid' ? 'paid' : 'pending',
        paymentMode: s.mode === 'payment',
      };
    }
    case 'charge.refunded': {
      const c = event.data.object;
      return {
        ...base,
        kind: 'refund',
        paymentId: paymentIntentId(c.payment_intent),
        refundedTotalMicros: c.amount_refunded * MICROS_PER_CENT,
        receiptUrl: c.receipt_url,
        currency: c.currency,
      };
    }
    case 'charge.succeeded': {
      const c = event.data.object;
      return { ...base, kind: 'receipt', paymentId: paymentIntentId(c.payment_intent), receiptUrl: c.receipt_url, currency: c.currency };
    }
    case 'charge.dispute.created': {
      const d = event.data.object;
      return {
        ...base,
        kind: 'dispute',
        paymentId: paymentIntentId(d.payment_intent),
        disputeId: d.id,
        amountMicros: d.amount * MICROS_PER_CENT,
        currency: d.currency,
      };
    }
    case 'setup_intent.succeeded': {
      const i = event.data.object;
      return {
        ...base,
        kind: 'setup',
        setupIntentId: i.id,
        orgId: i.metadata?.organization_id ?? null,
        customerId: typeof i.customer === 'string' ? i.customer : (i.customer?.id ?? null),
        paymentMethodId: typeof i.payment_method === 'string' ? i.payment_method : (i.payment_method?.id ?? null),
      };
    }
    case 'payment_intent.succeeded':
    case 'payment_intent.payment_failed': {
      const i = event.data.object;
      return {
        ...base,
        kind: 'intent',
        paymentId: i.id,
        orgId: i.metadata?.organization_id ?? null,
        attemptId: i.metadata?.auto_recharge_attempt ?? null,
        amountMicros: (event.type === 'payment_intent.succeeded' ? i.amount_received : i.amount) * MICROS_PER_CENT,
        currency: i.currency,
        outcome: event.type === 'payment_intent.succeeded' ? 'succeeded' : 'failed',
        message: i.last_payment_error?.message ?? null,
      };
    }
    default:
      return { ...base, kind: 'other' };
  }
}

/** By type, code and request id: never the request (it names the card) nor the key. */
function logStripeError(logger: Logger, err: unknown, message: string) {
  const e = err as { type?: string; code?: string; statusCode?: number; requestId?: string };
  logger.error({ stripe_error: { type: e.type, code: e.code, status: e.statusCode, request_id: e.requestId } }, message);
}
