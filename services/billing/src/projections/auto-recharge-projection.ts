import type { BillingEvent } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import type { CollectionSpec, Projection } from '@oc/readmodel';

/** Which organizations have auto-recharge on (id: the organization's), for the periodic check of their balances. */
export interface AutoRechargeDoc {
  _id: string;
  enabled: boolean;
  [key: string]: unknown;
}

export const AutoRechargeCollections = { autoRecharge: 'billing_auto_recharge' } as const;

export const autoRechargeCollections: CollectionSpec[] = [{ name: AutoRechargeCollections.autoRecharge, indexes: [['enabled']] }];

/** The organizations to check, from their auto-recharge streams; the state itself is read from the stream. */
export const autoRechargeProjection: Projection = {
  name: 'billing-auto-recharge',
  canHandle: ['AutoRechargeConfigured', 'AutoRechargeDisabled'],
  async handle(stored, ctx) {
    const event = stored as StoredEvent & BillingEvent;
    const docs = ctx.collection<AutoRechargeDoc>(AutoRechargeCollections.autoRecharge);
    switch (event.type) {
      case 'AutoRechargeConfigured':
        await docs.put({ _id: event.data.org_id, enabled: event.data.enabled });
        break;
      case 'AutoRechargeDisabled':
        await docs.put({ _id: event.data.org_id, enabled: false });
        break;
      default:
        return;
    }
  },
};
