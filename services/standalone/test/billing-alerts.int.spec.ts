import { createHmac } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpReceiver, type Receiver } from '../../webhook/test/support';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { expectConformance } from './conformance';

const ADMIN_TOKEN = 'billing-alerts-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const CHAT = { model: 'chat-2', messages: [{ role: 'user', content: 'Name one vegetable.' }], max_tokens: 8 };
const STRIPE_WEBHOOK_SECRET = 'whsec_test_fake_secret_0123456789';
// The official SDK is a dependency of billing: the test signs Stripe's deliveries with its helper.
const { webhooks } = createRequire(new URL('../../billing/package.json', import.meta.url))('stripe') as {
  webhooks: { generateTestHeaderString(opts: { payload: string; secret: string }): string };
};

/** An organization's monthly budget and low-balance alerts, set over HTTP and delivered as signed webhook events. */
describe('organization budget and billing alerts', () => {
  let dir: string;
  let app: Standalone;
  let orgId: string;
  let key: string;
  const receivers: Receiver[] = [];

  async function call(method: string, path: string, headers: Record<string, string>, body?: unknown) {
    const res = await fetch(`${app.url}${path}`, {
      method,
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    await expectConformance(app.url, method, new URL(path, app.url), res.status, res.headers, text);
    return { status: res.status, body: text ? JSON.parse(text) : undefined };
  }
  const admin = (method: string, path: string, body?: unknown) => call(method, `/admin/v1${path}`, { authorization: `Bearer ${ADMIN_TOKEN}` }, body);
  const v1 = (method: string, path: string, body?: unknown) => call(method, `/v1${path}`, { authorization: `Bearer ${key}` }, body);
  const hook = async (events: string[]) => {
    const receiver = await httpReceiver();
    receivers.push(receiver);
    const created = await v1('POST', '/webhooks', { url: receiver.url, events });
    expect(created.status).toBe(200);
    return { receiver, id: created.body.id as string, secret: created.body.secret as string };
  };
  const bodies = (r: Receiver) => r.received.map((got) => JSON.parse(got.rawBody) as { id: string; type: string; data: Record<string, unknown> });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-billing-alerts-'));
    app = await startStandalone({
      config: loadStandaloneConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dir,
        ADMIN_TOKEN,
        LOG_LEVEL: 'silent',
        CHAT_SIMULATOR_WORD_DELAY_MS: '1',
        WEBHOOK_MODE: 'development',
        WEBHOOK_ALLOW_PRIVATE: '1',
        STRIPE_SECRET_KEY: 'sk_test_fake_0123456789abcdef',
        STRIPE_WEBHOOK_SECRET,
      }),
    });
    orgId = (await admin('POST', '/organizations', { name: 'acme', tier: 'standard' })).body.id;
    await admin('POST', `/organizations/${orgId}/credits`, { amount: 20 });
    await admin('POST', `/organizations/${orgId}/members`, { email: 'ann@acme.test', password: PASSWORD });
    key = (await admin('POST', `/organizations/${orgId}/keys`, { name: 'app', scopes: ['chat:write', 'webhook:read', 'webhook:write'] })).body.key;
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('shows the defaults in the organization object, and refuses bad settings with 400 naming the field', async () => {
    expect((await admin('GET', `/organizations/${orgId}`)).body.alerts).toEqual({ monthly_budget: null, budget_thresholds: [50, 80, 100], low_balance: null });
    const path = `/organizations/${orgId}/alerts`;
    for (const [body, param] of [
      [{ monthly_budget: -5 }, 'monthly_budget'],
      [{ monthly_budget: 0.0000001 }, 'monthly_budget'],
      [{ budget_thresholds: [50, 50] }, 'budget_thresholds'],
      [{ budget_thresholds: [0] }, 'budget_thresholds[0]'],
      [{ budget_thresholds: [] }, 'budget_thresholds'],
      [{ low_balance: 'five' }, 'low_balance'],
      [{ budget: 10 }, 'budget'],
    ] as const) {
      const refused = await admin('PATCH', path, body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.body.error).toMatchObject({ type: 'invalid_request_error', param });
    }
    expect((await admin('PATCH', `/organizations/org_missing/alerts`, { monthly_budget: 1 })).status).toBe(404);
  });

  it('lets a member set the alerts from the console', async () => {
    const signIn = await fetch(`${app.url}/console/v1/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'ann@acme.test', password: PASSWORD }),
    });
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!;
    const { csrf_token } = (await signIn.json()) as { csrf_token: string };
    const set = await call('PATCH', '/console/v1/organization/alerts', { cookie, 'x-csrf-token': csrf_token }, { budget_thresholds: [90, 25] });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ id: orgId, alerts: { monthly_budget: null, budget_thresholds: [25, 90], low_balance: null } });
    const refused = await call('PATCH', '/console/v1/organization/alerts', { cookie, 'x-csrf-token': csrf_token }, { low_balance: -1 });
    expect(refused.body.error).toMatchObject({ param: 'low_balance' });
  });

  it('delivers billing.budget_threshold once, signed, only to the endpoints that asked for it', async () => {
    const subscribed = await hook(['billing.budget_threshold', 'balance.low']);
    const videoOnly = await hook(['video.completed', 'video.failed']);
    const lowOnly = await hook(['balance.low']);

    expect((await v1('POST', '/chat/completions', CHAT)).status).toBe(200);
    const spent = (await admin('GET', `/organizations/${orgId}/ledger`)).body.data.find((e: { type: string }) => e.type === 'capture').charged as number;
    expect(spent).toBeGreaterThan(0);
    // The month's spend is two thirds of the budget: past 50%, short of 80%.
    const budget = Math.round(spent * 1.5 * 1e6) / 1e6;
    const set = await admin('PATCH', `/organizations/${orgId}/alerts`, { monthly_budget: budget, budget_thresholds: [80, 50] });
    expect(set.body.alerts).toEqual({ monthly_budget: budget, budget_thresholds: [50, 80], low_balance: null });
    expect((await admin('GET', `/organizations/${orgId}`)).body.alerts.monthly_budget).toBe(budget);

    await vi.waitFor(() => expect(subscribed.receiver.received).toHaveLength(1), { timeout: 10_000, interval: 20 });
    const got = subscribed.receiver.received[0]!;
    const [t, v1sig] = String(got.headers['x-service-signature']).split(',');
    const timestamp = t!.slice('t='.length);
    expect(v1sig).toBe(`v1=${createHmac('sha256', subscribed.secret).update(`${timestamp}.${got.rawBody}`).digest('hex')}`);
    const month = new Date().toISOString().slice(0, 7);
    expect(Object.keys(JSON.parse(got.rawBody))).toEqual(['id', 'type', 'created', 'data']);
    expect(JSON.parse(got.rawBody)).toEqual({
      id: expect.stringMatching(/^evt_/),
      type: 'billing.budget_threshold',
      created: expect.any(Number),
      data: { object: 'budget_alert', organization_id: orgId, month, threshold: 50, monthly_budget: budget, spent, currency: 'usd' },
    });

    // Saying the same again changes nothing; a low-balance amount above the balance sends balance.low, after the above.
    await admin('PATCH', `/organizations/${orgId}/alerts`, { monthly_budget: budget });
    await admin('PATCH', `/organizations/${orgId}/alerts`, { low_balance: 100 });
    await vi.waitFor(() => expect(lowOnly.receiver.received).toHaveLength(1), { timeout: 10_000, interval: 20 });
    await vi.waitFor(() => expect(subscribed.receiver.received).toHaveLength(2), { timeout: 10_000, interval: 20 });
    expect(bodies(subscribed.receiver).map((b) => b.type)).toEqual(['billing.budget_threshold', 'balance.low']);
    expect(bodies(lowOnly.receiver)[0]).toMatchObject({ type: 'balance.low', data: { object: 'balance_alert', organization_id: orgId, low_balance: 100, currency: 'usd' } });
    expect(videoOnly.receiver.received).toEqual([]);

    // The delivery log shows it like a video event's.
    const log = await v1('GET', `/webhooks/${subscribed.id}/deliveries`);
    expect(log.body.data.map((d: { event_type: string; delivery_status: string }) => [d.event_type, d.delivery_status]).sort()).toEqual([
      ['balance.low', 'succeeded'],
      ['billing.budget_threshold', 'succeeded'],
    ]);

    // The next capture crosses 80%: one more, never 50% again.
    expect((await v1('POST', '/chat/completions', CHAT)).status).toBe(200);
    await vi.waitFor(() => expect(subscribed.receiver.received).toHaveLength(3), { timeout: 10_000, interval: 20 });
    expect(bodies(subscribed.receiver)[2]).toMatchObject({ type: 'billing.budget_threshold', data: { threshold: 80 } });
    expect(bodies(lowOnly.receiver)).toHaveLength(1);
  });

  it('sends a sample of each billing type from the test operation, signed', async () => {
    const sample = await hook(['billing.budget_threshold']);
    for (const type of ['billing.budget_threshold', 'balance.low', 'billing.payment_succeeded', 'billing.payment_failed']) {
      const sent = await v1('POST', `/webhooks/${sample.id}/test`, { event_type: type });
      expect(sent.body, type).toMatchObject({ success: true, status_code: 204 });
    }
    expect(bodies(sample.receiver).map((b) => [b.type, b.data.object, b.data.organization_id])).toEqual([
      ['billing.budget_threshold', 'budget_alert', orgId],
      ['balance.low', 'balance_alert', orgId],
      ['billing.payment_succeeded', 'payment', orgId],
      ['billing.payment_failed', 'payment', orgId],
    ]);
  });

  it('delivers billing.payment_succeeded and billing.payment_failed from Stripe top-ups, once each', async () => {
    const payments = await hook(['billing.payment_succeeded', 'billing.payment_failed']);
    let n = 0;
    const stripe = async (type: string, paymentIntent: string, cents: number, paid: boolean) => {
      const payload = JSON.stringify({
        id: `evt_test_${++n}`,
        object: 'event',
        api_version: '2025-09-30.clover',
        created: Math.floor(Date.now() / 1000),
        data: {
          object: {
            id: `cs_test_${paymentIntent}`,
            object: 'checkout.session',
            amount_total: cents,
            currency: 'usd',
            client_reference_id: orgId,
            mode: 'payment',
            payment_intent: paymentIntent,
            payment_status: paid ? 'paid' : 'unpaid',
            status: 'complete',
          },
        },
        livemode: false,
        pending_webhooks: 1,
        request: { id: null, idempotency_key: null },
        type,
      });
      const res = await fetch(`${app.url}/webhooks/stripe`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': webhooks.generateTestHeaderString({ payload, secret: STRIPE_WEBHOOK_SECRET }) },
        body: payload,
      });
      expect(res.status).toBe(200);
    };
    await stripe('checkout.session.completed', 'pi_paid', 2_500, true);
    await stripe('checkout.session.completed', 'pi_paid', 2_500, true);
    await stripe('checkout.session.completed', 'pi_bank', 4_000, false);
    await stripe('checkout.session.async_payment_failed', 'pi_bank', 4_000, false);
    await vi.waitFor(() => expect(payments.receiver.received).toHaveLength(2), { timeout: 10_000, interval: 20 });
    expect(bodies(payments.receiver).map((b) => [b.type, b.data]).sort(([a], [b]) => String(a).localeCompare(String(b)))).toEqual([
      ['billing.payment_failed', { object: 'payment', id: 'pi_bank', organization_id: orgId, amount: 40, currency: 'usd' }],
      ['billing.payment_succeeded', { object: 'payment', id: 'pi_paid', organization_id: orgId, amount: 25, currency: 'usd' }],
    ]);
  });
});
