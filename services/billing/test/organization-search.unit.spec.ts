import type { BillingEvent } from '@oc/contracts';
import { SqliteEventStore } from '@oc/eventstore';
import { ProjectionRunner, SqliteReadModelStore } from '@oc/readmodel';
import { afterEach, describe, expect, it } from 'vitest';
import { searchOrganizations } from '../src/application/organization-search';
import { billingReadModels } from '../src/projections';

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

const created = (org_id: string, name: string): BillingEvent => ({ type: 'OrganizationCreated', data: { org_id, name, tier: 'standard', created: 1 } });

/** Given organizations already in the log when billing's projections start, when the operators search them. */
async function given(events: BillingEvent[]) {
  const eventStore = new SqliteEventStore({ filename: ':memory:' });
  const readModels = new SqliteReadModelStore({ filename: ':memory:' });
  for (const event of events) {
    await eventStore.appendToStream(`account-${(event.data as { org_id: string }).org_id}`, [event], { expectedRevision: 'any' });
  }
  const runner = new ProjectionRunner(eventStore, readModels, billingReadModels.projections, { collections: billingReadModels.collections });
  closing.push(() => eventStore.close(), () => readModels.close(), () => runner.stop());
  await runner.start();
  return async (q: string, page: { limit?: number; after?: string } = {}) => {
    const found = await searchOrganizations(readModels, { q, limit: page.limit ?? 20, ...(page.after ? { after: page.after } : {}) });
    return { ids: found.data.map((o) => o._id), has_more: found.has_more };
  };
}

describe('searching organizations', () => {
  const log = [
    created('org_1', 'Élan Vital'),
    created('org_2', 'élan studio'),
    created('org_3', 'Elan'),
    created('org_4', 'Globex'),
    created('org_5', 'org_1 resellers'),
  ];

  it('finds, from a log written before search existed, the names starting with q in any case, by name', async () => {
    const search = await given(log);
    expect(await search('ÉLAN')).toEqual({ ids: ['org_2', 'org_1'], has_more: false });
    expect(await search('elan')).toEqual({ ids: ['org_3'], has_more: false });
    expect(await search('vital')).toEqual({ ids: [], has_more: false });
  });

  it('puts the organization whose id q is first, once, before the names that start with q', async () => {
    const search = await given(log);
    expect(await search('org_1')).toEqual({ ids: ['org_1', 'org_5'], has_more: false });
    expect(await search('org_4')).toEqual({ ids: ['org_4'], has_more: false });
  });

  it('pages through the names after the last id of the page before', async () => {
    const search = await given(log);
    const first = await search('é', { limit: 1 });
    expect(first).toEqual({ ids: ['org_2'], has_more: true });
    expect(await search('é', { limit: 1, after: 'org_2' })).toEqual({ ids: ['org_1'], has_more: false });
    await expect(search('é', { after: 'org_nobody' })).rejects.toMatchObject({ status: 404 });
  });
});
