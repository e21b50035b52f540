import { type BillingMessage, microsToUsd, notFound, type Organization } from '@oc/contracts';
import type { ReadModels } from '@oc/readmodel';
import type { OrganizationDoc } from '../projections/documents';
import { Collections } from '../projections/documents';
import { OrganizationNameCollections, type OrganizationNameDoc, searchKey } from '../projections/organization-names';

type Page = { data: OrganizationDoc[]; has_more: boolean };

/**
 * The organizations `q` finds, by name: the one whose id it is first (on the first page), then those whose name
 * starts with it in any case, each page one range of the names' index (`after` is the last id of the page before).
 */
export async function searchOrganizations(readModels: ReadModels, m: BillingMessage<'listOrganizations'> & { q: string }): Promise<Page> {
  const names = readModels.collection<OrganizationNameDoc>(OrganizationNameCollections.names);
  const orgs = readModels.collection<OrganizationDoc>(Collections.organizations);
  const key = searchKey(m.q);
  let after: string[] | undefined;
  if (m.after !== undefined) {
    const cursor = await names.findOne({ _id: m.after });
    if (!cursor) throw notFound('invalid_cursor', `No item with id '${m.after}' to page after.`);
    after = [cursor.name_key, cursor._id];
  }
  const byId = after === undefined ? await orgs.findOne({ _id: m.q }) : null;
  const found = await names.find(
    { name_key: { $gte: key, $lt: `${key}\uffff` } },
    { sort: { name_key: 1, _id: 1 }, limit: m.limit + 1, ...(after ? { after } : {}) },
  );
  const ids = found.map((n) => n._id).filter((id) => id !== byId?._id);
  const docs = ids.length === 0 ? [] : await orgs.find({ _id: { $in: ids } });
  const byKey = new Map(docs.map((d) => [d._id, d]));
  const matches = [...(byId ? [byId] : []), ...ids.flatMap((id) => byKey.get(id) ?? [])];
  return { data: matches.slice(0, m.limit), has_more: found.length > m.limit || matches.length > m.limit };
}

/** An organization as the operators' list shows it: with what it can spend and what running work holds. */
export const withBalance = (organization: Organization, doc: OrganizationDoc) => ({
  ...organization,
  balance: { available: microsToUsd(doc.balance_micros - doc.reserved_micros), reserved: microsToUsd(doc.reserved_micros) },
});
