import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '@oc/contracts';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { expectConformance } from './conformance';
import { startFakeStripe } from './fake-stripe';

const { webhooks } = createRequire(new URL('../../billing/package.json', import.meta.url))('stripe') as {
  webhooks: { generateTestHeaderString(opts: { payload: string; secret: string; timestamp?: number }): string };
};

const ADMIN_TOKEN = 'auto-recharge-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const SECRET_KEY = 'sk_test_fake_autorecharge_0123456789';
const WEBHOOK_SECRET = 'whsec_test_fake_autorecharge_0123456789';
const clock = new ManualClock(Date.UTC(2026, 11, 2, 12));
const seconds = () => Math.floor(clock.now() / 1000);

/** A member's browser on the console API: its cookie and CSRF token; every answer checked against the OpenAPI document. */
function memberBrowser(base: string) {
  let cookie = '';
  let csrf = '';
  return async (method: string, path: string, body?: unknown) => {
    const headers: Record<string, string> = { ...(cookie ? { cookie } : {}), ...(method !== 'GET' && csrf ? { 'x-csrf-token': csrf } : {}) };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const set = res.headers.get('set-cookie');
    if (set) cookie = set.split(';')[0]!;
    const text = await res.text();
    await expectConformance(base, method, new URL(path, base), res.status, res.headers, text);
    const json = JSON.parse(text);
    if (json?.object === 'console_session') csrf = json.csrf_token;
    return { status: res.status, body: json };
  };
}

describe('auto-recharge with Stripe (a fake Stripe API, deliveries signed with the SDK, the service on a manual clock)', () => {
  let dir: string;
  let app: Standalone;
  let stripe: Awaited<ReturnType<typeof startFakeStripe>>;
  let events = 0;

  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const balance = async (orgId: string) => (await admin('GET', `/organizations/${orgId}/balance`)).body.available as number;
  const stripeEvent = (type: string, object: Record<string, unknown>) =>
    JSON.stringify({
      id: `evt_test_${++events}`,
      object: 'event',
      api_version: '2025-09-30.clover',
      created: seconds(),
      data: { object },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
    });
  const deliver = async (payload: string) => {
    const signature = webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET, timestamp: seconds() });
    const res = await fetch(`${app.url}/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signature },
      body: payload,
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  /** An organization with `credit` USD and a signed-in member who saved `paymentMethod` through Checkout in setup mode. */
  async function organizationWithCard(name: string, credit: number, paymentMethod: string) {
    const org = (await admin('POST', '/organizations', { name, tier: 'standard' })).body.id as string;
    await admin('POST', `/organizations/${org}/credits`, { amount: credit, description: 'opening credit' });
    const email = `ops@${name.toLowerCase()}.test`;
    await admin('POST', `/organizations/${org}/members`, { email, password: PASSWORD });
    const member = memberBrowser(app.url);
    expect((await member('POST', '/console/v1/sessions', { email, password: PASSWORD })).status).toBe(200);

    const off = await member('PATCH', '/console/v1/auto-recharge', { enabled: true, threshold: 5, amount: 20 });
    expect(off.status).toBe(400);
    expect(off.body.error).toMatchObject({ code: 'payment_method_required', param: 'enabled' });

    const setup = await member('POST', '/console/v1/auto-recharge/payment-method');
    expect(setup.status).toBe(200);
    expect(setup.body).toMatchObject({ object: 'checkout_session', mode: 'setup', url: expect.stringContaining('https://checkout.stripe.com/') });
    const session = stripe.sessions.find((s) => s.object.id === setup.body.id)!;
    const customer = session.form.get('customer')!;
    expect(session.form.get('mode')).toBe('setup');
    expect(session.form.get('currency')).toBe('usd');
    expect(session.form.get('setup_intent_data[metadata][organization_id]')).toBe(org);
    expect(session.form.get('success_url')).toBe(`${app.url}/dashboard/billing?card_setup=success`);
    expect(stripe.customers.find((c) => c.id === customer)!.form.get('metadata[organization_id]')).toBe(org);

    const saved = stripeEvent('setup_intent.succeeded', {
      id: `seti_${org}`,
      object: 'setup_intent',
      customer,
      payment_method: paymentMethod,
      metadata: { organization_id: org },
      status: 'succeeded',
      usage: 'off_session',
    });
    expect((await deliver(saved)).body).toEqual({ received: true, outcome: 'applied' });
    expect((await deliver(saved)).body).toEqual({ received: true, outcome: 'repeat' });
    expect((await member('GET', '/console/v1/auto-recharge')).body).toMatchObject({ enabled: false, payment_method_saved: true });
    return { org, member, customer };
  }

  const intentsOf = (org: string) => stripe.paymentIntents.filter((p) => p.form.get('metadata[organization_id]') === org);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-autorecharge-'));
    stripe = await startFakeStripe(SECRET_KEY);
    app = await startStandalone({
      clock,
      config: loadStandaloneConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dir,
        ADMIN_TOKEN,
        LOG_LEVEL: 'silent',
        STRIPE_SECRET_KEY: SECRET_KEY,
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        STRIPE_API_BASE_URL: stripe.url,
        TOPUP_MIN_USD: '5',
        TOPUP_MAX_USD: '500',
        AUTO_RECHARGE_CHECK_SECONDS: '60',
        AUTO_RECHARGE_COOLDOWN_SECONDS: '600',
        AUTO_RECHARGE_MAX_FAILURES: '3',
      }),
    });
  });
  afterAll(async () => {
    await app?.close();
    await stripe?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('charges the saved card once, off-session, when spending takes available funds below the threshold; its webhook credits it once', async () => {
    const { org, member, customer } = await organizationWithCard('Acme', 5.2, 'pm_card_visa');
    const on = await member('PATCH', '/console/v1/auto-recharge', { enabled: true, threshold: 5, amount: 20 });
    expect(on.body).toMatchObject({ object: 'auto_recharge', enabled: true, threshold: 5, amount: 20, last_attempt: null, consecutive_failures: 0 });
    expect(intentsOf(org)).toHaveLength(0);

    // A video holds $0.40: $4.80 available, below the $5 threshold.
    const key = (await admin('POST', `/organizations/${org}/keys`, { name: 'k', scopes: ['video:write'] })).body.key;
    const video = await fetch(`${app.url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'video-2', prompt: 'A quiet harbour at dawn', seconds: '4', size: '1280x720' }),
    });
    expect(video.status).toBe(200);
    expect(await balance(org)).toBeCloseTo(4.8, 6);

    clock.advance(60_000);
    await vi.waitFor(() => expect(intentsOf(org)).toHaveLength(1), { timeout: 10_000, interval: 50 });
    // Checks at once (a member's changes, the periodic check) start nothing more: the attempt was decided once.
    await Promise.all([1, 2, 3].map(() => member('PATCH', '/console/v1/auto-recharge', { enabled: true })));
    expect(intentsOf(org)).toHaveLength(1);

    const [intent] = intentsOf(org);
    expect(Object.fromEntries(intent!.form)).toMatchObject({
      amount: '2000',
      currency: 'usd',
      customer,
      payment_method: 'pm_card_visa',
      off_session: 'true',
      confirm: 'true',
      'metadata[organization_id]': org,
      'metadata[auto_recharge_attempt]': `autorecharge_${org}_1`,
    });
    expect(intent!.headers['idempotency-key']).toBe(`autorecharge_${org}_1`);
    // Stripe's answer is not the credit: the webhook is.
    expect(await balance(org)).toBeCloseTo(4.8, 6);

    const succeeded = stripeEvent('payment_intent.succeeded', intent!.object);
    const answers = await Promise.all([deliver(succeeded), deliver(succeeded)]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    expect(await balance(org)).toBeCloseTo(24.8, 6);
    expect((await deliver(succeeded)).body).toEqual({ received: true, outcome: 'repeat' });
    expect(await balance(org)).toBeCloseTo(24.8, 6);

    const state = (await member('GET', '/console/v1/auto-recharge')).body;
    expect(state).toMatchObject({
      enabled: true,
      consecutive_failures: 0,
      disabled_reason: null,
      last_attempt: { id: `autorecharge_${org}_1`, payment_id: intent!.object.id, amount: 20, outcome: 'succeeded', failure_message: null },
      next_attempt_after: state.last_attempt.created + 600,
    });
    const credits = (await member('GET', '/console/v1/ledger')).body.data.filter((e: { reference: string | null }) => e.reference === intent!.object.id);
    expect(credits).toHaveLength(1);
    expect(credits[0]).toMatchObject({ type: 'credit', amount: 20, reference: intent!.object.id, description: `Auto-recharge paid with Stripe (${intent!.object.id})` });
    const [payment] = (await member('GET', '/console/v1/payments')).body.data;
    expect(payment).toMatchObject({ id: intent!.object.id, status: 'paid', amount: 20, auto_recharge: true, checkout_session: null });
  });

  it('a declined card: one attempt per cool-down, and after 3 failures in a row auto-recharge turns itself off and says why', async () => {
    const { org, member } = await organizationWithCard('Initech', 1, 'pm_card_chargeDeclined');
    // Turned on below the threshold: the first attempt at once.
    const first = await member('PATCH', '/console/v1/auto-recharge', { enabled: true, threshold: 5, amount: 10 });
    expect(intentsOf(org)).toHaveLength(1);
    expect(first.body).toMatchObject({
      enabled: true,
      consecutive_failures: 1,
      last_attempt: { outcome: 'failed', failure_message: 'Your card was declined.', amount: 10, payment_id: intentsOf(org)[0]!.object.id },
    });
    // Stripe's webhook for the same failure adds nothing.
    expect((await deliver(stripeEvent('payment_intent.payment_failed', intentsOf(org)[0]!.object))).body).toEqual({ received: true, outcome: 'repeat' });

    // Within the cool-down nothing is tried again.
    clock.advance(300_000);
    await member('PATCH', '/console/v1/auto-recharge', { enabled: true });
    expect(intentsOf(org)).toHaveLength(1);

    for (const n of [2, 3]) {
      clock.advance(600_000);
      await member('PATCH', '/console/v1/auto-recharge', { enabled: true });
      await vi.waitFor(async () => expect((await member('GET', '/console/v1/auto-recharge')).body.consecutive_failures).toBe(n), { timeout: 10_000, interval: 50 });
      expect(intentsOf(org)).toHaveLength(n);
      expect(new Set(intentsOf(org).map((i) => i.headers['idempotency-key'])).size).toBe(n);
    }

    const stopped = (await member('GET', '/console/v1/auto-recharge')).body;
    expect(stopped).toMatchObject({ enabled: false, consecutive_failures: 3, next_attempt_after: null, last_attempt: { outcome: 'failed' } });
    expect(stopped.disabled_reason).toContain('3 failed payments in a row');
    expect(stopped.disabled_reason).toContain('Your card was declined.');
    expect(await balance(org)).toBe(1);

    const history = (await member('GET', '/console/v1/payments')).body.data;
    expect(history).toHaveLength(3);
    for (const row of history) expect(row).toMatchObject({ status: 'failed', amount: 10, auto_recharge: true });

    // Off, it charges nothing however long the balance stays low; turning it on again starts afresh.
    clock.advance(3_600_000);
    const again = await member('PATCH', '/console/v1/auto-recharge', { enabled: true });
    expect(again.body).toMatchObject({ enabled: true, disabled_reason: null, consecutive_failures: 1 });
    expect(intentsOf(org)).toHaveLength(4);
  });

  it('an attempt Stripe could not answer stays the one attempt, asked again with its key by the next check, never a second PaymentIntent', async () => {
    const { org, member } = await organizationWithCard('Umbrella', 2, 'pm_card_visa');
    const before = stripe.paymentIntentRequests.length;
    // The SDK tries three times (two retries, one key); all three fail.
    stripe.failPaymentIntents(3);
    const on = await member('PATCH', '/console/v1/auto-recharge', { enabled: true, threshold: 5, amount: 20 });
    expect(on.status).toBe(200);
    expect(on.body).toMatchObject({ enabled: true, consecutive_failures: 0, last_attempt: { id: `autorecharge_${org}_1`, outcome: 'pending', payment_id: null } });
    const tried = stripe.paymentIntentRequests.slice(before);
    expect(tried.map((r) => r.idempotencyKey)).toEqual([`autorecharge_${org}_1`, `autorecharge_${org}_1`, `autorecharge_${org}_1`]);
    expect(intentsOf(org)).toHaveLength(0);

    // Within the minute the starting replica may still be waiting for Stripe: nothing is sent.
    await member('PATCH', '/console/v1/auto-recharge', { enabled: true });
    expect(stripe.paymentIntentRequests.length).toBe(before + 3);

    clock.advance(60_000);
    await vi.waitFor(() => expect(intentsOf(org)).toHaveLength(1), { timeout: 10_000, interval: 50 });
    expect(new Set(stripe.paymentIntentRequests.slice(before).map((r) => r.idempotencyKey))).toEqual(new Set([`autorecharge_${org}_1`]));
    await vi.waitFor(async () => expect((await member('GET', '/console/v1/auto-recharge')).body.last_attempt).toMatchObject({ outcome: 'succeeded', payment_id: intentsOf(org)[0]!.object.id }), {
      timeout: 10_000,
      interval: 50,
    });
  });

  it('refuses an amount outside the top-up bounds, naming it', async () => {
    const org = (await admin('POST', '/organizations', { name: 'Hooli', tier: 'standard' })).body.id as string;
    await admin('POST', `/organizations/${org}/members`, { email: 'ops@hooli.test', password: PASSWORD });
    const member = memberBrowser(app.url);
    await member('POST', '/console/v1/sessions', { email: 'ops@hooli.test', password: PASSWORD });
    const refused = await member('PATCH', '/console/v1/auto-recharge', { enabled: false, threshold: 5, amount: 500.01 });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ code: 'amount_out_of_range', param: 'amount' });
    expect((await member('PATCH', '/console/v1/auto-recharge', { threshold: 5.001 })).body.error).toMatchObject({ param: 'threshold' });
  });
});
