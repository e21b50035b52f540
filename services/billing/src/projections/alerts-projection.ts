import type { BillingEvent } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import type { CollectionSpec, Projection } from '@oc/readmodel';

/** An organization's alert settings, shown in the organization object; absent until first set. */
export interface AlertSettingsDoc {
  /** The organization's id. */
  _id: string;
  monthly_budget_micros: number | null;
  budget_thresholds: number[];
  low_balance_micros: number | null;
  [key: string]: unknown;
}

export const AlertCollections = { alertSettings: 'billing_alert_settings' } as const;

export const alertCollections: CollectionSpec[] = [{ name: AlertCollections.alertSettings, indexes: [] }];

export const alertSettingsProjection: Projection = {
  name: 'billing-alert-settings',
  canHandle: ['OrganizationAlertsChanged'],
  async handle(stored, ctx) {
    const event = stored as StoredEvent & BillingEvent;
    if (event.type !== 'OrganizationAlertsChanged') return;
    const { org_id, ...settings } = event.data;
    await ctx.collection<AlertSettingsDoc>(AlertCollections.alertSettings).put({ _id: org_id, ...settings });
  },
};
