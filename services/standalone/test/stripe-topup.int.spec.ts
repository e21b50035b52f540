import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { expectConformance } from './conformance';
import { startFakeStripe } from './fake-stripe';

// The official SDK is a dependency of billing, which signs nothing: the tests sign deliveries with its own helper.
const { webhooks } = createRequire(new URL('../../billing/package.json', import.meta.url))('stripe') as {
  webhooks: { generateTestHeaderString(opts: { payload: string; secret: string; timestamp?: number }): string };
};

const ADMIN_TOKEN = 'stripe-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const SECRET_KEY = 'sk_test_fake_0123456789abcdef';
const WEBHOOK_SECRET = 'whsec_test_fake_secret_0123456789';

async function started(dir: string, env: Record<string, string>) {
  return startStandalone({
    config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN, LOG_LEVEL: 'silent', ...env }),
  });
}

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

describe('top-up with Stripe (a fake Stripe API, deliveries signed with the SDK)', () => {
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
      created: Math.floor(Date.now() / 1000),
      data: { object },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type,
    });
  /** Delivers a body as Stripe does, signed now (or at `timestamp`) unless a header is given. */
  const deliver = async (payload: string, options: { timestamp?: number; signature?: string | null } = {}) => {
    const signature = options.signature === undefined ? webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET, timestamp: options.timestamp }) : options.signature;
    const res = await fetch(`${app.url}/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8', ...(signature === null ? {} : { 'stripe-signature': signature }) },
      body: payload,
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const session = (orgId: string, paymentIntent: string, cents: number, paymentStatus: 'paid' | 'unpaid') => ({
    id: `cs_test_${paymentIntent}`,
    object: 'checkout.session',
    amount_total: cents,
    currency: 'usd',
    client_reference_id: orgId,
    mode: 'payment',
    payment_intent: paymentIntent,
    payment_status: paymentStatus,
    status: 'complete',
  });
  const charge = (paymentIntent: string, cents: number, refundedCents: number) => ({
    id: `ch_${paymentIntent}`,
    object: 'charge',
    amount: cents,
    amount_refunded: refundedCents,
    currency: 'usd',
    payment_intent: paymentIntent,
    refunded: refundedCents === cents,
    receipt_url: `https://pay.stripe.com/receipts/payment/${paymentIntent}`,
  });
  const dispute = (paymentIntent: string, id: string, cents: number) => ({
    id,
    object: 'dispute',
    amount: cents,
    charge: `ch_${paymentIntent}`,
    currency: 'usd',
    payment_intent: paymentIntent,
    reason: 'fraudulent',
    status: 'needs_response',
  });

  let acme: string;
  let member: ReturnType<typeof memberBrowser>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-stripe-'));
    stripe = await startFakeStripe(SECRET_KEY);
    app = await started(dir, {
      STRIPE_SECRET_KEY: SECRET_KEY,
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
      STRIPE_API_BASE_URL: stripe.url,
      TOPUP_MIN_USD: '5',
      TOPUP_MAX_USD: '500',
    });
    acme = (await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' })).body.id;
    await admin('POST', `/organizations/${acme}/members`, { email: 'ada@acme.test', password: PASSWORD });
    member = memberBrowser(app.url);
    expect((await member('POST', '/console/v1/sessions', { email: 'ada@acme.test', password: PASSWORD })).status).toBe(200);
  });
  afterAll(async () => {
    await app?.close();
    await stripe?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('starts a Checkout Session for the member\u2019s organization through the SDK, form-encoded, and answers its url', async () => {
    const started = await member('POST', '/console/v1/top-ups', { amount: 20 });
    expect(started).toEqual({
      status: 200,
      body: { object: 'checkout_session', id: 'cs_test_0001', url: 'https://checkout.stripe.com/c/pay/cs_test_0001', amount: 20, currency: 'usd' },
    });
    const [made] = stripe.sessions;
    expect(made!.form.get('mode')).toBe('payment');
    expect(made!.form.get('client_reference_id')).toBe(acme);
    expect(made!.form.get('line_items[0][price_data][unit_amount]')).toBe('2000');
    expect(made!.form.get('line_items[0][price_data][currency]')).toBe('usd');
    expect(made!.form.get('success_url')).toBe(`${app.url}/dashboard/billing?top_up=success`);
    expect(made!.form.get('cancel_url')).toBe(`${app.url}/dashboard/billing?top_up=cancelled`);
    expect(made!.headers['idempotency-key']).toMatch(/^topup_/);
    // Starting a session credits nothing: the money comes with the webhook.
    expect(await balance(acme)).toBe(0);
  });

  it('refuses an amount outside the operator\u2019s bounds or in fractions of a cent', async () => {
    for (const amount of [4.99, 500.01]) {
      const refused = await member('POST', '/console/v1/top-ups', { amount });
      expect(refused.status).toBe(400);
      expect(refused.body.error).toMatchObject({ type: 'invalid_request_error', code: 'amount_out_of_range', param: 'amount' });
      expect(refused.body.error.message).toContain('$5.00 to $500.00');
    }
    expect((await member('POST', '/console/v1/top-ups', { amount: 10.001 })).body.error).toMatchObject({ param: 'amount' });
    expect(stripe.sessions).toHaveLength(1);
  });

  it('credits a paid completion exactly once, delivered twice at once and with its async success out of order', async () => {
    const completed = stripeEvent('checkout.session.completed', session(acme, 'pi_paid', 2000, 'paid'));
    const asyncSucceeded = stripeEvent('checkout.session.async_payment_succeeded', session(acme, 'pi_paid', 2000, 'paid'));
    const answers = await Promise.all([deliver(asyncSucceeded), deliver(completed), deliver(completed), deliver(asyncSucceeded)]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(await balance(acme)).toBe(20);
    // A redelivery days later still credits nothing more.
    expect((await deliver(completed)).body).toEqual({ received: true, outcome: 'repeat' });
    expect(await balance(acme)).toBe(20);
    const ledger = (await member('GET', '/console/v1/ledger')).body.data;
    expect(ledger.filter((e: { type: string }) => e.type === 'credit')).toEqual([
      expect.objectContaining({ amount: 20, reference: 'pi_paid', available_after: 20 }),
    ]);
  });

  it('credits an unpaid completion only once its async payment succeeds', async () => {
    expect((await deliver(stripeEvent('checkout.session.completed', session(acme, 'pi_async', 1500, 'unpaid')))).status).toBe(200);
    expect(await balance(acme)).toBe(20);
    const pending = (await member('GET', '/console/v1/payments')).body.data.find((p: { id: string }) => p.id === 'pi_async');
    expect(pending).toMatchObject({ status: 'pending', amount: 15, paid_at: null, checkout_session: 'cs_test_pi_async' });
    const succeeded = stripeEvent('checkout.session.async_payment_succeeded', session(acme, 'pi_async', 1500, 'paid'));
    await Promise.all([deliver(succeeded), deliver(succeeded)]);
    expect(await balance(acme)).toBe(35);
    // Its charge's receipt, from charge.succeeded.
    await deliver(stripeEvent('charge.succeeded', { ...charge('pi_async', 1500, 0), receipt_url: 'https://pay.stripe.com/receipts/payment/pi_async' }));
    const paid = (await member('GET', '/console/v1/payments')).body.data.find((p: { id: string }) => p.id === 'pi_async');
    expect(paid).toMatchObject({ status: 'paid', amount: 15, paid_at: expect.any(Number), receipt_url: 'https://pay.stripe.com/receipts/payment/pi_async' });
  });

  it('records a failed async payment in the history and credits nothing', async () => {
    await deliver(stripeEvent('checkout.session.async_payment_failed', session(acme, 'pi_failed', 3000, 'unpaid')));
    await deliver(stripeEvent('checkout.session.completed', session(acme, 'pi_failed', 3000, 'unpaid')));
    const failed = (await member('GET', '/console/v1/payments')).body.data.find((p: { id: string }) => p.id === 'pi_failed');
    expect(failed).toMatchObject({ status: 'failed', amount: 30, paid_at: null });
    expect(await balance(acme)).toBe(35);
  });

  it('debits a refund once, matched to its top-up through the payment intent, whatever order partial refunds arrive in', async () => {
    const partial = stripeEvent('charge.refunded', charge('pi_paid', 2000, 500));
    const more = stripeEvent('charge.refunded', charge('pi_paid', 2000, 800));
    await deliver(more);
    await Promise.all([deliver(partial), deliver(more)]);
    // $8.00 refunded in all, whichever delivery came first.
    expect(await balance(acme)).toBe(27);
    const paid = (await member('GET', '/console/v1/payments')).body.data.find((p: { id: string }) => p.id === 'pi_paid');
    expect(paid).toMatchObject({
      status: 'partially_refunded',
      amount: 20,
      refunded: 8,
      receipt_url: 'https://pay.stripe.com/receipts/payment/pi_paid',
      refunds: [{ amount: 8, created: expect.any(Number) }],
    });
  });

  it('refuses a bad signature with 400 in the spec\u2019s error shape and credits nothing', async () => {
    const payload = stripeEvent('checkout.session.completed', session(acme, 'pi_forged', 1000, 'paid'));
    const signature = webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET });
    const tampered = await deliver(payload.replace('"amount_total":1000', '"amount_total":900000'), { signature });
    expect(tampered).toEqual({
      status: 400,
      body: { error: { type: 'invalid_request_error', code: 'invalid_signature', param: 'Stripe-Signature', message: expect.any(String) } },
    });
    expect((await deliver(payload, { signature: webhooks.generateTestHeaderString({ payload, secret: 'whsec_someone_else' }) })).status).toBe(400);
    // Signed six minutes ago: outside the 300 s tolerance (a replay).
    expect((await deliver(payload, { timestamp: Math.floor(Date.now() / 1000) - 360 })).body.error.code).toBe('invalid_signature');
    expect((await deliver(payload, { signature: null })).body.error).toMatchObject({ code: 'missing_signature', param: 'Stripe-Signature' });
    // No Stripe event is this large: refused before billing sees it.
    const huge = stripeEvent('checkout.session.completed', { ...session(acme, 'pi_huge', 1000, 'paid'), padding: 'x'.repeat(300 * 1024) });
    expect(await deliver(huge)).toMatchObject({ status: 413, body: { error: { type: 'invalid_request_error', code: 'request_too_large' } } });
    expect(await balance(acme)).toBe(27);
  });

  it('acknowledges an unknown organization without crediting anything, never with a 5xx', async () => {
    const unknown = await deliver(stripeEvent('checkout.session.completed', session('org_nobody', 'pi_stray', 5000, 'paid')));
    expect(unknown).toEqual({ status: 200, body: { received: true, outcome: 'ignored', reason: 'unknown organization org_nobody' } });
    expect((await deliver(stripeEvent('customer.created', { id: 'cus_1', object: 'customer' }))).body.outcome).toBe('ignored');
    expect(await balance(acme)).toBe(27);
  });

  it('holds a dispute after spend, leaving a debt that refuses new paid work with 402', async () => {
    const globex = (await admin('POST', '/organizations', { name: 'Globex', tier: 'standard' })).body.id;
    const key = (await admin('POST', `/organizations/${globex}/keys`, { name: 'k', scopes: ['chat:write', 'video:write'] })).body.key;
    await deliver(stripeEvent('checkout.session.completed', session(globex, 'pi_globex', 1000, 'paid')));
    expect(await balance(globex)).toBe(10);
    const chat = () =>
      fetch(`${app.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'chat-2', max_tokens: 16, messages: [{ role: 'user', content: 'Say hello.' }] }),
      });
    expect((await chat()).status).toBe(200);
    const spent = 10 - (await balance(globex));
    expect(spent).toBeGreaterThan(0);

    const disputed = stripeEvent('charge.dispute.created', dispute('pi_globex', 'dp_1', 1000));
    await Promise.all([deliver(disputed), deliver(disputed)]);
    expect(await balance(globex)).toBeCloseTo(-spent, 6);
    const refused = await chat();
    expect(refused.status).toBe(402);
    expect(((await refused.json()) as any).error.type).toBe('insufficient_quota');
    const video = await fetch(`${app.url}/v1/videos`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'video-2', prompt: 'A quiet harbour at dawn', seconds: '4', size: '1280x720' }),
    });
    expect(video.status).toBe(402);
    const ledger = (await admin('GET', `/organizations/${globex}/ledger`)).body.data;
    expect(ledger[0]).toMatchObject({ type: 'dispute', amount: -10, reference: 'pi_globex' });
    const [payment] = (await admin('GET', `/organizations/${globex}/payments`)).body.data;
    expect(payment).toMatchObject({ id: 'pi_globex', status: 'disputed', disputed: 10, disputes: [{ id: 'dp_1', amount: 10 }] });
  });
});

describe('top-up without a Stripe key', () => {
  let dir: string;
  let app: Standalone;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'oc-stripe-off-'));
    app = await started(dir, {});
  });
  afterAll(async () => {
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('answers the console that top-up is not configured, and a delivery 400, never a 500', async () => {
    const admin = (path: string, body: unknown) =>
      fetch(`${app.url}/admin/v1${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then((r) => r.json() as Promise<any>);
    const org = (await admin('/organizations', { name: 'Initech' })).id;
    await admin(`/organizations/${org}/members`, { email: 'peter@initech.test', password: PASSWORD });
    const member = memberBrowser(app.url);
    await member('POST', '/console/v1/sessions', { email: 'peter@initech.test', password: PASSWORD });
    const refused = await member('POST', '/console/v1/top-ups', { amount: 20 });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ type: 'invalid_request_error', code: 'topup_not_configured' });
    expect(refused.body.error.message).toMatch(/not configured/);
    const delivery = await fetch(`${app.url}/webhooks/stripe`, { method: 'POST', headers: { 'stripe-signature': 't=1,v1=00' }, body: '{}' });
    expect(delivery.status).toBe(400);
  });
});
