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

const ADMIN_TOKEN = 'auto-recharge-page-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const SECRET_KEY = 'sk_test_fake_auto_recharge_page';
const WEBHOOK_SECRET = 'whsec_test_fake_auto_recharge_page';
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/dashboard');

/** Chromium drops the body of an answer once its page has navigated away (here, to Stripe): it cannot be checked. */
const unreadable = (error: unknown) => /navigated away|No resource with given identifier/.test((error as Error).message);

describe.skipIf(!chromiumInstalled())('auto-recharge on the console’s Billing page in Chromium', () => {
  let dir: string;
  let app: Standalone;
  let stripe: Awaited<ReturnType<typeof startFakeStripe>>;
  let browser: Browser;
  let page: Page;
  let acme: string;
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
    const payload = JSON.stringify({ id: `evt_ar_page_${++events}`, object: 'event', created: Math.floor(Date.now() / 1000), data: { object }, type });
    const res = await fetch(`${app.url}/webhooks/stripe`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET }) },
      body: payload,
    });
    expect(res.status).toBe(200);
  };

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-auto-recharge-'));
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
        // No cool-down and a check every second: a declined card reaches three failures within seconds.
        AUTO_RECHARGE_COOLDOWN_SECONDS: '0',
        AUTO_RECHARGE_CHECK_SECONDS: '1',
      }),
    });
    acme = (await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' })).id;
    await admin('POST', `/organizations/${acme}/credits`, { amount: 1, description: 'opening credit' });
    await admin('POST', `/organizations/${acme}/members`, { email: 'ada@acme.test', password: PASSWORD });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('console', (message) => {
      if (message.type() === 'error' && !/status of 400/.test(message.text())) consoleErrors.push(`${message.text()} ${message.location().url}`);
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
    await page.route('https://checkout.stripe.com/**', (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<h1>Stripe Checkout</h1>' }));
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await stripe?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('saves a card on Stripe, turns auto-recharge on, and shows it turned off after three declined payments, and why', async () => {
    await page.goto(`${app.url}/dashboard/`);
    await page.getByLabel('Email').fill('ada@acme.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('link', { name: 'Billing' }).click();
    const status = page.getByTestId('auto-recharge-status');
    await expect.poll(() => status.textContent()).toContain('No card saved yet.');
    expect(await status.textContent()).toContain('Off');

    // On without a card: refused, and the page says what to do.
    await page.getByLabel('Auto-recharge on').check();
    await page.getByRole('button', { name: 'Save auto-recharge' }).click();
    await page.getByText('Save a card first').waitFor();

    await page.getByRole('button', { name: 'Save a card with Stripe' }).click();
    await page.waitForURL(/^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/);
    const setup = stripe.sessions.at(-1)!;
    expect(setup.form.get('mode')).toBe('setup');
    await deliver('setup_intent.succeeded', {
      id: 'seti_page',
      object: 'setup_intent',
      customer: setup.form.get('customer'),
      payment_method: 'pm_card_chargeDeclined',
      metadata: { organization_id: acme },
      status: 'succeeded',
    });

    await page.goto(`${app.url}/dashboard/billing?card_setup=success`);
    await page.getByText('Card saved with Stripe').waitFor();
    await expect.poll(() => status.textContent()).toContain('A card is saved');
    await page.getByLabel('Recharge when available falls below (USD)').fill('5');
    await page.getByLabel('Charge the card (USD)').fill('10');
    await page.getByLabel('Auto-recharge on').check();
    await page.getByRole('button', { name: 'Save auto-recharge' }).click();
    await page.getByText('Auto-recharge saved.').waitFor();
    expect(stripe.paymentIntents[0]!.form.get('amount')).toBe('1000');

    // The declined card is tried again each second until auto-recharge turns itself off.
    await expect
      .poll(
        async () => {
          await page.reload();
          await status.waitFor();
          return page.getByRole('alert').filter({ hasText: 'Turned off after 3 failed payments' }).count();
        },
        { timeout: 20_000, interval: 500 },
      )
      .toBe(1);
    expect(await page.getByRole('alert').filter({ hasText: 'Turned off after 3 failed payments' }).textContent()).toContain('Your card was declined.');
    expect(await status.textContent()).toContain('Off');
    expect(await status.textContent()).toContain('3 failed payments in a row');
    expect(await page.getByTestId('auto-recharge-last').textContent()).toContain('Failed');
    expect(stripe.paymentIntents).toHaveLength(3);
    const rows = page.getByRole('row').filter({ hasText: 'Auto-recharge' });
    await expect.poll(() => rows.count()).toBe(3);
    expect(await rows.first().textContent()).toContain('Failed');
    expect(await rows.first().textContent()).toContain('$10.00');
    await page.screenshot({ path: join(ARTIFACTS, 'billing-auto-recharge.png'), fullPage: true });

    await page.setViewportSize({ width: 375, height: 800 });
    await page.reload();
    await page.getByRole('alert').filter({ hasText: 'Turned off after 3 failed payments' }).waitFor();
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(ARTIFACTS, 'billing-auto-recharge-375.png'), fullPage: true });

    expect(consoleErrors).toEqual([]);
    expect((await Promise.all(answers)).filter(Boolean)).toEqual([]);
  });
});
