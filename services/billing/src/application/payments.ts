import {
  ApiError,
  type CheckoutSession,
  type Clock,
  DomainError,
  formatUsd,
  type IdSource,
  invalidRequest,
  microsToUsd,
  type Payment,
  type PaymentMessage,
  type StripeWebhookReply,
  unixSeconds,
} from '@oc/contracts';
import type { CommandHandler } from '@oc/eventstore';
import { pageAfter, type ReadModels } from '@oc/readmodel';
import type { Logger } from 'pino';
import type { TopUpBounds } from '../config';
import { accountDecider, accountStream } from '../domain/account';
import { type AccountEntry, accountEntries, type CheckoutPayment, paymentDecider, type PaymentCommand, type PaymentState, paymentStream } from '../domain/payment';
import { Collections, type OrganizationDoc } from '../projections/documents';
import { PaymentCollections, type PaymentDoc } from '../projections/payments-projection';

/** A delivery whose `Stripe-Signature` does not verify against its body (forged, altered, or too old). */
export class SignatureRejected extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'SignatureRejected';
  }
}

/** What billing takes from a verified Stripe event: amounts in micro-USD, the ids it is keyed on. */
export type PaymentNotice = { eventId: string; type: string; created: number } & (
  | {
      kind: 'checkout';
      sessionId: string;
      /** The PaymentIntent's id (the session's own when it has none), which the charge's events name too. */
      paymentId: string;
      orgId: string | null;
      amountMicros: number;
      currency: string | null;
      payment: CheckoutPayment;
      /** A Checkout Session in payment mode (a setup or subscription session credits nothing). */
      paymentMode: boolean;
    }
  | { kind: 'refund'; paymentId: string | null; refundedTotalMicros: number; receiptUrl: string | null; currency: string }
  | { kind: 'dispute'; paymentId: string | null; disputeId: string; amountMicros: number; currency: string }
  | { kind: 'receipt'; paymentId: string | null; receiptUrl: string | null; currency: string }
  /** `setup_intent.succeeded`: a card saved for off-session payments (`orgId` from its metadata). */
  | { kind: 'setup'; setupIntentId: string; orgId: string | null; customerId: string | null; paymentMethodId: string | null }
  /**
   * `payment_intent.succeeded` or `payment_intent.payment_failed`; `attemptId` (its metadata) names an
   * auto-recharge's attempt, null for a PaymentIntent of Checkout (whose session's events credit it).
   */
  | {
      kind: 'intent';
      paymentId: string;
      orgId: string | null;
      attemptId: string | null;
      amountMicros: number;
      currency: string;
      outcome: 'succeeded' | 'failed';
      message: string | null;
    }
  | { kind: 'other' }
);

/** Stripe's answer to an off-session PaymentIntent; anything else (unreachable, 5xx) is thrown and tried again with the same key. */
export type OffSessionCharge =
  | { outcome: 'succeeded' | 'pending'; paymentId: string }
  /** Declined, or the bank wants the cardholder present (`authentication_required`): Stripe's message. */
  | { outcome: 'failed'; paymentId: string | null; message: string };

/** The payment provider's port (Stripe's adapter, `adapters/stripe.ts`). */
export interface PaymentProvider {
  createCheckoutSession(input: {
    orgId: string;
    amountMicros: number;
    successUrl: string;
    cancelUrl: string;
    idempotencyKey: string;
  }): Promise<{ id: string; url: string }>;
  /** The organization's Customer, which saved cards and off-session payments name. */
  createCustomer(input: { orgId: string; name: string; idempotencyKey: string }): Promise<string>;
  /** A Checkout Session in setup mode: the member saves a card for the Customer, usable off-session. */
  createSetupSession(input: { orgId: string; customerId: string; successUrl: string; cancelUrl: string; idempotencyKey: string }): Promise<{ id: string; url: string }>;
  /** One PaymentIntent confirmed off-session on the saved card; `attemptId` is its idempotency key and in its metadata. */
  chargeOffSession(input: { orgId: string; attemptId: string; customerId: string; paymentMethodId: string; amountMicros: number }): Promise<OffSessionCharge>;
  /** The delivery's event if its signature verifies at `receivedAtMs`; else throws `SignatureRejected`. */
  verify(payload: string, signature: string, receivedAtMs: number): PaymentNotice;
}

export interface PaymentsDeps {
  commands: CommandHandler;
  readModels: ReadModels;
  clock: Clock;
  ids: IdSource;
  logger: Logger;
  /** Absent without STRIPE_SECRET_KEY: top-up is not configured. */
  provider?: PaymentProvider;
  bounds: TopUpBounds;
  /** Where a saved card and an auto-recharge's PaymentIntent outcome are recorded. */
  autoRecharge?: AutoRechargeWebhooks;
}

export interface AutoRechargeWebhooks {
  savePaymentMethod(p: { orgId: string; customerId: string; paymentMethodId: string; setupIntentId: string }): Promise<number>;
  settle(p: { orgId: string; attemptId: string; paymentId: string | null; outcome: 'succeeded' | 'failed'; message: string }): Promise<number>;
}

export const notConfigured = () =>
  new ApiError({
    status: 400,
    type: 'invalid_request_error',
    code: 'topup_not_configured',
    message: 'Top-up is not configured on this service: the operator has set no Stripe key (STRIPE_SECRET_KEY). Ask the operator to add credit.',
  });

/** Top-ups paid with Stripe: Checkout Sessions, the webhook that credits them, and the history. */
export class PaymentsService {
  constructor(private readonly deps: PaymentsDeps) {}

  async startTopUp(m: PaymentMessage<'startTopUp'>): Promise<CheckoutSession> {
    const { provider, bounds } = this.deps;
    if (!provider) throw notConfigured();
    if (m.amount_micros < bounds.minMicros || m.amount_micros > bounds.maxMicros) {
      throw invalidRequest(
        'amount_out_of_range',
        `A top-up is from ${formatUsd(bounds.minMicros)} to ${formatUsd(bounds.maxMicros)}; ${formatUsd(m.amount_micros)} is outside that range.`,
        'amount',
      );
    }
    await this.organization(m.org_id, true);
    const back = (outcome: string) => {
      const url = new URL(m.return_url);
      url.searchParams.set('top_up', outcome);
      return url.toString();
    };
    const session = await provider.createCheckoutSession({
      orgId: m.org_id,
      amountMicros: m.amount_micros,
      successUrl: back('success'),
      cancelUrl: back('cancelled'),
      idempotencyKey: this.deps.ids.next('topup_'),
    });
    return { object: 'checkout_session', id: session.id, url: session.url, amount: microsToUsd(m.amount_micros), currency: 'usd' };
  }

  /**
   * One Stripe delivery. A bad signature is a 400 (Stripe retries it; a forger learns nothing); anything that
   * verifies but is not ours to credit is acknowledged and logged, so Stripe stops retrying it. A failure of our
   * own stores is the one error left: Stripe delivers again, and what was recorded is not recorded twice.
   */
  async stripeWebhook(m: PaymentMessage<'stripeWebhook'>): Promise<StripeWebhookReply> {
    const { provider, logger } = this.deps;
    if (!provider) throw notConfigured();
    let notice: PaymentNotice;
    try {
      notice = provider.verify(m.payload, m.signature, this.deps.clock.now());
    } catch (error) {
      if (!(error instanceof SignatureRejected)) throw error;
      logger.warn({ reason: error.message }, 'Stripe webhook refused: its signature does not verify');
      throw invalidRequest('invalid_signature', `The Stripe-Signature header does not verify against this body: ${error.message}`, 'Stripe-Signature');
    }
    const ignored = (reason: string): StripeWebhookReply => {
      logger.warn({ stripe_event: notice.eventId, type: notice.type, reason }, 'Stripe webhook acknowledged without effect');
      return { received: true, outcome: 'ignored', reason };
    };
    const now = unixSeconds(this.deps.clock.now());
    let paymentId: string;
    let command: PaymentCommand;
    switch (notice.kind) {
      case 'other':
        return { received: true, outcome: 'ignored', reason: `event type ${notice.type} is not handled` };
      case 'checkout': {
        if (!notice.paymentMode) return ignored('not a payment-mode Checkout Session');
        if (notice.currency !== 'usd') return ignored(`currency ${notice.currency} is not usd`);
        if (notice.orgId === null) return ignored('the Checkout Session names no organization (client_reference_id)');
        if (!(await this.organization(notice.orgId, false))) return ignored(`unknown organization ${notice.orgId}`);
        if (notice.amountMicros <= 0) return ignored('nothing to credit (amount_total 0)');
        paymentId = notice.paymentId;
        command = {
          type: 'RecordCheckout',
          paymentId,
          orgId: notice.orgId,
          sessionId: notice.sessionId,
          amountMicros: notice.amountMicros,
          payment: notice.payment,
          now,
        };
        break;
      }
      case 'refund':
        if (notice.paymentId === null) return ignored('the charge names no PaymentIntent');
        if (notice.currency !== 'usd') return ignored(`currency ${notice.currency} is not usd`);
        if (notice.refundedTotalMicros <= 0) return ignored('nothing refunded');
        paymentId = notice.paymentId;
        command = { type: 'RecordRefund', paymentId, refundedTotalMicros: notice.refundedTotalMicros, receiptUrl: notice.receiptUrl, now };
        break;
      case 'dispute':
        if (notice.paymentId === null) return ignored('the dispute names no PaymentIntent');
        if (notice.currency !== 'usd') return ignored(`currency ${notice.currency} is not usd`);
        if (notice.amountMicros <= 0) return ignored('nothing disputed');
        paymentId = notice.paymentId;
        command = { type: 'RecordDispute', paymentId, disputeId: notice.disputeId, amountMicros: notice.amountMicros, now };
        break;
      case 'receipt':
        if (notice.paymentId === null || notice.receiptUrl === null) return ignored('the charge names no PaymentIntent or no receipt');
        paymentId = notice.paymentId;
        command = { type: 'RecordReceipt', paymentId, receiptUrl: notice.receiptUrl };
        break;
      case 'setup': {
        if (!this.deps.autoRecharge) return ignored('auto-recharge is not served here');
        if (notice.orgId === null) return ignored('the SetupIntent names no organization (metadata.organization_id)');
        if (notice.customerId === null || notice.paymentMethodId === null) return ignored('the SetupIntent names no Customer or no PaymentMethod');
        if (!(await this.organization(notice.orgId, false))) return ignored(`unknown organization ${notice.orgId}`);
        const saved = await this.deps.autoRecharge.savePaymentMethod({
          orgId: notice.orgId,
          customerId: notice.customerId,
          paymentMethodId: notice.paymentMethodId,
          setupIntentId: notice.setupIntentId,
        });
        return { received: true, outcome: saved > 0 ? 'applied' : 'repeat' };
      }
      case 'intent':
        // A Checkout top-up's PaymentIntent is credited by its session's events, not by these.
        if (notice.attemptId === null) return { received: true, outcome: 'ignored', reason: 'a PaymentIntent of Checkout (credited by its session)' };
        if (!this.deps.autoRecharge) return ignored('auto-recharge is not served here');
        if (notice.currency !== 'usd') return ignored(`currency ${notice.currency} is not usd`);
        if (notice.orgId === null) return ignored('the PaymentIntent names no organization (metadata.organization_id)');
        if (!(await this.organization(notice.orgId, false))) return ignored(`unknown organization ${notice.orgId}`);
        if (notice.amountMicros <= 0) return ignored('nothing to credit (amount 0)');
        paymentId = notice.paymentId;
        command = {
          type: 'RecordCheckout',
          paymentId,
          orgId: notice.orgId,
          sessionId: null,
          amountMicros: notice.amountMicros,
          payment: notice.outcome === 'succeeded' ? 'paid' : 'failed',
          now,
        };
        break;
    }
    const recorded = await this.deps.commands.handle(paymentStream(paymentId), paymentDecider, command);
    const applied = await this.applyToAccount(paymentId, recorded.state);
    const settled =
      notice.kind === 'intent' && notice.attemptId !== null && notice.orgId !== null && this.deps.autoRecharge
        ? await this.deps.autoRecharge.settle({
            orgId: notice.orgId,
            attemptId: notice.attemptId,
            paymentId,
            outcome: notice.outcome,
            message: notice.message ?? 'the card was declined',
          })
        : 0;
    return { received: true, outcome: recorded.events.length > 0 || applied > 0 || settled > 0 ? 'applied' : 'repeat' };
  }

  /**
   * Applies what the payment owes the account and was not applied yet (each entry once, by its id), every time:
   * a delivery repeated after a crash between the payment's append and the account's finishes the work.
   */
  private async applyToAccount(paymentId: string, state: PaymentState): Promise<number> {
    const owed = accountEntries(paymentId, state);
    if (!owed) return 0;
    let applied = 0;
    for (const entry of owed.entries) {
      const result = await this.deps.commands.handle(accountStream(owed.orgId), accountDecider, accountCommand(owed.orgId, paymentId, entry, state.checkout?.sessionId === null));
      applied += result.events.length;
    }
    return applied;
  }

  async listPayments(m: PaymentMessage<'listPayments'>) {
    await this.organization(m.org_id, true);
    const payments = this.deps.readModels.collection<PaymentDoc>(PaymentCollections.payments);
    const page = await pageAfter(payments, { org_id: m.org_id }, 'created', m);
    return { object: 'list' as const, data: page.data.map(toPayment), has_more: page.has_more };
  }

  private async organization(orgId: string, required: boolean): Promise<boolean> {
    const org = await this.deps.readModels.collection<OrganizationDoc>(Collections.organizations).findOne({ _id: orgId });
    if (!org && required) throw new DomainError({ kind: 'NotFound', resource: 'organization', id: orgId });
    return Boolean(org);
  }
}

/** `autoRecharge`: charged off-session to the saved card, which the ledger's description says. */
function accountCommand(orgId: string, paymentId: string, entry: AccountEntry, autoRecharge: boolean) {
  if (entry.kind === 'credit') {
    return {
      type: 'CreditTopUp' as const,
      orgId,
      entryId: entry.entryId,
      paymentId,
      amountMicros: entry.amountMicros,
      description: autoRecharge ? `Auto-recharge paid with Stripe (${paymentId})` : `Top-up paid with Stripe (${paymentId})`,
    };
  }
  return {
    type: 'ReverseTopUp' as const,
    orgId,
    entryId: entry.entryId,
    paymentId,
    reason: entry.kind,
    amountMicros: entry.amountMicros,
    description: entry.kind === 'refund' ? `Top-up refunded through Stripe (${paymentId})` : `Top-up disputed at the bank; amount held (${paymentId})`,
  };
}

const toPayment = (doc: PaymentDoc): Payment => ({
  id: doc._id,
  object: 'payment',
  status: doc.status,
  amount: microsToUsd(doc.amount_micros),
  refunded: microsToUsd(doc.refunded_micros),
  disputed: microsToUsd(doc.disputed_micros),
  currency: 'usd',
  checkout_session: doc.checkout_session,
  auto_recharge: doc.checkout_session === null,
  receipt_url: doc.receipt_url,
  refunds: doc.refunds.map((r) => ({ amount: microsToUsd(r.amount_micros), created: r.created })),
  disputes: doc.disputes.map((d) => ({ id: d.id, amount: microsToUsd(d.amount_micros), created: d.created })),
  created: doc.created,
  paid_at: doc.paid_at,
});
