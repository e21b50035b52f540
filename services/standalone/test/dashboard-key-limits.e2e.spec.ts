import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadStandaloneConfig } from '../src/config';
import { type Standalone, startStandalone } from '../src/standalone';
import { CHROMIUM, CHROMIUM_ARGS, chromiumInstalled } from './chromium';
import { watchConsole } from './console-browser';

const ADMIN_TOKEN = 'dashboard-key-limits-admin-token-0123456789';
const PASSWORD = 'correct horse battery staple';
const ARTIFACTS = resolve(import.meta.dirname, '../../../test-artifacts/dashboard');
const CHAT = { model: 'chat-2', messages: [{ role: 'user', content: 'Name one vegetable.' }], max_tokens: 8 };
const VIDEO = { model: 'video-2', prompt: 'A paper boat drifting down a rainy street', seconds: '4', size: '1280x720' };

/** The Keys page (issue 30): each key's allowed models and budget with its spend, changed by a member. */
describe.skipIf(!chromiumInstalled())('the console’s key limits in Chromium', () => {
  let dir: string;
  let app: Standalone;
  let browser: Browser;
  let page: Page;
  let backend: { id: string; key: string };
  let chatSpend: number;
  const consoleErrors: string[] = [];
  /** Every console API answer, checked against the OpenAPI document: what failed to match. */
  const answers: Promise<string | undefined>[] = [];

  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return (await res.json()) as any;
  };
  const v1 = async (key: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${app.url}/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
  const fitsWidth = () =>
    page.evaluate(() => {
      const { document: doc, innerWidth } = globalThis as any;
      return [...doc.querySelectorAll('body *')]
        .filter((e: any) => e.getBoundingClientRect().right > innerWidth + 1 && !e.closest('.table-wrap') && !e.closest('dialog:not([open])'))
        .map((e: any) => `${e.tagName.toLowerCase()}.${e.className}`);
    });
  const row = () => page.locator('tr', { hasText: 'backend' });
  const cellText = async (testId: string) => ((await row().getByTestId(testId).innerText()) as string).replace(/\s+/g, ' ').trim();

  beforeAll(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    dir = await mkdtemp(join(tmpdir(), 'oc-dashboard-key-limits-'));
    app = await startStandalone({
      config: loadStandaloneConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN, LOG_LEVEL: 'silent', SIM_VIDEO_DURATION_MS: '600000', CHAT_SIMULATOR_WORD_DELAY_MS: '1' }),
    });
    const acme = await admin('POST', '/organizations', { name: 'Acme', tier: 'standard' });
    await admin('POST', `/organizations/${acme.id}/credits`, { amount: 10 });
    await admin('POST', `/organizations/${acme.id}/members`, { email: 'ada@acme.test', password: PASSWORD });
    backend = await admin('POST', `/organizations/${acme.id}/keys`, { name: 'backend', scopes: ['chat:write', 'video:write'], budget: { daily: 5 } });
    expect((await v1(backend.key, 'POST', '/chat/completions', CHAT)).status).toBe(200);
    chatSpend = (await admin('GET', `/organizations/${acme.id}/keys`)).data.find((k: { id: string }) => k.id === backend.id).spend.today;
    expect(chatSpend).toBeGreaterThan(0);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    watchConsole(page, app.url, consoleErrors, answers);
    await page.goto(`${app.url}/dashboard/`);
    await page.getByLabel('Email').fill('ada@acme.test');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name: 'API keys' }).click();
    await row().waitFor();
  });

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const usd = (amount: number) => new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: amount < 0.01 ? 6 : 2 }).format(amount);

  it("shows each key's models and what it spent against its budget", async () => {
    expect(await cellText('models')).toBe('All models');
    expect(await cellText('budget')).toBe(`Today: ${usd(chatSpend)} of $5.00 Month: ${usd(chatSpend)} Total: ${usd(chatSpend)}`);
    await shot('key-limits');
  });

  it('lets a member limit the models and budget of a key, applied from its next request', async () => {
    await row().getByRole('button', { name: 'Limits' }).click();
    const dialog = page.getByRole('dialog', { name: 'Limits of “backend”' });
    await dialog.getByLabel('Allowed models').fill('chat-2');
    expect(await dialog.getByLabel('Daily budget (USD)').inputValue()).toBe('5');
    await dialog.getByLabel('Daily budget (USD)').fill(String(chatSpend));
    await dialog.getByLabel('Total budget (USD)').fill('20');
    await shot('key-limits-dialog');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    await expect.poll(() => cellText('models')).toBe('chat-2');
    expect(await cellText('budget')).toBe(
      `Today: ${usd(chatSpend)} of ${usd(chatSpend)} Month: ${usd(chatSpend)} Total: ${usd(chatSpend)} of $20.00`,
    );

    const refused = await v1(backend.key, 'POST', '/chat/completions', CHAT);
    expect(refused.status).toBe(402);
    expect(refused.body.error.code).toBe('key_budget_exceeded');
    expect((await v1(backend.key, 'POST', '/videos', VIDEO)).body.error.code).toBe('model_not_allowed');

    // Emptied fields give every model back and remove the daily limit.
    await row().getByRole('button', { name: 'Limits' }).click();
    await dialog.getByLabel('Allowed models').fill('');
    await dialog.getByLabel('Daily budget (USD)').fill('');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    await expect.poll(() => cellText('models')).toBe('All models');
    expect((await v1(backend.key, 'POST', '/chat/completions', CHAT)).status).toBe(200);
  });

  it('shows a refused change in the dialog', async () => {
    await row().getByRole('button', { name: 'Limits' }).click();
    const dialog = page.getByRole('dialog', { name: 'Limits of “backend”' });
    await dialog.getByLabel('Allowed models').fill('Not A Model');
    await dialog.getByRole('button', { name: 'Save limits' }).click();
    await expect.poll(() => dialog.getByRole('alert').innerText()).toMatch(/allowed_models/);
    await dialog.getByRole('button', { name: 'Cancel' }).click();
  });

  it('creates a key with its allowed models and budget', async () => {
    const form = page.getByRole('region', { name: 'Create a key' });
    await form.getByLabel('Name').fill('frontend');
    await form.getByRole('checkbox', { name: 'chat:write' }).check();
    await form.getByLabel('Allowed models').fill('chat-2, video-2');
    await form.getByLabel('Monthly budget (USD)').fill('2.5');
    await form.getByRole('button', { name: 'Create key' }).click();
    const created = page.locator('tr', { hasText: 'frontend' });
    await created.waitFor();
    expect((await created.getByTestId('models').innerText()).replace(/\s+/g, ' ').trim()).toBe('chat-2 video-2');
    expect((await created.getByTestId('budget').innerText()).replace(/\s+/g, ' ').trim()).toBe(
      'Today: $0.00 Month: $0.00 of $2.50 Total: $0.00',
    );
  });

  it('fits a 375 px wide screen', async () => {
    await page.setViewportSize({ width: 375, height: 800 });
    expect(await fitsWidth()).toEqual([]);
    await shot('key-limits-375');
    await row().getByRole('button', { name: 'Limits' }).click();
    expect(await fitsWidth()).toEqual([]);
    await page.getByRole('dialog', { name: 'Limits of “backend”' }).getByRole('button', { name: 'Cancel' }).click();
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('met no console error but the refused change, and every answer matched the OpenAPI document', async () => {
    expect(consoleErrors.filter((e) => !/status of 400/.test(e))).toEqual([]);
    expect((await Promise.all(answers)).filter(Boolean)).toEqual([]);
  });
});
