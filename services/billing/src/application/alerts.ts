import { type BillingAlertMessage, type BillingEvent, type Clock, DomainError, unixSeconds } from '@oc/contracts';
import { causedBy, type CommandHandler, type StoredEvent } from '@oc/eventstore';
import type { Projector, ReadModels, ReadModelStore } from '@oc/readmodel';
import type { Logger } from 'pino';
import { alertDecider, alertStream } from '../domain/alerts';
import { paymentDecider, paymentStream } from '../domain/payment';
import { utcDay } from '../projections/billing-projections';
import { Collections, type DailySpendDoc, type OrganizationDoc } from '../projections/documents';

/** The durable consumer of billing's own events that decides the alerts; replicas share it. */
export const ALERTS_CONSUMER = 'billing-alerts';

/**
 * The account events after which an organization's alerts are looked at again (what moves its month's spend or
 * its balance, and a change of its settings), and the payment outcomes announced.
 */
export const ALERT_TRIGGERS = [
  'OrganizationAlertsChanged',
  'ReservationCaptured',
  'CreditsAdded',
  'TopUpCredited',
  'TopUpReversed',
  'TopUpPaymentFailed',
] as const;

export interface AlertsDeps {
  commands: CommandHandler;
  /** Read-your-writes, for the settings' answers. */
  readModels: ReadModels;
  /** The store itself and its projections: the process manager waits for the event it handles, not for the log's head. */
  store: ReadModelStore;
  projections: Pick<Projector, 'waitFor'>;
  clock: Clock;
  logger: Logger;
}

/**
 * An organization's billing alerts: its settings, and the process manager that observes the account's events
 * and has the alert decider (`domain/alerts.ts`) decide, once, what each means. It observes figures as they stand
 * once the read models show the event (the month's captured spend from the daily spend, the balance from the
 * organization), so a repeated or concurrent delivery observes the same or later figures and decides nothing new.
 */
export class AlertsService {
  constructor(private readonly deps: AlertsDeps) {}

  async updateAlerts(m: BillingAlertMessage<'updateOrganizationAlerts'>): Promise<void> {
    const org = await this.deps.readModels.collection<OrganizationDoc>(Collections.organizations).findOne({ _id: m.org_id });
    if (!org) throw new DomainError({ kind: 'NotFound', resource: 'organization', id: m.org_id });
    await this.deps.commands.handle(alertStream(m.org_id), alertDecider, {
      type: 'ConfigureAlerts',
      orgId: m.org_id,
      monthlyBudgetMicros: m.monthly_budget_micros,
      thresholds: m.budget_thresholds,
      lowBalanceMicros: m.low_balance_micros,
    });
  }

  /** The durable consumer's handler: idempotent, since the bus redelivers after a crash. */
  async handle(stored: StoredEvent): Promise<void> {
    const event = stored as StoredEvent & BillingEvent;
    const now = unixSeconds(this.deps.clock.now());
    if (event.type === 'TopUpCredited') {
      await this.notifyPayment(event.data.org_id, event.data.payment_id, 'succeeded', event.data.amount_micros, stored);
    }
    if ((event.type as string) === 'TopUpPaymentFailed') {
      const paymentId = (event.data as { payment_id: string }).payment_id;
      const payment = await this.deps.commands.load(paymentStream(paymentId), paymentDecider);
      if (payment.checkout) await this.notifyPayment(payment.checkout.orgId, paymentId, 'failed', payment.checkout.amountMicros, stored);
      return;
    }
    const orgId = (event.data as { org_id?: string }).org_id;
    if (!orgId) return;
    const alerts = await this.deps.commands.load(alertStream(orgId), alertDecider);
    if (alerts.monthlyBudgetMicros === null && alerts.lowBalanceMicros === null && !alerts.low) return;
    await this.deps.projections.waitFor(stored.position);
    const org = await this.deps.store.collection<OrganizationDoc>(Collections.organizations).findOne({ _id: orgId });
    if (!org) return;
    const month = utcDay(stored.created).slice(0, 7);
    const days = await this.deps.store
      .collection<DailySpendDoc>(Collections.dailySpend)
      .find({ org_id: orgId, day: { $gte: `${month}-01`, $lte: `${month}-31` } });
    const spentMicros = days.reduce((sum, d) => sum + d.charged_micros, 0);
    await this.deps.commands.handle(
      alertStream(orgId),
      alertDecider,
      { type: 'ObserveAccount', orgId, month, spentMicros, balanceMicros: org.balance_micros, now },
      causedBy(stored),
    );
  }

  private async notifyPayment(orgId: string, paymentId: string, outcome: 'succeeded' | 'failed', amountMicros: number, cause: StoredEvent) {
    await this.deps.commands.handle(
      alertStream(orgId),
      alertDecider,
      { type: 'NotifyPayment', orgId, paymentId, outcome, amountMicros, now: unixSeconds(this.deps.clock.now()) },
      causedBy(cause),
    );
  }
}
