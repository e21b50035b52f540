import 'reflect-metadata';
import { type ApiKey, ManualClock, sortableIds, Subjects, type Reply } from '@oc/contracts';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteStores, SqliteSnapshotStore } from '@oc/eventstore';
import { InProcessBroker, InProcessServerStrategy, InProcessServiceClient, type ServiceClient } from '@oc/messaging';
import { SqliteReadModelStore } from '@oc/readmodel';
import { createLogger } from '@oc/telemetry';
import { NestFactory } from '@nestjs/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBilling } from '../src/app';
import { accountStream } from '../src/domain/account';

/** 2026-11-22 23:00 UTC: an hour before the next UTC day. */
const LATE = Date.UTC(2026, 10, 22, 23);

describe('billing: API key budgets, decided with the reservations', () => {
  const clock = new ManualClock(LATE);
  let bus: ServiceClient;
  let close: () => Promise<void>;
  beforeAll(async () => {
    const stores = openSqliteStores({ filename: ':memory:', clock });
    const broker = new InProcessBroker();
    bus = new InProcessServiceClient(broker);
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

  const ok = <T>(reply: Reply<T>): T => {
    if (!reply.ok) throw new Error(JSON.stringify(reply.error));
    return reply.data;
  };
  const key = async (org_id: string, name: string, budget?: object) =>
    ok(await bus.request<ApiKey>(Subjects.billing.createApiKey, { org_id, name, scopes: ['chat:write'], ...(budget ? { budget } : {}) }));
  const keys = async (org_id: string) => ok(await bus.request<{ data: ApiKey[] }>(Subjects.billing.listApiKeys, { org_id })).data;
  const reserve = (org_id: string, reservation_id: string, amount_micros: number, key_id: string) =>
    bus.request(Subjects.billing.reserveFunds, { org_id, reservation_id, amount_micros, description: 'chat', key_id });

  it("lets exactly the number of 200 concurrent reservations the key's daily budget affords through; another key of the organization is unaffected", async () => {
    const org = ok(await bus.request<{ id: string }>(Subjects.billing.createOrganization, { name: 'Acme', tier: 'standard' }));
    ok(await bus.request(Subjects.billing.addCredits, { org_id: org.id, amount_micros: 100_000_000, description: 'Top-up' }));
    const limited = await key(org.id, 'limited', { daily: 1_000_000 });
    const other = await key(org.id, 'other');
    expect(limited).toMatchObject({ budget: { daily: 1, monthly: null, total: null }, spend: { today: 0, this_month: 0, total: 0 } });

    const replies = await Promise.all([
      ...Array.from({ length: 200 }, (_, i) => reserve(org.id, `lim_${i}`, 30_000, limited.id)),
      ...Array.from({ length: 50 }, (_, i) => reserve(org.id, `oth_${i}`, 30_000, other.id)),
    ]);
    const mine = replies.slice(0, 200);
    expect(mine.filter((r) => r.ok)).toHaveLength(33);
    const refused = mine.filter((r) => !r.ok);
    expect(refused).toHaveLength(167);
    for (const r of refused) {
      if (r.ok) continue;
      expect(r.error).toMatchObject({ status: 402, type: 'insufficient_quota', code: 'key_budget_exceeded' });
      expect(r.error.message).toBe(
        `This request would exceed the daily budget of the API key '${limited.id}' ($1.00): it requires $0.03 and $0.01 is left today (UTC).`,
      );
    }
    expect(replies.slice(200).every((r) => r.ok)).toBe(true);

    // Captures count what they took (0.01 of each 0.03): ten of them free 0.20 of the day.
    const accepted = mine.flatMap((r, i) => (r.ok ? [`lim_${i}`] : []));
    for (const reservation_id of accepted.slice(0, 10)) {
      const usage = { product: 'chat', model: 'chat-2', deployment: 'sim', provider: 'simulator', upstream_model: 'sim', provider_cost_micros: 0, key_id: limited.id };
      ok(await bus.request(Subjects.billing.captureReservation, { org_id: org.id, reservation_id, amount_micros: 10_000, usage }));
    }
    // A release frees all of its hold: 0.03 more.
    ok(await bus.request(Subjects.billing.releaseReservation, { org_id: org.id, reservation_id: accepted[10] }));
    // 1.00 - 0.99 + 0.20 + 0.03 = 0.24 left.
    expect(await reserve(org.id, 'lim_x', 240_001, limited.id)).toMatchObject({ ok: false, error: { code: 'key_budget_exceeded' } });
    expect((await reserve(org.id, 'lim_y', 240_000, limited.id)).ok).toBe(true);

    // The key shows what its captures charged, in USD.
    const shown = (await keys(org.id)).find((k) => k.id === limited.id)!;
    expect(shown.spend).toEqual({ today: 0.1, this_month: 0.1, total: 0.1 });

    // Past UTC midnight the day starts anew; the held and captured of yesterday stay in the month and total.
    clock.set(Date.UTC(2026, 10, 23, 0, 0, 1));
    expect((await reserve(org.id, 'lim_next_day', 1_000_000, limited.id)).ok).toBe(true);
    expect(await reserve(org.id, 'lim_next_day_2', 1, limited.id)).toMatchObject({ ok: false, error: { code: 'key_budget_exceeded' } });
    expect((await keys(org.id)).find((k) => k.id === limited.id)!.spend).toEqual({ today: 0, this_month: 0.1, total: 0.1 });
  });

  it('applies a changed budget from the next reservation, and removes a limit with null', async () => {
    const org = ok(await bus.request<{ id: string }>(Subjects.billing.createOrganization, { name: 'Beta', tier: 'standard' }));
    ok(await bus.request(Subjects.billing.addCredits, { org_id: org.id, amount_micros: 100_000_000, description: 'Top-up' }));
    const k = await key(org.id, 'ci', { total: 500_000 });
    expect((await reserve(org.id, 'a', 500_000, k.id)).ok).toBe(true);
    expect(await reserve(org.id, 'b', 1, k.id)).toMatchObject({ ok: false, error: { code: 'key_budget_exceeded' } });
    const raised = ok(await bus.request<ApiKey>(Subjects.billing.updateApiKey, { org_id: org.id, key_id: k.id, budget: { total: 600_000, monthly: 2_000_000 } }));
    expect(raised.budget).toEqual({ daily: null, monthly: 2, total: 0.6 });
    expect((await reserve(org.id, 'b', 100_000, k.id)).ok).toBe(true);
    expect(await reserve(org.id, 'c', 1, k.id)).toMatchObject({ ok: false, error: { code: 'key_budget_exceeded' } });
    const removed = ok(await bus.request<ApiKey>(Subjects.billing.updateApiKey, { org_id: org.id, key_id: k.id, budget: { total: null } }));
    expect(removed.budget).toEqual({ daily: null, monthly: 2, total: null });
    expect((await reserve(org.id, 'c', 1_000_000, k.id)).ok).toBe(true);
    // Another organization's key is not found, and its budget is not set.
    expect(await bus.request(Subjects.billing.updateApiKey, { org_id: 'org_other', key_id: k.id, budget: { total: 1 } })).toMatchObject({ ok: false, error: { status: 404 } });
  });
});

describe('billing: key budgets across a restart', () => {
  it('ignores a snapshot of the earlier version (no keys): folds the account from its first event, the key\'s spend exact', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'oc-key-budget-snapshots-'));
    const start = async () => {
      const clock = new ManualClock(LATE);
      const stores = openSqliteStores({ filename: join(dir, 'events.sqlite'), clock });
      const snapshots = new SqliteSnapshotStore(join(dir, 'snapshots.sqlite'), (error) => {
        throw error;
      });
      const broker = new InProcessBroker();
      const client = new InProcessServiceClient(broker);
      const billing = await createBilling({
        eventStore: stores.store,
        snapshots,
        readModels: new SqliteReadModelStore({ filename: join(dir, 'read-models.sqlite') }),
        client,
        clock,
        ids: sortableIds,
        logger: createLogger({ service: 'billing-test', level: 'silent' }),
      });
      const app = await NestFactory.createMicroservice(billing.module, { strategy: new InProcessServerStrategy(broker), logger: false });
      await app.listen();
      return {
        client,
        store: stores.store,
        async close() {
          await app.close();
          await billing.close();
          await stores.close();
          snapshots.close();
        },
      };
    };
    try {
      const first = await start();
      const ask = async <T>(subject: string, body: object) => {
        const reply = await first.client.request<T>(subject, body);
        if (!reply.ok) throw new Error(JSON.stringify(reply.error));
        return reply.data;
      };
      const org = await ask<{ id: string }>(Subjects.billing.createOrganization, { name: 'Acme', tier: 'standard' });
      await ask(Subjects.billing.addCredits, { org_id: org.id, amount_micros: 10_000_000, description: 'Top-up' });
      const k = await ask<ApiKey>(Subjects.billing.createApiKey, { org_id: org.id, name: 'k', scopes: ['chat:write'], budget: { daily: 1_000_000 } });
      await ask(Subjects.billing.reserveFunds, { org_id: org.id, reservation_id: 'r1', amount_micros: 600_000, description: 'chat', key_id: k.id });
      const [last] = (await first.store.readStream(accountStream(org.id))).slice(-1);
      await first.close();
      // As version 2 kept it: no keys, and figures that would show if it were used.
      const older = new SqliteSnapshotStore(join(dir, 'snapshots.sqlite'), (error) => {
        throw error;
      });
      older.save(accountStream(org.id), {
        revision: last!.revision,
        eventId: last!.id,
        version: 2,
        state: { status: 'open', orgId: org.id, tier: 'standard', customLimits: {}, balanceMicros: 0, reservations: [], settled: { minutes: [] } },
      });
      older.close();

      const second = await start();
      const reserve = (reservation_id: string, amount_micros: number) =>
        second.client.request(Subjects.billing.reserveFunds, { org_id: org.id, reservation_id, amount_micros, description: 'chat', key_id: k.id });
      expect(await reserve('r2', 400_001)).toMatchObject({ ok: false, error: { status: 402, code: 'key_budget_exceeded' } });
      expect((await reserve('r3', 400_000)).ok).toBe(true);
      await second.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
