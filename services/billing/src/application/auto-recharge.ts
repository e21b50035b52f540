import {
  type AutoRecharge,
  type AutoRechargeMessage,
  type Clock,
  type IdSource,
  DomainError,
  formatUsd,
  invalidRequest,
  microsToUsd,
  type SetupSession,
  unixSeconds,
} from '@oc/contracts';
import type { CommandHandler } from '@oc/eventstore';
import type { ReadModels } from '@oc/readmodel';
import type { Logger } from 'pino';
import type { TopUpBounds } from '../config';
import {
  type AutoRechargeAttempt,
  type AutoRechargeCommand,
  autoRechargeDecider,
  type AutoRechargePolicy,
  type AutoRechargeState,
  autoRechargeStream,
  nextAttemptAfter,
} from '../domain/auto-recharge';
import { paymentDecider, paymentStream } from '../domain/payment';
import { Collections, type OrganizationDoc } from '../projections/documents';
import { AutoRechargeCollections, type AutoRechargeDoc } from '../projections/auto-recharge-projection';
import { type AutoRechargeWebhooks, notConfigured, type PaymentProvider } from './payments';

/**
 * Stripe keeps an idempotency key 24 hours: a pending attempt is asked again with its key only within that, and
 * one Stripe never answered in that time is settled as failed rather than risk a second PaymentIntent.
 */
const RETRY_WITHIN_SECONDS = 23 * 3600;
/** A pending attempt younger than this may still be in flight on the replica that started it. */
const RETRY_AFTER_SECONDS = 60;

export interface AutoRechargeDeps {
  commands: CommandHandler;
  readModels: ReadModels;
  clock: Clock;
  logger: Logger;
  provider?: PaymentProvider;
  bounds: TopUpBounds;
  policy: AutoRechargePolicy;
  ids: IdSource;
}

/**
 * Auto-recharge: settings, saving a card (Checkout in setup mode), and the check that charges the saved card
 * when available funds are below the threshold. The check runs periodically over the organizations that have
 * it on (see docs/decisions.md); each attempt is decided on the organization's auto-recharge stream first and
 * only then sent to Stripe, with the attempt's id as the idempotency key.
 */
export class AutoRechargeService implements AutoRechargeWebhooks {
  constructor(private readonly deps: AutoRechargeDeps) {}

  private run(orgId: string, command: AutoRechargeCommand) {
    return this.deps.commands.handle(autoRechargeStream(orgId), autoRechargeDecider, command);
  }

  async get(m: AutoRechargeMessage<'getAutoRecharge'>): Promise<AutoRecharge> {
    await this.organization(m.org_id);
    return this.view((await this.run(m.org_id, { type: 'Inspect' })).state);
  }

  async configure(m: AutoRechargeMessage<'configureAutoRecharge'>): Promise<AutoRecharge> {
    const { bounds } = this.deps;
    if (!this.deps.provider) throw notConfigured();
    await this.organization(m.org_id);
    const current = (await this.run(m.org_id, { type: 'Inspect' })).state;
    const enabled = m.enabled ?? current.enabled;
    const thresholdMicros = m.threshold_micros ?? current.thresholdMicros;
    const amountMicros = m.amount_micros ?? current.amountMicros;
    if (thresholdMicros === null) throw invalidRequest('threshold_required', 'Set the threshold below which auto-recharge charges the card.', 'threshold');
    if (amountMicros === null) throw invalidRequest('amount_required', 'Set the amount auto-recharge charges each time.', 'amount');
    if (amountMicros < bounds.minMicros || amountMicros > bounds.maxMicros) {
      throw invalidRequest(
        'amount_out_of_range',
        `An auto-recharge amount is from ${formatUsd(bounds.minMicros)} to ${formatUsd(bounds.maxMicros)}; ${formatUsd(amountMicros)} is outside that range.`,
        'amount',
      );
    }
    if (enabled && current.paymentMethodId === null) {
      throw invalidRequest('payment_method_required', 'Save a card first (POST /console/v1/auto-recharge/payment-method), then turn auto-recharge on.', 'enabled');
    }
    await this.run(m.org_id, { type: 'Configure', orgId: m.org_id, enabled, thresholdMicros, amountMicros });
    // Turned on below the threshold: the first recharge need not wait for the next check. Stripe unreachable
    // leaves the attempt pending, asked again by the periodic check; the settings are saved either way.
    if (enabled) await this.check(m.org_id).catch((err: unknown) => this.deps.logger.warn({ err, org_id: m.org_id }, 'auto-recharge check failed; will retry'));
    return this.get({ org_id: m.org_id });
  }

  async startCardSetup(m: AutoRechargeMessage<'startCardSetup'>): Promise<SetupSession> {
    const { provider } = this.deps;
    if (!provider) throw notConfigured();
    const org = await this.organization(m.org_id);
    let state = (await this.run(m.org_id, { type: 'Inspect' })).state;
    if (state.customerId === null) {
      const customerId = await provider.createCustomer({ orgId: m.org_id, name: org.name, idempotencyKey: `customer_${m.org_id}` });
      state = (await this.run(m.org_id, { type: 'RecordCustomer', orgId: m.org_id, customerId })).state;
    }
    const back = (outcome: string) => {
      const url = new URL(m.return_url);
      url.searchParams.set('card_setup', outcome);
      return url.toString();
    };
    const session = await provider.createSetupSession({
      orgId: m.org_id,
      customerId: state.customerId!,
      successUrl: back('success'),
      cancelUrl: back('cancelled'),
      idempotencyKey: this.deps.ids.next('setup_'),
    });
    return { object: 'checkout_session', id: session.id, url: session.url, mode: 'setup' };
  }

  /** `setup_intent.succeeded`: the card becomes the one auto-recharge charges. */
  async savePaymentMethod(p: { orgId: string; customerId: string; paymentMethodId: string; setupIntentId: string }) {
    const result = await this.run(p.orgId, { type: 'SavePaymentMethod', ...p, now: unixSeconds(this.deps.clock.now()) });
    return result.events.length;
  }

  /** An attempt's PaymentIntent settled (Stripe's answer or its webhook); the first word on it counts. */
  async settle(p: { orgId: string; attemptId: string; paymentId: string | null; outcome: 'succeeded' | 'failed'; message: string }) {
    const result = await this.run(p.orgId, { type: 'Settle', ...p, now: unixSeconds(this.deps.clock.now()), policy: this.deps.policy });
    for (const event of result.events) {
      if (event.type === 'AutoRechargeDisabled') this.deps.logger.warn({ org_id: p.orgId, reason: event.data.reason }, 'auto-recharge turned itself off');
    }
    return result.events.length;
  }

  /** Every organization with auto-recharge on, checked one after another (a failing one does not stop the rest). */
  async sweep(): Promise<void> {
    const on = await this.deps.readModels.collection<AutoRechargeDoc>(AutoRechargeCollections.autoRecharge).find({ enabled: true });
    for (const doc of on) {
      try {
        await this.check(doc._id);
      } catch (err) {
        this.deps.logger.warn({ err, org_id: doc._id }, 'auto-recharge check failed; will retry');
      }
    }
  }

  /** Starts an attempt if the organization's available funds are below its threshold, or resumes one Stripe never answered. */
  async check(orgId: string): Promise<void> {
    const org = await this.deps.readModels.collection<OrganizationDoc>(Collections.organizations).findOne({ _id: orgId });
    if (!org) return;
    const now = unixSeconds(this.deps.clock.now());
    const observed = await this.run(orgId, { type: 'Observe', orgId, availableMicros: org.balance_micros - org.reserved_micros, now, policy: this.deps.policy });
    const last = observed.state.last;
    if (!last || last.outcome !== 'pending') return;
    const started = observed.events.length > 0;
    if (!started) {
      if (now - last.created < RETRY_AFTER_SECONDS) return;
      if (now - last.created > RETRY_WITHIN_SECONDS) {
        await this.settle({ orgId, attemptId: last.attemptId, paymentId: null, outcome: 'failed', message: 'Stripe gave no answer to the payment within a day' });
        return;
      }
    }
    await this.charge(orgId, observed.state, last);
  }

  private async charge(orgId: string, state: AutoRechargeState, attempt: AutoRechargeAttempt) {
    const { provider, logger } = this.deps;
    if (!provider || state.customerId === null || state.paymentMethodId === null) return;
    const answer = await provider.chargeOffSession({
      orgId,
      attemptId: attempt.attemptId,
      customerId: state.customerId,
      paymentMethodId: state.paymentMethodId,
      amountMicros: attempt.amountMicros,
    });
    logger.info({ org_id: orgId, attempt: attempt.attemptId, outcome: answer.outcome, payment_id: answer.paymentId }, 'auto-recharge payment answered');
    // Processing: its webhook settles it. A success is credited by its webhook (payment_intent.succeeded), once.
    if (answer.outcome === 'pending') return;
    if (answer.outcome === 'failed' && answer.paymentId !== null) {
      // In the payment history now, as its webhook (payment_intent.payment_failed) would record it, once.
      await this.deps.commands.handle(paymentStream(answer.paymentId), paymentDecider, {
        type: 'RecordCheckout',
        paymentId: answer.paymentId,
        orgId,
        sessionId: null,
        amountMicros: attempt.amountMicros,
        payment: 'failed',
        now: unixSeconds(this.deps.clock.now()),
      });
    }
    await this.settle({
      orgId,
      attemptId: attempt.attemptId,
      paymentId: answer.paymentId,
      outcome: answer.outcome,
      message: answer.outcome === 'failed' ? answer.message : '',
    });
  }

  private view(state: AutoRechargeState): AutoRecharge {
    const last = state.last;
    return {
      object: 'auto_recharge',
      enabled: state.enabled,
      threshold: state.thresholdMicros === null ? null : microsToUsd(state.thresholdMicros),
      amount: state.amountMicros === null ? null : microsToUsd(state.amountMicros),
      currency: 'usd',
      payment_method_saved: state.paymentMethodId !== null,
      last_attempt: last
        ? {
            id: last.attemptId,
            payment_id: last.paymentId,
            amount: microsToUsd(last.amountMicros),
            outcome: last.outcome,
            failure_message: last.message,
            created: last.created,
            settled_at: last.settledAt,
          }
        : null,
      consecutive_failures: state.failures,
      disabled_reason: state.disabledReason,
      next_attempt_after: state.enabled ? nextAttemptAfter(state, this.deps.policy) : null,
    };
  }

  private async organization(orgId: string): Promise<OrganizationDoc> {
    const org = await this.deps.readModels.collection<OrganizationDoc>(Collections.organizations).findOne({ _id: orgId });
    if (!org) throw new DomainError({ kind: 'NotFound', resource: 'organization', id: orgId });
    return org;
  }
}
