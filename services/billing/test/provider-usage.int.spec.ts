import 'reflect-metadata';
import { ManualClock, type Reply, type ServedUsage, sortableIds, Subjects, type UsageReport } from '@oc/contracts';
import { openSqliteStores } from '@oc/eventstore';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBilling } from '../src/app';

const DAY_MS = 86_400_000;
/** Noon, so that a day's captures stay on one UTC day. */
const clock = new ManualClock(Date.UTC(2026, 10, 21, 12));
const stores = openSqliteStores({ filename: ':memory:', clock });
const broker = new InProcessBroker();
const bus = new InProcessServiceClient(broker);
let close: () => Promise<void>;

beforeAll(async () => {
  const billing = await createBilling({
    eventStore: stores.store,
    readModels: new SqliteReadModelStore({ filename: ':memory:' }),
    client: bus,
    clock,
    ids: sortableIds,
    logger: createLogger({ service: 'billing-test', level: 'silent' }),
  });
  const app = await NestFactory.createMicroservice(billing.module, { strategy: new InProcessServerStrategy(broker), logger: false });
  await app.listen();
  close = async () => {
    await app.close();
    await billing.close();
    await stores.close();
  };
});
afterAll(() => close());

const ok = async <T = any>(subject: string, message: unknown): Promise<T> => {
  const reply = await bus.request<T>(subject, message);
  if (!reply.ok) throw new Error(`${subject}: ${JSON.stringify(reply.error)}`);
  return reply.data;
};
const report = (query: Record<string, unknown>) => bus.request<UsageReport>(Subjects.billing.providerUsage, query);
const reportOk = async (query: Record<string, unknown>) => {
  const reply = await report(query);
  if (!reply.ok) throw new Error(JSON.stringify(reply.error));
  return reply.data;
};

async function newOrg(name: string) {
  const org = await ok<{ id: string }>(Subjects.billing.createOrganization, { name, tier: 'standard' });
  await ok(Subjects.billing.addCredits, { org_id: org.id, amount_micros: 100_000_000, description: 'Top-up' });
  return org.id;
}

let captures = 0;
/** Reserves a dollar and captures `charged` of it, with what served it (or, without `usage`, as captures were before providers). */
async function capture(org_id: string, charged: number, usage?: ServedUsage) {
  const reservation_id = `r_${++captures}`;
  await ok(Subjects.billing.reserveFunds, { org_id, reservation_id, amount_micros: 1_000_000, description: 'work' });
  await ok(Subjects.billing.captureReservation, { org_id, reservation_id, amount_micros: charged, ...(usage ? { usage } : {}) });
}

const openaiChat = (input_tokens: number, output_tokens: number, provider_cost_micros: number): ServedUsage => ({
  product: 'chat',
  model: 'chat-2',
  deployment: 'chat-2-openai',
  provider: 'openai',
  upstream_model: 'gpt-4o-mini',
  input_tokens,
  output_tokens,
  provider_cost_micros,
});
const simulatorChat = (input_tokens: number, output_tokens: number): ServedUsage => ({
  product: 'chat',
  model: 'chat-2',
  deployment: 'chat-2-simulator',
  provider: 'simulator',
  upstream_model: 'simulator',
  input_tokens,
  output_tokens,
  provider_cost_micros: 0,
});
const falVideo = (seconds: number, provider_cost_micros: number): ServedUsage => ({
  product: 'video',
  model: 'video-2',
  deployment: 'video-2-fal',
  provider: 'fal',
  upstream_model: 'fal-ai/veo3',
  seconds,
  provider_cost_micros,
});

describe('billing: usage per provider deployment', () => {
  let acme: string;
  let globex: string;
  const day1 = '2026-11-21';
  const day2 = '2026-11-22';

  beforeAll(async () => {
    acme = await newOrg('Acme');
    globex = await newOrg('Globex');
    // Day 1: Acme's chat on OpenAI twice and on the simulator once; a capture from before providers.
    await capture(acme, 100_001, openaiChat(1_000, 200, 40_003));
    await capture(acme, 200_002, openaiChat(3_000, 100, 60_001));
    await capture(acme, 7, simulatorChat(10, 20));
    await capture(acme, 999_999);
    clock.advance(DAY_MS);
    // Day 2: Acme's and Globex's videos on fal, and one more OpenAI chat for Globex.
    await capture(acme, 400_000, falVideo(4, 250_000));
    await capture(globex, 800_000, falVideo(8, 500_001));
    await capture(globex, 300_000, openaiChat(500, 500, 299_999));
  });

  it('sums each deployment per day, exactly, leaving out captures that carry no usage', async () => {
    const usage = await reportOk({ group_by: ['day', 'deployment'] });
    expect(usage).toEqual({
      object: 'usage_report',
      start: '2026-10-24',
      end: day2,
      group_by: ['day', 'deployment'],
      data: [
        { day: day1, deployment: 'chat-2-openai', requests: 2, input_tokens: 4_000, output_tokens: 300, seconds: 0, revenue: 0.300003, provider_cost: 0.100004, margin: 0.199999 },
        { day: day1, deployment: 'chat-2-simulator', requests: 1, input_tokens: 10, output_tokens: 20, seconds: 0, revenue: 0.000007, provider_cost: 0, margin: 0.000007 },
        { day: day2, deployment: 'chat-2-openai', requests: 1, input_tokens: 500, output_tokens: 500, seconds: 0, revenue: 0.3, provider_cost: 0.299999, margin: 0.000001 },
        { day: day2, deployment: 'video-2-fal', requests: 2, input_tokens: 0, output_tokens: 0, seconds: 12, revenue: 1.2, provider_cost: 0.750001, margin: 0.449999 },
      ],
      has_more: false,
      next_after: null,
    });
  });

  it('groups by model and provider unless told otherwise, sorted by the groups in their order', async () => {
    const byModel = await reportOk({ group_by: ['model', 'provider'] });
    expect(byModel.data.map((r) => [r.model, r.provider, r.requests, r.revenue, r.margin])).toEqual([
      ['chat-2', 'openai', 3, 0.600003, 0.2],
      ['chat-2', 'simulator', 1, 0.000007, 0.000007],
      ['video-2', 'fal', 2, 1.2, 0.449999],
    ]);
    const byProvider = await reportOk({ group_by: ['provider', 'day'] });
    expect(byProvider.data.map((r) => [r.provider, r.day])).toEqual([
      ['fal', day2],
      ['openai', day1],
      ['openai', day2],
      ['simulator', day1],
    ]);
    // No groups: one row of totals.
    expect((await reportOk({ group_by: [] })).data).toEqual([
      { requests: 6, input_tokens: 4_510, output_tokens: 820, seconds: 12, revenue: 1.80001, provider_cost: 1.150004, margin: 0.650006 },
    ]);
  });

  it("reports one organization's usage alone, and refuses an organization that does not exist", async () => {
    const usage = await reportOk({ group_by: ['model', 'deployment'], org_id: globex });
    expect(usage.data).toEqual([
      { model: 'chat-2', deployment: 'chat-2-openai', requests: 1, input_tokens: 500, output_tokens: 500, seconds: 0, revenue: 0.3, provider_cost: 0.299999, margin: 0.000001 },
      { model: 'video-2', deployment: 'video-2-fal', requests: 1, input_tokens: 0, output_tokens: 0, seconds: 8, revenue: 0.8, provider_cost: 0.500001, margin: 0.299999 },
    ]);
    expect(await report({ group_by: ['model'], org_id: 'org_nobody' })).toMatchObject({ ok: false, error: { status: 404, code: 'resource_not_found' } });
  });

  it('covers the days asked for, both included, and only those', async () => {
    const first = await reportOk({ group_by: ['day'], start: day1, end: day1 });
    expect(first).toMatchObject({ start: day1, end: day1, data: [{ day: day1, requests: 3, revenue: 0.30001 }] });
    const later = await reportOk({ group_by: ['day'], start: day2 });
    expect(later).toMatchObject({ start: day2, end: day2, data: [{ day: day2, requests: 3 }] });
    // Thirty days ending on the day asked for.
    expect(await reportOk({ group_by: ['day'], end: day1 })).toMatchObject({ start: '2026-10-23', end: day1, data: [{ day: day1 }] });
    expect((await reportOk({ group_by: ['day'], start: '2025-01-01', end: '2025-12-31' })).data).toEqual([]);
  });

  it('refuses an end before the start, a range over 366 days and a day that is not in the calendar, naming the parameter', async () => {
    const refused = async (query: Record<string, unknown>) => {
      const reply: Reply<UsageReport> = await report({ group_by: ['model'], ...query });
      if (reply.ok) throw new Error(`accepted ${JSON.stringify(query)}`);
      return { status: reply.error.status, type: reply.error.type, code: reply.error.code, param: reply.error.param };
    };
    const invalid = (param: string) => ({ status: 400, type: 'invalid_request_error', code: 'invalid_parameter', param });
    expect(await refused({ start: day2, end: day1 })).toEqual(invalid('end'));
    // Only start given, and after today: start is what is wrong.
    expect(await refused({ start: '2026-12-01' })).toEqual(invalid('start'));
    expect(await refused({ start: '2025-01-01', end: '2026-01-02' })).toEqual(invalid('start'));
    expect(await refused({ start: '2026-02-30' })).toEqual(invalid('start'));
    expect(await refused({ end: '2026-13-01' })).toEqual(invalid('end'));
    expect(await refused({ group_by: ['organization'] })).toEqual(invalid('group_by[0]'));
  });

  it('accepts a full leap year, 366 days', async () => {
    expect(await reportOk({ group_by: ['model'], start: '2024-01-01', end: '2024-12-31' })).toMatchObject({ start: '2024-01-01', end: '2024-12-31', data: [] });
  });
});
