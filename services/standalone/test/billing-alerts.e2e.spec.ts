import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { clientFor } from './client';
import { distributed, embedded, type RunningService, type Starter } from './harness';
import { natsReachable } from './nats';

const modes: [string, Starter][] = [
  ['embedded', embedded],
  ...((await natsReachable()) ? [['distributed over NATS', distributed] as [string, Starter]] : []),
];

const CHAT = { model: 'chat-2', messages: [{ role: 'user', content: 'Name one vegetable.' }], max_tokens: 8 };

/**
 * Billing's alerts end to end: decided by billing's process manager (the shared event store embedded, a JetStream
 * durable consumer in billing's own process distributed) and delivered by the webhook service's consumer of them.
 */
describe.each(modes)('billing alerts (%s)', (_mode, start) => {
  let service: RunningService;
  let api: ReturnType<typeof clientFor>;
  let dir: string;
  let receiver: Receiver;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-billing-alerts-e2e-'));
    service = await start({ DATA_DIR: join(dir, 'data'), WEBHOOK_MODE: 'development', WEBHOOK_ALLOW_PRIVATE: '1', CHAT_SIMULATOR_WORD_DELAY_MS: '1' });
    api = clientFor(service);
    receiver = await httpReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await service?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('sends balance.low when set above the balance, then every threshold a capture crosses, each once', async () => {
    const { orgId, key } = await api.newCustomer({ credit: 20, scopes: ['chat:write', 'webhook:read', 'webhook:write'] });
    // The webhook process may come up after the gateway reports ready.
    await vi.waitFor(async () => expect((await api.call('GET', '/v1/webhooks', { token: key })).status).toBe(200), { timeout: 30_000, interval: 200 });
    const hook = await api.call('POST', '/v1/webhooks', { token: key, body: { url: receiver.url, events: ['billing.budget_threshold', 'balance.low'] } });
    expect(hook.status).toBe(200);

    const set = await api.admin('PATCH', `/organizations/${orgId}/alerts`, { monthly_budget: 0.000001, low_balance: 1000 });
    expect(set.body.alerts).toEqual({ monthly_budget: 0.000001, budget_thresholds: [50, 80, 100], low_balance: 1000 });
    const types = () => receiver.received.map((r) => JSON.parse(r.rawBody) as { type: string; data: { threshold?: number } });
    await vi.waitFor(() => expect(types()).toHaveLength(1), { timeout: 20_000, interval: 50 });
    expect(types()[0]).toMatchObject({ type: 'balance.low', data: { organization_id: orgId, low_balance: 1000 } });

    expect((await api.call('POST', '/v1/chat/completions', { token: key, body: CHAT })).status).toBe(200);
    await vi.waitFor(() => expect(types()).toHaveLength(4), { timeout: 20_000, interval: 50 });
    expect(types().slice(1).map((e) => [e.type, e.data.threshold]).sort()).toEqual([
      ['billing.budget_threshold', 100],
      ['billing.budget_threshold', 50],
      ['billing.budget_threshold', 80],
    ]);
    expect((await api.call('POST', '/v1/chat/completions', { token: key, body: CHAT })).status).toBe(200);
    // A later delivery of another organization's alert shows the consumer went past this capture.
    const other = await api.newCustomer({ credit: 1, scopes: ['webhook:write'] });
    await api.call('POST', '/v1/webhooks', { token: other.key, body: { url: receiver.url, events: ['balance.low'] } });
    await api.admin('PATCH', `/organizations/${other.orgId}/alerts`, { low_balance: 5 });
    await vi.waitFor(() => expect(types()).toHaveLength(5), { timeout: 20_000, interval: 50 });
    expect(types()[4]).toMatchObject({ type: 'balance.low', data: { organization_id: other.orgId } });
  });
});
