import { type ActivityEntry, type ActivityList, type ActivityMessage, DomainError, microsToUsd, notFound } from '@oc/contracts';
import type { Filter, ReadModels } from '@oc/readmodel';
import { ActivityCollections, type ActivityDoc } from '../projections/activity';
import { Collections, type OrganizationDoc } from '../projections/documents';

const DAY_SECONDS = 86_400;
const dayStart = (day: string) => Date.parse(`${day}T00:00:00Z`) / 1000;

const entryOf = (doc: ActivityDoc): ActivityEntry => ({
  id: doc.reservation_id,
  object: 'activity',
  key_id: doc.key_id,
  model: doc.model,
  product: doc.product,
  status: doc.status,
  description: doc.description,
  amount_held: microsToUsd(doc.held_micros),
  amount_charged: microsToUsd(doc.charged_micros),
  input_tokens: doc.input_tokens,
  output_tokens: doc.output_tokens,
  seconds: doc.seconds,
  created: doc.created,
  settled_at: doc.settled_at,
});

/** The activity log of one organization, read from its read model (`projections/activity.ts`). */
export class ActivityLog {
  constructor(private readonly deps: { readModels: ReadModels }) {}

  async list(m: ActivityMessage<'listActivity'>): Promise<ActivityList> {
    const org = await this.deps.readModels.collection<OrganizationDoc>(Collections.organizations).findOne({ _id: m.org_id });
    if (!org) throw new DomainError({ kind: 'NotFound', resource: 'organization', id: m.org_id });
    const created: Record<string, number> = {};
    if (m.start !== undefined) created.$gte = dayStart(m.start);
    if (m.end !== undefined) created.$lt = dayStart(m.end) + DAY_SECONDS;
    const filter: Filter = {
      org_id: m.org_id,
      ...(m.key_id !== undefined ? { key_id: m.key_id } : {}),
      ...(m.model !== undefined ? { model: m.model } : {}),
      ...(m.status !== undefined ? { status: m.status } : {}),
      ...(Object.keys(created).length > 0 ? { created } : {}),
    };
    const docs = this.deps.readModels.collection<ActivityDoc>(ActivityCollections.activity);
    let after: [number, string] | undefined;
    if (m.after !== undefined) {
      // Found whatever the filters: the row a page ended on may have been charged or released since.
      const cursor = await docs.findOne({ _id: `${m.org_id}/${m.after}` });
      if (!cursor) throw notFound('invalid_cursor', `No request '${m.after}' in this organization's activity to page after.`, 'after');
      after = [cursor.created, cursor._id];
    }
    const rows = await docs.find(filter, { sort: { created: -1, _id: -1 }, limit: m.limit + 1, ...(after ? { after } : {}) });
    return { object: 'list', data: rows.slice(0, m.limit).map(entryOf), has_more: rows.length > m.limit };
  }
}
