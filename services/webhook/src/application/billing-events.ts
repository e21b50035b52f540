import { BillingAlertEvents, microsToUsd, unixSeconds, type WebhookEnvelope, webhookEventId } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import type { Logger } from 'pino';
import type { WebhookEvent } from './deliveries';

/** Billing's events that webhooks carry: each alert and payment outcome billing decided once. */
export const BILLING_NOTIFICATIONS = ['BudgetThresholdCrossed', 'BalanceLow', 'PaymentOutcomeNotified'] as const;

/**
 * The webhook event a consumed billing event makes, or undefined for another type, and for one that does not match
 * its contract (logged: no redelivery can fix it).
 */
export function billingWebhookEventOf(event: StoredEvent, logger: Logger): WebhookEvent | undefined {
  if (!(BILLING_NOTIFICATIONS as readonly string[]).includes(event.type)) return undefined;
  const schema = BillingAlertEvents[event.type as (typeof BILLING_NOTIFICATIONS)[number]];
  const parsed = schema.safeParse(event.data);
  if (!parsed.success) {
    logger.error({ event_id: event.id, type: event.type }, 'billing event does not match its contract; not delivered');
    return undefined;
  }
  const id = webhookEventId(event.id);
  const created = unixSeconds(event.created);
  const d = parsed.data;
  const org = d.org_id;
  let envelope: WebhookEnvelope;
  if ('threshold' in d) {
    envelope = {
      id,
      type: 'billing.budget_threshold',
      created,
      data: {
        object: 'budget_alert',
        organization_id: org,
        month: d.month,
        threshold: d.threshold,
        monthly_budget: microsToUsd(d.monthly_budget_micros),
        spent: microsToUsd(d.spent_micros),
        currency: 'usd',
      },
    };
  } else if ('low_balance_micros' in d) {
    envelope = {
      id,
      type: 'balance.low',
      created,
      data: { object: 'balance_alert', organization_id: org, balance: microsToUsd(d.balance_micros), low_balance: microsToUsd(d.low_balance_micros), currency: 'usd' },
    };
  } else {
    envelope = {
      id,
      type: d.outcome === 'succeeded' ? 'billing.payment_succeeded' : 'billing.payment_failed',
      created,
      data: { object: 'payment', id: d.payment_id, organization_id: org, amount: microsToUsd(d.amount_micros), currency: 'usd' },
    };
  }
  return { orgId: org, envelope };
}
