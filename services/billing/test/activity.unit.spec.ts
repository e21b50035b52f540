import { type ActivityMessage, type BillingEvent, ManualClock, type ServedUsage, toApiError } from '@oc/contracts';
import { SqliteEventStore } from '@oc/eventstore';
import { ProjectionRunner, SqliteReadModelStore } from '@oc/readmodel';
import { afterEach, describe, expect, it } from 'vitest';
import { ActivityLog } from '../src/application/activity';
import { billingReadModels } from '../src/projections';

/** Noon on 20 November 2026, in milliseconds; rows a day apart stay on their own UTC days. */
const DAY_1 = Date.UTC(2026, 10, 20, 12);
const DAY_2 = DAY_1 + 86_400_000;
const s = (ms: number) => ms / 1000;

const closing: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closing.splice(0).reverse()) await close();
});

const org = (org_id: string): BillingEvent => ({ type: 'OrganizationCreated', data: { org_id, name: org_id, tier: 'standard', created: 1 } });
const credited = (org_id: string): BillingEvent => ({ type: 'CreditsAdded', data: { org_id, amount_micros: 100_000_000, description: 'Credit' } });
const reserved = (org_id: string, reservation_id: string, amount_micros: number, key_id?: string): BillingEvent => ({
  type: 'FundsReserved',
  data: { org_id, reservation_id, amount_micros, description: `Reserved for ${reservation_id}`, ...(key_id ? { key_id } : {}) },
});
const captured = (org_id: string, reservation_id: string, amount_micros: number, released_micros: number, usage?: ServedUsage): BillingEvent => ({
  type: 'ReservationCaptured',
  data: { org_id, reservation_id, amount_micros, released_micros, ...(usage ? { usage } : {}) },
});
const released = (org_id: string, reservation_id: string, amount_micros: number, reason: 'released' | 'expired'): BillingEvent => ({
  type: 'ReservationReleased',
  data: { org_id, reservation_id, amount_micros, reason },
});
const served = { deployment: 'simulator', provider: 'simulator', upstream_model: 'simulator', provider_cost_micros: 0 };
const chat = (key_id: string | undefined, input_tokens: number, output_tokens: number): ServedUsage => ({
  product: 'chat',
  model: 'chat-2',
  ...served,
  input_tokens,
  output_tokens,
  ...(key_id ? { key_id } : {}),
});
const video = (key_id: string, seconds: number): ServedUsage => ({ product: 'video', model: 'video-2', ...served, seconds, key_id });

/** Given billing's events, each stored at its time, when the log is asked of the read model built from them. */
async function given(events: Array<[at: number, event: BillingEvent]>) {
  const clock = new ManualClock(DAY_1);
  const eventStore = new SqliteEventStore({ filename: ':memory:', clock });
  const readModels = new SqliteReadModelStore({ filename: ':memory:' });
  for (const [at, event] of events) {
    clock.set(at);
    await eventStore.appendToStream(`account-${(event.data as { org_id: string }).org_id}`, [event], { expectedRevision: 'any' });
  }
  const runner = new ProjectionRunner(eventStore, readModels, billingReadModels.projections, { collections: billingReadModels.collections });
  closing.push(() => eventStore.close(), () => readModels.close(), () => runner.stop());
  await runner.start();
  const log = new ActivityLog({ readModels });
  return { when: (query: Partial<ActivityMessage<'listActivity'>> & { org_id: string }) => log.list({ limit: 20, ...query }) };
}

const row = {
  object: 'activity',
  key_id: null,
  model: null,
  product: null,
  amount_charged: 0,
  input_tokens: null,
  output_tokens: null,
  seconds: null,
  settled_at: null,
};

describe('activity read model: each reservation from its hold to its settlement', () => {
  it('shows a reservation held, then charged with its tokens, released or expired, newest first', async () => {
    const log = await given([
      [DAY_1, org('org_a')],
      [DAY_1, credited('org_a')],
      [DAY_1, reserved('org_a', 'chatcmpl_1', 40_000, 'key_backend')],
      [DAY_1 + 1_000, reserved('org_a', 'video_1', 400_000, 'key_studio')],
      [DAY_1 + 2_000, reserved('org_a', 'cmpl_1', 10_000, 'key_backend')],
      [DAY_1 + 3_000, reserved('org_a', 'chatcmpl_2', 20_000, 'key_backend')],
      [DAY_1 + 4_000, captured('org_a', 'chatcmpl_1', 1_200, 38_800, chat('key_backend', 10, 5))],
      [DAY_1 + 5_000, released('org_a', 'video_1', 400_000, 'released')],
      [DAY_1 + 6_000, released('org_a', 'cmpl_1', 10_000, 'expired')],
    ]);

    expect((await log.when({ org_id: 'org_a' })).data).toEqual([
      { ...row, id: 'chatcmpl_2', key_id: 'key_backend', product: 'chat', status: 'held', description: 'Reserved for chatcmpl_2', amount_held: 0.02, created: s(DAY_1) + 3 },
      {
        ...row,
        id: 'cmpl_1',
        key_id: 'key_backend',
        product: 'text',
        status: 'expired',
        description: 'Reserved for cmpl_1',
        amount_held: 0.01,
        created: s(DAY_1) + 2,
        settled_at: s(DAY_1) + 6,
      },
      {
        ...row,
        id: 'video_1',
        key_id: 'key_studio',
        product: 'video',
        status: 'released',
        description: 'Reserved for video_1',
        amount_held: 0.4,
        created: s(DAY_1) + 1,
        settled_at: s(DAY_1) + 5,
      },
      {
        ...row,
        id: 'chatcmpl_1',
        key_id: 'key_backend',
        model: 'chat-2',
        product: 'chat',
        status: 'charged',
        description: 'Reserved for chatcmpl_1',
        amount_held: 0.04,
        amount_charged: 0.0012,
        input_tokens: 10,
        output_tokens: 5,
        created: s(DAY_1),
        settled_at: s(DAY_1) + 4,
      },
    ]);
  });

  it("fills in the key from the charge for a reservation made before reservations named it, and a video's seconds", async () => {
    const log = await given([
      [DAY_1, org('org_a')],
      [DAY_1, credited('org_a')],
      [DAY_1, reserved('org_a', 'video_1', 800_000)],
      [DAY_1, captured('org_a', 'video_1', 800_000, 0, video('key_studio', 8))],
    ]);

    expect((await log.when({ org_id: 'org_a' })).data).toMatchObject([
      { id: 'video_1', key_id: 'key_studio', model: 'video-2', product: 'video', status: 'charged', amount_charged: 0.8, seconds: 8, input_tokens: null },
    ]);
  });

  it('narrows by key, model, status and UTC days, pages newest first, and shows one organization nothing of another', async () => {
    const log = await given([
      [DAY_1, org('org_a')],
      [DAY_1, org('org_b')],
      [DAY_1, credited('org_a')],
      [DAY_1, credited('org_b')],
      [DAY_1, reserved('org_a', 'chatcmpl_1', 40_000, 'key_a1')],
      [DAY_1, captured('org_a', 'chatcmpl_1', 1_000, 39_000, chat('key_a1', 5, 5))],
      [DAY_1 + 1_000, reserved('org_a', 'video_1', 400_000, 'key_a2')],
      [DAY_2, reserved('org_a', 'chatcmpl_2', 40_000, 'key_a2')],
      [DAY_2, captured('org_a', 'chatcmpl_2', 2_000, 38_000, chat('key_a2', 5, 5))],
      [DAY_2, reserved('org_b', 'chatcmpl_3', 40_000, 'key_b1')],
      // The same resource id in another organization is another row.
      [DAY_2, reserved('org_b', 'video_1', 400_000, 'key_b1')],
    ]);
    const ids = async (query: Partial<ActivityMessage<'listActivity'>>) => (await log.when({ org_id: 'org_a', ...query })).data.map((r) => r.id);

    expect(await ids({})).toEqual(['chatcmpl_2', 'video_1', 'chatcmpl_1']);
    expect(await ids({ key_id: 'key_a2' })).toEqual(['chatcmpl_2', 'video_1']);
    expect(await ids({ key_id: 'key_b1' })).toEqual([]);
    expect(await ids({ model: 'chat-2' })).toEqual(['chatcmpl_2', 'chatcmpl_1']);
    expect(await ids({ status: 'held' })).toEqual(['video_1']);
    expect(await ids({ key_id: 'key_a2', status: 'charged' })).toEqual(['chatcmpl_2']);
    expect(await ids({ start: '2026-11-21' })).toEqual(['chatcmpl_2']);
    expect(await ids({ end: '2026-11-20' })).toEqual(['video_1', 'chatcmpl_1']);
    expect(await ids({ start: '2026-11-22', end: '2026-11-30' })).toEqual([]);

    const first = await log.when({ org_id: 'org_a', limit: 2 });
    expect([first.data.map((r) => r.id), first.has_more]).toEqual([['chatcmpl_2', 'video_1'], true]);
    const second = await log.when({ org_id: 'org_a', limit: 2, after: 'video_1' });
    expect([second.data.map((r) => r.id), second.has_more]).toEqual([['chatcmpl_1'], false]);

    expect((await log.when({ org_id: 'org_b' })).data.map((r) => [r.id, r.key_id])).toEqual([
      ['video_1', 'key_b1'],
      ['chatcmpl_3', 'key_b1'],
    ]);
    // A row of another organization is no cursor here.
    await expect(log.when({ org_id: 'org_b', after: 'chatcmpl_1' }).catch((e) => toApiError(e).status)).resolves.toBe(404);
  });

  it('pages a filtered log on from a row that no longer matches the filter (a held request charged since)', async () => {
    const log = await given([
      [DAY_1, org('org_a')],
      [DAY_1, credited('org_a')],
      [DAY_1, reserved('org_a', 'chatcmpl_1', 40_000, 'key_a1')],
      [DAY_1 + 1_000, reserved('org_a', 'chatcmpl_2', 40_000, 'key_a1')],
      [DAY_1 + 2_000, reserved('org_a', 'chatcmpl_3', 40_000, 'key_a1')],
      // The first page of held requests ended on chatcmpl_2, which was charged before the next page was asked.
      [DAY_1 + 3_000, captured('org_a', 'chatcmpl_2', 1_000, 39_000, chat('key_a1', 5, 5))],
    ]);

    const next = await log.when({ org_id: 'org_a', status: 'held', limit: 2, after: 'chatcmpl_2' });
    expect([next.data.map((r) => r.id), next.has_more]).toEqual([['chatcmpl_1'], false]);
  });
});
