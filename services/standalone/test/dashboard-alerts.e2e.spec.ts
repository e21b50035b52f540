import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { CHROMIUM, CHROMIUM_ARGS, chromiumInstalled } from './chromium';
import { expectConformance } from './conformance';

const ADMIN_TOKEN = 'alerts-page-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/dashboard');

describe.skipIf(!chromiumInstalled())('the console’s budget and alerts (Billing page) in Chromium', () => {
  let dir: string;
  let app: Standalone;
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

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-alerts-'));
    app = await startStandalone({
      config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN, LOG_LEVEL: 'silent' }),
    });
    acme = (await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' })).id;
    await admin('POST', `/organizations/${acme}/members`, { email: 'ada@acme.test', password: PASSWORD });

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    page.on('console', (message) => {
      // The refused save below is logged by Chromium as a failed resource: that one is expected.
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
            return (error as Error).message;
          }
        })(),
      );
    });
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('sets the monthly budget, its thresholds and the low-balance amount, says what is wrong with a bad one, and fits a phone', async () => {
    await page.goto(`${app.url}/dashboard/`);
    await page.getByLabel('Email').fill('ada@acme.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('link', { name: 'Billing' }).click();
    await page.getByRole('heading', { name: 'Budget and alerts' }).waitFor();
    await expect.poll(() => page.getByLabel('Alert at (% of the budget)').inputValue()).toBe('50, 80, 100');
    expect(await page.getByLabel('Monthly budget (USD)').inputValue()).toBe('');

    await page.getByLabel('Monthly budget (USD)').fill('250');
    await page.getByLabel('Alert at (% of the budget)').fill('90, 25');
    await page.getByLabel('Low-balance alert below (USD)').fill('12.5');
    await page.getByRole('button', { name: 'Save alerts' }).click();
    await page.getByText('Alerts saved.').waitFor();
    expect(await page.getByLabel('Alert at (% of the budget)').inputValue()).toBe('25, 90');
    expect((await admin('GET', `/organizations/${acme}`)).alerts).toEqual({ monthly_budget: 250, budget_thresholds: [25, 90], low_balance: 12.5 });
    await page.screenshot({ path: join(ARTIFACTS, 'billing-alerts.png'), fullPage: true });

    await page.getByLabel('Alert at (% of the budget)').fill('0');
    await page.getByRole('button', { name: 'Save alerts' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain("'budget_thresholds[0]'");
    expect((await admin('GET', `/organizations/${acme}`)).alerts.budget_thresholds).toEqual([25, 90]);
    // What was typed stays, to be corrected.
    expect(await page.getByLabel('Alert at (% of the budget)').inputValue()).toBe('0');
    expect(await page.getByLabel('Low-balance alert below (USD)').inputValue()).toBe('12.5');

    // Empty turns the budget off.
    await page.getByLabel('Alert at (% of the budget)').fill('25, 90');
    await page.getByLabel('Monthly budget (USD)').fill('');
    await page.getByRole('button', { name: 'Save alerts' }).click();
    await page.getByText('Alerts saved.').waitFor();
    expect((await admin('GET', `/organizations/${acme}`)).alerts).toEqual({ monthly_budget: null, budget_thresholds: [25, 90], low_balance: 12.5 });

    await page.setViewportSize({ width: 375, height: 800 });
    await page.reload();
    await page.getByRole('heading', { name: 'Budget and alerts' }).waitFor();
    const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
    expect(overflow).toBeLessThanOrEqual(0);
    await page.screenshot({ path: join(ARTIFACTS, 'billing-alerts-375.png'), fullPage: true });

    expect(consoleErrors).toEqual([]);
    expect((await Promise.all(answers)).filter(Boolean)).toEqual([]);
  });
});
