import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { CHROMIUM, CHROMIUM_ARGS, chromiumInstalled } from './chromium';
import { expectConformance } from './conformance';
import { startFakeStripe } from './fake-stripe';

const { webhooks } = createRequire(new URL('../../billing/package.json', import.meta.url))('stripe') as {
  webhooks: { generateTestHeaderString(opts: { payload: string; secret: string }): string };
};

const ADMIN_TOKEN = 'billing-page-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const SECRET_KEY = 'sk_test_fake_billing_page';
const WEBHOOK_SECRET = 'whsec_test_fake_billing_page';
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/dashboard');

/** Chromium drops the body of an answer once its page has navigated away (here, to Stripe): it cannot be checked. */
const unreadable = (error: unknown) => /navigated away|No resource with given identifier/.test((error as Error).message);

describe.skipIf(!chromiumInstalled())('the console’s Billing page in Chromium', () => {
  let dir: string;
  let app: Standalone;
  let stripe: Awaited<ReturnType<typeof startFakeStripe>>;
  let browser: Browser;
  let page: Page;
  const consoleErrors: string[] = [];
  const answers: Promise<string | undefined>[] = [];

  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as any;
  };
  let events = 0;
  const deliver = async (type: string, object: Record<string, unknown>) => {
    const payload = JSON.stringify({ id: `evt_page_${++events}`, object: 'event', created: Math.floor(Date.now() / 1000), data: { object }, type });
    const res = await fetch(`${app.url}/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET }) },
      body: payload,
    });
    expect(res.status).toBe(200);
  };

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-billing-'));
    stripe = await startFakeStripe(SECRET_KEY);
    app = await startStandalone({
      config: loadStandaloneConfig({
        PORT: '0',
        HOST: '127.0.0.1',
        DATA_DIR: dir,
        ADMIN_TOKEN,
        LOG_LEVEL: 'silent',
        STRIPE_SECRET_KEY: SECRET_KEY,
        STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
        STRIPE_API_BASE_URL: stripe.url,
      }),
    });
    const acme = (await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' })).id;
    await admin('POST', `/organizations/${acme}/members`, { email: 'ada@acme.test', password: PASSWORD });
    const session = { id: 'cs_test_page', object: 'checkout.session', amount_total: 2000, currency: 'usd', client_reference_id: acme, mode: 'payment', payment_intent: 'pi_page', payment_status: 'paid' };
    await deliver('checkout.session.completed', session);
    await deliver('charge.refunded', {
      id: 'ch_page',
      object: 'charge',
      amount: 2000,
      amount_refunded: 500,
      currency: 'usd',
      payment_intent: 'pi_page',
      receipt_url: 'https://pay.stripe.com/receipts/payment/pi_page',
    });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(`${message.text()} ${message.location().url}`);
    });
    page.on('pageerror', (error) => consoleErrors.push(error.message));
    page.on('response', (response) => {
      const url = new URL(response.url());
      if (url.origin !== app.url || !url.pathname.startsWith('/console/v1/')) return;
      answers.push(
        (async () => {
          try {
            const headers = new Headers(await response.allHeaders());
            const text = /^application\/json/.test(headers.get('content-type') ?? '') ? await response.text() : '';
            await expectConformance(app.url, response.request().method(), url, response.status(), headers, text);
            return undefined;
          } catch (error) {
            return unreadable(error) ? undefined : (error as Error).message;
          }
        })(),
      );
    });
    // Stripe's hosted page, as far as this test needs it: the browser arrives there.
    await page.route('https://checkout.stripe.com/**', (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<h1>Stripe Checkout</h1>' }));
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await stripe?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('shows the balance and the history with refunds and a receipt, and sends the member to Stripe\u2019s Checkout for a top-up', async () => {
    await page.goto(`${app.url}/dashboard/`);
    await page.getByLabel('Email').fill('ada@acme.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('link', { name: 'Billing' }).click();
    await page.getByRole('heading', { level: 1, name: 'Billing' }).waitFor();
    await expect.poll(() => page.getByTestId('available').textContent()).toBe('$15.00');
    const row = page.getByRole('row').filter({ hasText: 'Partly refunded' });
    await expect.poll(() => row.count()).toBe(1);
    expect(await row.textContent()).toContain('$20.00');
    expect(await row.textContent()).toContain('$5.00');
    expect(await row.getByRole('link', { name: 'Receipt' }).getAttribute('href')).toBe('https://pay.stripe.com/receipts/payment/pi_page');
    await page.screenshot({ path: join(ARTIFACTS, 'billing.png'), fullPage: true });

    await page.getByLabel('Amount (USD)').fill('25');
    await page.getByRole('button', { name: 'Pay with Stripe' }).click();
    await page.waitForURL(/^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/);
    expect(stripe.sessions.at(-1)!.form.get('line_items[0][price_data][unit_amount]')).toBe('2500');

    // Back from Stripe, on a phone.
    await page.setViewportSize({ width: 375, height: 800 });
    await page.goto(`${app.url}/dashboard/billing?top_up=success`);
    await page.getByText('your payment was received').waitFor();
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(ARTIFACTS, 'billing-375.png'), fullPage: true });

    expect(consoleErrors).toEqual([]);
    expect((await Promise.all(answers)).filter(Boolean)).toEqual([]);
  });
});
