import { type BillingEvent, type BillingMessage, ManualClock, type ServedUsage, toApiError } from '@oc/contracts';
import { SqliteEventStore } from '@oc/eventstore';
import { ProjectionRunner, SqliteReadModelStore } from '@oc/readmodel';
import { afterEach, describe, expect, it } from 'vitest';
import { UsageReports } from '../src/application/usage-reports';
import { billingReadModels } from '../src/projections';

const DAY_MS = 86_400_000;
/** Noon on 20 November 2026: events a day apart stay on their own UTC days. */
const DAY_1 = Date.UTC(2026, 10, 20, 12);
const DAY_2 = DAY_1 + DAY_MS;

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

const org = (org_id: string, name: string): BillingEvent => ({ type: 'OrganizationCreated', data: { org_id, name, tier: 'standard', created: 1 } });
const key = (org_id: string, key_id: string, name: string): BillingEvent => ({
  type: 'ApiKeyCreated',
  data: { key_id, org_id, name, mode: 'live', prefix: 'oc_live_abcd', key_hash: key_id.padEnd(64, '0'), scopes: ['chat:write'], rate_limit_per_minute: 100, expires_at: null, created: 1 },
});
let captures = 0;
const captured = (org_id: string, amount_micros: number, usage?: ServedUsage): BillingEvent => ({
  type: 'ReservationCaptured',
  data: { org_id, reservation_id: `r_${++captures}`, amount_micros, released_micros: 0, ...(usage ? { usage } : {}) },
});
const chat = (key_id: string, input_tokens: number, output_tokens: number): ServedUsage => ({
  product: 'chat',
  model: 'chat-2',
  deployment: 'chat-2-simulator',
  provider: 'simulator',
  upstream_model: 'simulator',
  input_tokens,
  output_tokens,
  provider_cost_micros: 0,
  key_id,
});
const video = (key_id: string, seconds: number): ServedUsage => ({
  product: 'video',
  model: 'video-2',
  deployment: 'video-2-simulator',
  provider: 'simulator',
  upstream_model: 'simulator',
  seconds,
  provider_cost_micros: 0,
  key_id,
});

/** Usage as captures recorded it before they named their key. */
const unkeyed = ({ key_id: _, ...usage }: ServedUsage): ServedUsage => usage;

/**
 * Given billing's events, each stored at its time (which makes its UTC day), when a report is asked of the read
 * model the projections built from them, then its rows.
 */
async function given(events: Array<[at: number, event: BillingEvent]>) {
  const clock = new ManualClock(DAY_1);
  const eventStore = new SqliteEventStore({ filename: ':memory:', clock });
  const readModels = new SqliteReadModelStore({ filename: ':memory:' });
  for (const [at, event] of events) {
    clock.set(at);
    const orgId = (event.data as { org_id: string }).org_id;
    const stream = event.type === 'ApiKeyCreated' ? `apikey-${event.data.key_id}` : `account-${orgId}`;
    await eventStore.appendToStream(stream, [event], { expectedRevision: 'any' });
  }
  const runner = new ProjectionRunner(eventStore, readModels, billingReadModels.projections, { collections: billingReadModels.collections });
  closing.push(() => eventStore.close(), () => readModels.close(), () => runner.stop());
  await runner.start();
  clock.set(DAY_2);
  const reports = new UsageReports({ readModels, clock });
  return {
    when: (query: Partial<BillingMessage<'keyUsage'>> & { org_id: string }) =>
      reports.keyUsage({ limit: 1_000, group_by: ['key', 'model', 'day'], start: '2026-11-20', end: '2026-11-21', ...query }),
    admin: (query: Partial<BillingMessage<'providerUsage'>>) =>
      reports.providerUsage({ limit: 1_000, group_by: ['key'], start: '2026-11-20', end: '2026-11-21', ...query }),
  };
}

const figures = { requests: 0, input_tokens: 0, output_tokens: 0, seconds: 0, spend: 0 };

describe('usage read model: captures by key, model and day', () => {
  it("puts a chat's tokens and a video's seconds in the rows of the key, model and day that used them", async () => {
    const report = await given([
      [DAY_1, org('org_a', 'Acme')],
      [DAY_1, key('org_a', 'key_backend', 'backend')],
      [DAY_1, key('org_a', 'key_studio', 'studio, "prod"')],
      [DAY_1, captured('org_a', 1_200, chat('key_backend', 10, 5))],
      [DAY_1 + 1_000, captured('org_a', 800, chat('key_backend', 6, 4))],
      [DAY_1, captured('org_a', 400_000, video('key_studio', 4))],
      [DAY_2, captured('org_a', 1_000_000, video('key_studio', 8))],
      [DAY_2, captured('org_a', 2_400, chat('key_studio', 20, 10))],
    ]);

    const rows = (await report.when({ org_id: 'org_a' })).data;

    expect(rows).toEqual([
      { key_id: 'key_backend', key_name: 'backend', model: 'chat-2', day: '2026-11-20', ...figures, requests: 2, input_tokens: 16, output_tokens: 9, spend: 0.002 },
      { key_id: 'key_studio', key_name: 'studio, "prod"', model: 'chat-2', day: '2026-11-21', ...figures, requests: 1, input_tokens: 20, output_tokens: 10, spend: 0.0024 },
      { key_id: 'key_studio', key_name: 'studio, "prod"', model: 'video-2', day: '2026-11-20', ...figures, requests: 1, seconds: 4, spend: 0.4 },
      { key_id: 'key_studio', key_name: 'studio, "prod"', model: 'video-2', day: '2026-11-21', ...figures, requests: 1, seconds: 8, spend: 1 },
    ]);
  });

  it('sums over what is not grouped by, in micro-dollars, ordered by the groups in the order asked', async () => {
    const report = await given([
      [DAY_1, org('org_a', 'Acme')],
      [DAY_1, key('org_a', 'key_backend', 'backend')],
      [DAY_1, captured('org_a', 100_001, chat('key_backend', 10, 5))],
      [DAY_1, captured('org_a', 200_002, video('key_backend', 4))],
      [DAY_2, captured('org_a', 300_003, chat('key_backend', 1, 1))],
    ]);

    expect((await report.when({ org_id: 'org_a', group_by: ['day'] })).data).toEqual([
      { day: '2026-11-20', requests: 2, input_tokens: 10, output_tokens: 5, seconds: 4, spend: 0.300003 },
      { day: '2026-11-21', requests: 1, input_tokens: 1, output_tokens: 1, seconds: 0, spend: 0.300003 },
    ]);
    expect((await report.when({ org_id: 'org_a', group_by: ['model', 'key'] })).data).toEqual([
      { model: 'chat-2', key_id: 'key_backend', key_name: 'backend', requests: 2, input_tokens: 11, output_tokens: 6, seconds: 0, spend: 0.400004 },
      { model: 'video-2', key_id: 'key_backend', key_name: 'backend', requests: 1, input_tokens: 0, output_tokens: 0, seconds: 4, spend: 0.200002 },
    ]);
    expect((await report.when({ org_id: 'org_a', start: '2026-11-21', end: '2026-11-21', group_by: [] })).data).toEqual([
      { requests: 1, input_tokens: 1, output_tokens: 1, seconds: 0, spend: 0.300003 },
    ]);
  });

  it('reads captures recorded before they named a key or what served them, under a null key and model', async () => {
    const report = await given([
      [DAY_1, org('org_a', 'Acme')],
      [DAY_1, captured('org_a', 500_000)],
      // Neither charged nor served: no request.
      [DAY_1, captured('org_a', 0)],
      [DAY_1, captured('org_a', 1_000, unkeyed(chat('key_x', 3, 2)))],
    ]);

    expect((await report.when({ org_id: 'org_a', group_by: ['key', 'model'] })).data).toEqual([
      { key_id: null, key_name: null, model: null, ...figures, requests: 1, spend: 0.5 },
      { key_id: null, key_name: null, model: 'chat-2', ...figures, requests: 1, input_tokens: 3, output_tokens: 2, spend: 0.001 },
    ]);
  });

  it("shows an organization its own captures only, and never another organization's key names", async () => {
    const report = await given([
      [DAY_1, org('org_a', 'Acme')],
      [DAY_1, org('org_b', 'Globex')],
      [DAY_1, key('org_a', 'key_a', 'acme key')],
      [DAY_1, key('org_b', 'key_b', 'globex key')],
      [DAY_1, captured('org_a', 1_000, chat('key_a', 1, 1))],
      [DAY_1, captured('org_b', 9_000, chat('key_b', 9, 9))],
    ]);

    expect((await report.when({ org_id: 'org_a', group_by: ['key'] })).data).toEqual([
      { key_id: 'key_a', key_name: 'acme key', requests: 1, input_tokens: 1, output_tokens: 1, seconds: 0, spend: 0.001 },
    ]);
    expect((await report.when({ org_id: 'org_b', group_by: ['key'] })).data.map((row) => row.key_name)).toEqual(['globex key']);
    // The operator's report over every organization names each key, with what it cost us.
    expect((await report.admin({})).data).toEqual([
      { key_id: 'key_a', key_name: 'acme key', requests: 1, input_tokens: 1, output_tokens: 1, seconds: 0, revenue: 0.001, provider_cost: 0, margin: 0.001 },
      { key_id: 'key_b', key_name: 'globex key', requests: 1, input_tokens: 9, output_tokens: 9, seconds: 0, revenue: 0.009, provider_cost: 0, margin: 0.009 },
    ]);
  });

  it('pages rows with next_after, each row once, and refuses a cursor it did not give', async () => {
    const report = await given([
      [DAY_1, org('org_a', 'Acme')],
      [DAY_1, captured('org_a', 1_000, chat('key_1', 1, 1))],
      [DAY_1, captured('org_a', 1_000, chat('key_2', 1, 1))],
      [DAY_1, captured('org_a', 1_000, chat('key_3', 1, 1))],
    ]);

    const first = await report.when({ org_id: 'org_a', group_by: ['key'], limit: 2 });
    expect(first.data.map((row) => row.key_id)).toEqual(['key_1', 'key_2']);
    expect(first.has_more).toBe(true);
    const second = await report.when({ org_id: 'org_a', group_by: ['key'], limit: 2, after: first.next_after! });
    expect(second.data.map((row) => row.key_id)).toEqual(['key_3']);
    expect(second).toMatchObject({ has_more: false, next_after: null });

    const refused = await report.when({ org_id: 'org_a', group_by: ['key'], after: 'not-a-cursor' }).catch((error: unknown) => toApiError(error).toBody());
    expect(refused).toMatchObject({ error: { type: 'invalid_request_error', code: 'invalid_cursor', param: 'after' } });
  });

  it('refuses a window longer than 366 days or ending before it starts, naming the parameter', async () => {
    const report = await given([[DAY_1, org('org_a', 'Acme')]]);
    const refusal = (query: Partial<BillingMessage<'keyUsage'>>) =>
      report.when({ org_id: 'org_a', ...query }).then(
        () => undefined,
        (error: unknown) => toApiError(error).toBody().error,
      );

    expect(await refusal({ start: '2025-11-20', end: '2026-11-21' })).toMatchObject({ code: 'invalid_parameter', param: 'start' });
    expect(await refusal({ start: '2026-11-21', end: '2026-11-20' })).toMatchObject({ code: 'invalid_parameter', param: 'end' });
    expect(await refusal({ start: '2026-02-30', end: '2026-03-01' })).toMatchObject({ code: 'invalid_parameter', param: 'start' });
    expect(await refusal({ start: '2025-11-21', end: '2026-11-21' })).toBeUndefined();
  });
});
