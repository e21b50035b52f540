import type { BillingEvent } from '@oc/contracts';
import type { StoredEvent } from '@oc/eventstore';
import type { CollectionSpec, Projection } from '@oc/readmodel';

/** An organization's name as searched: in lower case, so a prefix finds it whatever the case typed. */
export interface OrganizationNameDoc {
  _id: string;
  name_key: string;
  [key: string]: unknown;
}

export const OrganizationNameCollections = { names: 'billing_organization_names' } as const;

/** Served by an index range: a name prefix is `name_key` between the prefix and the prefix followed by U+FFFF. */
export const organizationNameCollections: CollectionSpec[] = [{ name: OrganizationNameCollections.names, indexes: [['name_key']] }];

export const searchKey = (name: string) => name.toLowerCase();

/**
 * A projection of its own rather than a field of the organizations' documents, so that a deployment whose
 * organizations were projected before search existed builds it from the log (a new projection starts at its
 * beginning). Names never change after creation, so one event type is all it reads.
 */
export const organizationNamesProjection: Projection = {
  name: 'billing-organization-names',
  canHandle: ['OrganizationCreated'],
  async handle(stored, ctx) {
    const event = stored as StoredEvent & BillingEvent;
    if (event.type !== 'OrganizationCreated') return;
    await ctx
      .collection<OrganizationNameDoc>(OrganizationNameCollections.names)
      .put({ _id: event.data.org_id, name_key: searchKey(event.data.name) });
  },
};
