import type { BillingEvent } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import type { CollectionSpec, Projection } from '@oc/readmodel';
import { utcDay } from './billing-projections';
import type { ServedFigures } from './documents';

/**
 * What captures charged one organization on one UTC day, for one API key and one deployment of a public model:
 * the finest grain any usage report groups by, so that a report reads these and never the ledger. A capture
 * without usage (recorded before captures carried it) counts under null key, model, provider and deployment.
 */
export interface UsageDoc extends ServedFigures {
  /** `[org_id, day, key_id, model, provider, deployment]` as JSON, whatever characters the names hold. */
  _id: string;
  org_id: string;
  /** `YYYY-MM-DD`, the UTC day of the capture. */
  day: string;
  key_id: string | null;
  model: string | null;
  provider: string | null;
  deployment: string | null;
  [key: string]: unknown;
}

export const UsageCollections = { usage: 'billing_usage' } as const;

/** An organization's days (the console's report, the admin one for an organization) and every organization's days. */
export const usageCollections: CollectionSpec[] = [{ name: UsageCollections.usage, indexes: [['org_id', 'day'], ['day']] }];

type Stored = StoredEvent & BillingEvent;

export const usageProjection: Projection = {
  name: 'billing-usage',
  canHandle: ['ReservationCaptured'],
  async handle(stored, ctx) {
    const event = stored as Stored;
    if (event.type !== 'ReservationCaptured') return;
    const { org_id, amount_micros, usage } = event.data;
    // Neither charged nor served: a reservation given back by a capture of nothing.
    if (amount_micros === 0 && !usage) return;
    const day = utcDay(stored.created);
    const at = {
      key_id: usage?.key_id ?? null,
      model: usage?.model ?? null,
      provider: usage?.provider ?? null,
      deployment: usage?.deployment ?? null,
    };
    const docs = ctx.collection<UsageDoc>(UsageCollections.usage);
    const id = JSON.stringify([org_id, day, at.key_id, at.model, at.provider, at.deployment]);
    const doc: UsageDoc = (await docs.get(id)) ?? {
      _id: id,
      org_id,
      day,
      ...at,
      requests: 0,
      input_tokens: 0,
      output_tokens: 0,
      seconds: 0,
      revenue_micros: 0,
      provider_cost_micros: 0,
    };
    doc.requests += 1;
    doc.input_tokens += usage?.input_tokens ?? 0;
    doc.output_tokens += usage?.output_tokens ?? 0;
    doc.seconds += usage?.seconds ?? 0;
    doc.revenue_micros += amount_micros;
    doc.provider_cost_micros += usage?.provider_cost_micros ?? 0;
    await docs.put(doc);
  },
};
